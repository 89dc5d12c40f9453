"""What a replica pays per alert to keep its copies of mailboxes: taking a home's copy of
numbered alerts (ReplicaIntake.put_alerts) and its copy of their acknowledgements
(ReplicaIntake.put_acknowledged), in process, without I/O.

A store holds --subscriptions subscriptions (replicated here, served elsewhere), each
alerted and acknowledged once before the clock starts, as in a ring that has run a while
(a replica keeping copies as columns tracks a subscription from its first copy on). Each round
a copy of --docs documents, each alerting --per-doc random subscriptions numbered as a
home numbers them, is taken, then every alert of the round before is acknowledged (one
acknowledgement per subscription, as a client acknowledges what it was streamed; the
last round's at the end). The
best of --repeat passes, in microseconds per alert, with the time to fold the copies kept
as columns into their mailboxes at the end (cqengine.core.alerts.copies; a live replica folds
every limits.COPIES_KEPT alerts): the replication row of the live ring's cost table is
twice this at R = 3, once per replica.

    python experiments/bench_replica_intake.py [--subscriptions 100000] [--docs 64]
        [--per-doc 520] [--rounds 6] [--repeat 3] [--name bench_replica_intake]

Writes experiments/results/NAME.json. Compare commits side by side in one sitting (run
with PYTHONPATH set to each): this machine's speed varies from hour to hour.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from cqengine.core.alerts.batches import numbered_runs
from cqengine.core.alerts.mailboxes import Subscription, Subscriptions
from cqengine.core.state import records
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.proto import cqengine_pb2 as pb

RESULTS = Path(__file__).resolve().parent / "results"


def copies(args, rng: random.Random) -> list[tuple[pb.AlertBatch, pb.Acknowledged]]:
    """Each round's copy of alerts, numbered on from the last, and its acknowledgements."""
    next_of = dict.fromkeys(range(1, args.subscriptions + 1), 1)  # after the warm-up
    out = []
    for r in range(args.rounds):
        runs, acked = [], {}
        for d in range(args.docs):
            subs = rng.sample(range(1, args.subscriptions + 1), args.per_doc)
            seqs = [next_of.get(s, 0) for s in subs]
            for s, q in zip(subs, seqs):
                next_of[s] = acked[s] = q + 1
            runs.append(((f"D{r}-{d}", f"title {d}", "snippet"), subs, seqs))
        ack = pb.Acknowledged(subscription_ids=list(acked), firsts=list(acked.values()))
        out.append((numbered_runs(runs), ack))
    return out


def one_pass(args, rounds) -> tuple[float, float, float]:
    """Seconds taking the copies and their acknowledgements, over every round, and then
    folding the copies kept as columns into the mailboxes (cqengine.core.alerts.copies), if
    so kept."""
    subs = Subscriptions()
    for s in range(1, args.subscriptions + 1):
        subs[s] = Subscription(s, b"h" * 32, ["a"], 1, "a", key=s)
    store = RecordStore(InvertedIndex(), subs, 3, time.monotonic)
    everyone = list(subs)
    store.intake.put_alerts(
        numbered_runs([(("warm-up", "", ""), everyone, [0] * len(everyone))]), no
    )
    store.intake.put_acknowledged(
        pb.Acknowledged(subscription_ids=everyone, firsts=[1] * len(everyone))
    )
    _fold(store)
    took = acked = 0.0
    acks = [ack for _, ack in rounds]
    for r, (batch, _) in enumerate(rounds):
        t = time.perf_counter()
        if store.intake.put_alerts(batch, no):
            raise SystemExit("a copy was taken with a gap: the workload is wrong")
        took += time.perf_counter() - t
        # a round's acknowledgements come after the next round's alerts (the last's at once):
        # some alerts are always waiting for theirs, as in a ring
        for ack in acks[max(0, r - 1) : r] + (acks[r:] if r == len(rounds) - 1 else []):
            t = time.perf_counter()
            if store.intake.put_acknowledged(ack):
                raise SystemExit("an acknowledgement of an unknown subscription")
            acked += time.perf_counter() - t
    t = time.perf_counter()
    _fold(store)
    folded = time.perf_counter() - t
    if any(sub.mailbox.queue for sub in subs.values()):
        raise SystemExit("alerts left in a mailbox after every one was acknowledged")
    return took, acked, folded


def no(key: int) -> bool:
    """Whether the store serves a home key: none here."""
    return False


def _fold(store: RecordStore) -> None:
    """The copies a store keeps as columns (if it does) into their mailboxes."""
    if getattr(store, "copied", None) is not None:
        store.intake.copied.fold()


def commit() -> str:
    """The commit of the code measured (PYTHONPATH's, when set), not of this script."""
    here = Path(records.__file__).resolve().parent
    got = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True)
    return got.stdout.decode().strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subscriptions", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=64, help="documents a copy")
    p.add_argument("--per-doc", type=int, default=520, help="alerts a document")
    p.add_argument("--rounds", type=int, default=6, help="copies taken a pass")
    p.add_argument("--repeat", type=int, default=3, help="passes; the best is kept")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default="bench_replica_intake")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    rounds = copies(args, random.Random(args.seed))
    alerts = args.rounds * args.docs * args.per_doc
    passes = [one_pass(args, rounds) for _ in range(args.repeat)]
    took, acked, folded = (min(p[i] for p in passes) for i in range(3))
    result = {
        "benchmark": "bench_replica_intake",
        "command": " ".join(["python", "experiments/bench_replica_intake.py", *sys.argv[1:]]),
        "commit": commit(),
        "subscriptions": args.subscriptions,
        "alerts": alerts,
        "us_per_alert_taken": 1e6 * took / alerts,
        "us_per_alert_acknowledged": 1e6 * acked / alerts,
        "us_per_alert_folded": 1e6 * folded / alerts,
        "us_per_alert": 1e6 * (took + acked + folded) / alerts,
    }
    print(
        f"{result['commit']}: {result['us_per_alert_taken']:.2f} us an alert taken, "
        f"{result['us_per_alert_acknowledged']:.2f} us acknowledged, "
        f"{result['us_per_alert_folded']:.2f} us folded: {result['us_per_alert']:.2f} us "
        f"an alert ({alerts} alerts)"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
