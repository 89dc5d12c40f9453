"""Churn on a live loopback ring: nothing lost while nodes crash, restart, join and leave.

For each scenario a fresh ring of N node processes (`ring up`, data directories, three
replicas: the command line's defaults) gets S subscriptions through random nodes; every
home's subscriptions are read on one open stream (`Client.alerts`, which follows them to
whichever node serves them); a publisher sends documents at a steady rate to random live
nodes, and sends a document again elsewhere when a node refuses it or does not answer
(counted: "reported failed"). While it publishes:

- `kill`: 30% of the nodes are killed with SIGKILL at once, within what the ring promises
  to survive: no R of them consecutive on the ring (with R replicas, R consecutive
  failures may lose records by design), and, on the home log (the default), fewer than a
  majority of any M consecutive (a log of M members stops with its majority);
- `restart`: every node in turn stops (SIGTERM) and starts again from its data directory,
  the next once the ring is whole and fully replicated again;
- `churn`: 4 new nodes join and 4 others leave gracefully, one every few seconds.

Reported per scenario: subscriptions lost (not served by any node at the end, once every
subscriber has opened its stream again: a key whose log no node took up after the churn
is taken up when a subscriber names it, and counted apart as unled), alerts lost,
duplicated and wrong against the brute-force matcher over every document the ring
accepted, documents reported failed to the publisher (and never accepted), the time from
each event until the ring is whole (every successor, predecessor and finger right) and
every range has all its copies (`ring status`), and the bytes of reconciliation
(Reconcile, Repair) and of replication (Replicate) the live nodes sent meanwhile.

    python experiments/bench_churn.py [--nodes 16] [--subscriptions 5000] [--rate 20]
        [--seconds 150] [--scenarios kill,restart,churn] [--out DIR]

Writes experiments/results/bench_churn.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from subscribers import Streamer, drain, homed, subscribe_all, waiting

from chord.live.server import Timing
from cqengine.cli.options import engine_options, settings_from
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.setup.matcher import document_frequencies, document_terms, matches
from cqengine.live.client import Client, ClientError
from cqengine.live.ports import free_ports
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import observe, under_replicated
from cqengine.live.ring.processes import spawn, stop_processes, wait_serving
from cqengine.live.ringfile import NodeEntry
from cqengine.text.corpus import generate_corpus
from cqengine.text.trec import TrecDoc
from cqengine.text.workload import generate_queries

RESULTS = Path(__file__).resolve().parent / "results"
REPAIR = ("Reconcile", "Reconcile.reply", "Repair", "Repair.reply")
REPLICATE = ("Replicate", "Replicate.reply")
SCENARIOS = ("kill", "restart", "churn")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Live:
    """The ring's node processes as they come and go, and which of them should answer."""

    def __init__(self, ring, timing, log_dir: Path, data_root: Path) -> None:
        self.ring, self.timing, self.log_dir, self.data_root = ring, timing, log_dir, data_root
        self.nodes: dict[str, NodeEntry] = {n.address: n for n in ring.nodes}
        self.every: list[NodeEntry] = list(ring.nodes)  # each process ever started, to stop
        self.credentials = ring.credentials()  # an admin's: the ring runs mutual TLS
        self.lock = threading.Lock()

    def addresses(self) -> list[str]:
        with self.lock:
            return list(self.nodes)

    def gone(self, entries: list[NodeEntry]) -> None:
        with self.lock:
            for e in entries:
                self.nodes.pop(e.address, None)

    def start(self, port: int, join: str) -> NodeEntry:
        entry = spawn(
            port,
            join,
            self.ring.r,
            self.timing,
            self.log_dir,
            data=self.data_root / str(port),
            tls=Path(self.ring.tls) if self.ring.tls else None,
        )
        self.every.append(entry)
        wait_serving(entry, 30, self.credentials)
        with self.lock:
            self.nodes[entry.address] = entry
        return entry

    def stop_all(self) -> None:
        stop_processes(self.every, grace=5.0)


def ledger_bytes(addresses: list[str], kinds: tuple[str, ...], credentials) -> int:
    total = 0
    for a in addresses:
        try:
            with Client(a, 5, credentials) as c:
                total += sum(e.bytes for e in c.stats().ledger if e.kind in kinds)
        except ClientError:
            pass
    return total


def whole_and_replicated(live: Live, since: float, timeout: float = 120.0) -> float | None:
    """Seconds from `since` until the ring of the live nodes is correct and every range has
    all its copies; None if not within the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        addresses = live.addresses()
        view = observe(addresses, live.ring.r, credentials=live.credentials)
        if view.ok and len(view.states) == len(addresses) and not under_replicated(view):
            return time.monotonic() - since
        time.sleep(0.2)
    return None


class Publisher(threading.Thread):
    """Documents at a steady rate, a few per PublishBatch call, to random live nodes; a
    document a node refuses or that meets a node that does not answer goes again to
    another (homes take each docno once)."""

    def __init__(self, live: Live, docs: list[TrecDoc], rate: float, per_call: int, seed: int):
        super().__init__(daemon=True)
        self.live, self.docs, self.rate, self.per_call = live, docs, rate, per_call
        self.rng = random.Random(seed)
        self.accepted: set[str] = set()
        self.failed_attempts = 0  # a document refused, or its call failed: tried again
        self.stop = threading.Event()

    def run(self) -> None:
        every = self.per_call / self.rate
        start = time.monotonic()
        for i in range(0, len(self.docs), self.per_call):
            if self.stop.is_set():
                return
            self.send(self.docs[i : i + self.per_call])
            time.sleep(max(0.0, start + (i // self.per_call + 1) * every - time.monotonic()))

    def send(self, docs: list[TrecDoc], attempts: int = 10) -> None:
        for _ in range(attempts):
            address = self.rng.choice(self.live.addresses())
            try:
                with Client(address, 30, self.live.credentials) as c:
                    replies = c.publish_many([(d.docno, d.text, d.title) for d in docs])
            except ClientError:
                self.failed_attempts += len(docs)
                continue
            self.accepted.update(d.docno for d, r in zip(docs, replies) if r.accepted)
            docs = [d for d, r in zip(docs, replies) if not r.accepted]
            self.failed_attempts += len(docs)
            if not docs:
                return


def defaults() -> Settings:
    """The settings `ring up` starts a ring with when given no engine option."""
    p = argparse.ArgumentParser()
    engine_options(p)
    return settings_from(p.parse_args([]))


def survivable(
    order: list[str], k: int, r: int, m: int, rng: random.Random, spared: int = 1
) -> list[str]:
    """k nodes of a ring (`order`: ring order; the first `spared` never) chosen at random
    within what the ring promises to survive at once: no r of them consecutive (r copies
    of the index), and, on the home log (m members a log), fewer than a majority of any m
    consecutive (a log's members are its home and the next m - 1 nodes)."""
    n = len(order)
    windows = [(r, r)] + ([(m, m // 2 + 1)] if m else [])  # (width, victims too many in it)
    for _ in range(100_000):
        chosen = set(rng.sample(range(spared, n), k))
        if all(
            sum((i + j) % n in chosen for j in range(width)) < too_many
            for width, too_many in windows
            for i in range(n)
        ):
            return [order[i] for i in sorted(chosen)]
    raise ValueError(f"no {k} of {n} nodes found that the ring survives losing at once")


def run_scenario(name: str, args, docs: list[TrecDoc], queries: list[str]) -> dict:
    rng = random.Random(args.seed)
    say(f"{name}: a ring of {args.nodes} nodes")
    with tempfile.TemporaryDirectory(prefix=f"cqengine-churn-{name}-") as tmp:
        root = Path(tmp)
        timing = Timing(call_timeout=args.call_timeout)  # else the command line's defaults
        ring = ring_up(
            args.nodes,
            root / "ring.json",
            timing=timing,
            out=io.StringIO(),
            data_root=root / "data",
        )
        live = Live(ring, timing=timing, log_dir=root / "logs", data_root=root / "data")
        try:
            return churn(name, args, live, docs, queries, rng)
        finally:
            live.stop_all()
            if args.logs:
                dest = args.logs / name
                dest.mkdir(parents=True, exist_ok=True)
                for log in (root / "logs").glob("*.log"):
                    (dest / log.name).write_bytes(log.read_bytes())


def churn(name: str, args, live: Live, docs, queries, rng: random.Random) -> dict:
    addresses, credentials = live.addresses(), live.credentials
    start = time.monotonic()
    subs = subscribe_all(addresses, queries, args.seed, credentials)
    say(f"  {len(subs)} subscriptions in {time.monotonic() - start:.0f}s")
    by_home = defaultdict(list)  # a stream per home key (a node's own may change)
    for s in subs:
        by_home[(s.home, s.home_id)].append(s)
    publishing = len(docs) / args.rate
    streamers = [
        Streamer(h, group, publishing + args.settle, credentials)
        for (h, _), group in by_home.items()
    ]
    for s in streamers:
        s.start()
    publisher = Publisher(live, docs, args.rate, args.per_call, args.seed)
    before = {
        "repair": ledger_bytes(addresses, REPAIR, credentials),
        "replicate": ledger_bytes(addresses, REPLICATE, credentials),
    }
    publisher.start()
    time.sleep(args.warmup)
    events = []
    view = observe(live.addresses(), live.ring.r, credentials=credentials)
    order = [a for a, _ in sorted(view.states.items(), key=lambda kv: kv[1].node.id)]
    if name == "kill":
        promised = defaults()  # what `ring up` started, and so promises
        members = promised.members if promised.home_log else 0
        victims = survivable(order, round(0.3 * args.nodes), promised.replicas, members, rng)
        entries = [live.nodes[a] for a in victims]
        at = time.monotonic()
        for e in entries:
            signal_node(e, signal.SIGKILL)
        live.gone(entries)
        events.append(
            {"event": f"kill -9 of {', '.join(victims)}", "seconds": whole_and_replicated(live, at)}
        )
    elif name == "restart":
        for address in order:
            entry = live.nodes[address]
            at = time.monotonic()
            stop_processes([entry], grace=10.0, how=signal.SIGTERM)
            live.gone([entry])
            join = next(a for a in live.addresses())
            live.start(entry.port, join)
            events.append(
                {"event": f"restart of {address}", "seconds": whole_and_replicated(live, at)}
            )
            say(f"  restarted {address}: whole again after {events[-1]['seconds']}s")
    else:
        spare = free_ports(4)
        leaving = rng.sample(order[1:], 4)
        for port, address in zip(spare, leaving):
            at = time.monotonic()
            live.start(port, live.addresses()[0])
            entry = live.nodes[address]
            stop_processes([entry], grace=10.0, how=signal.SIGTERM)
            live.gone([entry])
            events.append({"event": f"join of :{port}, leave of {address}", "started": at})
            time.sleep(args.gap)
        at = events[-1].pop("started")
        for e in events[:-1]:
            e.pop("started")
        events.append(
            {"event": "until whole after the last", "seconds": whole_and_replicated(live, at)}
        )
    publisher.join()
    say(f"  published {len(publisher.accepted)} documents; waiting for the last alerts")
    for s in streamers:
        s.join(timeout=publishing + args.settle + 60)
    survivors = live.addresses()
    streamed = [a for s in streamers for a in s.got]
    drained = drain(subs, survivors, credentials)  # each pass a new session, from number 0
    after = {
        "repair": ledger_bytes(survivors, REPAIR, credentials),
        "replicate": ledger_bytes(survivors, REPLICATE, credentials),
    }
    served, dropped = homed(survivors, credentials)
    unled, deadline = len(subs) - served, time.monotonic() + 30
    while served < len(subs) and time.monotonic() < deadline:
        # a key no node leads (the node that serves it now holds no copy of its log: it
        # joined just before the log's leader left) is taken over once a subscriber or a
        # DN names it: every subscriber opens its stream once more
        drained += drain(subs, survivors, credentials, seconds=10, once=True)
        served, dropped = homed(survivors, credentials)
    got = streamed + drained
    home_of = {s.subscription_id: s.home for s in subs}
    want = matches(
        {s.subscription_id: s.terms for s in subs},
        {d.docno: document_terms(d.text, d.title) for d in docs if d.docno in publisher.accepted},
    )
    pairs = Counter((sub, docno) for sub, docno, _ in got)
    lost_by_home = defaultdict(list)
    for sub, docno in want - set(pairs):
        lost_by_home[home_of[sub]].append(docno)
    seqs = defaultdict(list)
    for sub, _, seq in got:
        seqs[sub].append(seq)
    gaps = sum(sorted(v) != list(range(len(v))) for v in seqs.values())
    result = {
        "scenario": name,
        "nodes": args.nodes,
        "subscriptions": len(subs),
        "subscriptions_lost": len(subs) - served,
        # of those found after it, those no node had taken up until a subscriber named them
        "subscriptions_unled_after_churn": unled,
        "documents_sent": len(docs),
        "documents_accepted": len(publisher.accepted),
        "documents_reported_failed": publisher.failed_attempts,
        "documents_never_accepted": len(docs) - len(publisher.accepted),
        "alerts_expected": len(want),
        "alerts_lost": len(want - set(pairs)),
        "alerts_duplicated": sum(n - 1 for n in pairs.values()),
        "alerts_wrong": len(set(pairs) - want),
        "subscriptions_numbered_with_gaps": gaps,
        "stream_errors": [s.error for s in streamers if s.error],
        "alerts_on_open_streams": sum(len(s.got) for s in streamers),
        "dropped_by": dict(dropped),
        "lost_by_home": {
            home: {
                "alerts": len(docs),
                "documents": sorted(set(docs))[:3] + ["..."] + sorted(set(docs))[-3:],
            }
            for home, docs in lost_by_home.items()
        },
        "streamed_by_home": dict(
            sum((Counter({s.address: len(s.got)}) for s in streamers), Counter())
        ),
        "alerts_still_waiting": waiting(survivors, credentials, held=False),
        "documents_still_held": waiting(survivors, credentials)
        - waiting(survivors, credentials, held=False),
        "examples": {  # a few of what went wrong, to look into
            "lost": sorted(f"{sub:016x} {docno}" for sub, docno in want - set(pairs))[:5],
            # and who read each copy: the streams open during the run, or the drain after it
            # (an alert read twice under one number was shown again, not numbered again)
            "duplicated": sorted(
                f"{sub:016x} {docno} seqs {sorted(q for s, d, q in got if (s, d) == (sub, docno))}"
                f" streamed {sum((s, d) == (sub, docno) for s, d, _ in streamed)}"
                f" drained {sum((s, d) == (sub, docno) for s, d, _ in drained)}"
                for (sub, docno), n in pairs.items()
                if n > 1
            )[:5],
        },
        "events": events,
        "recovery_seconds_max": max(
            (e["seconds"] for e in events if e.get("seconds") is not None), default=None
        ),
        "repair_bytes": after["repair"] - before["repair"],
        "replicate_bytes": after["replicate"] - before["replicate"],
    }
    say(
        f"  lost {result['subscriptions_lost']} subscriptions, {result['alerts_lost']} alerts; "
        f"{result['alerts_duplicated']} duplicated; recovery {result['recovery_seconds_max']}s"
    )
    return result


def signal_node(entry: NodeEntry, sig: signal.Signals) -> None:
    import os

    with contextlib.suppress(ProcessLookupError):
        os.kill(entry.pid, sig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--subscriptions", type=int, default=5000)
    p.add_argument("--rate", type=float, default=20.0, help="documents per second published")
    p.add_argument(
        "--seconds",
        type=float,
        default=150.0,
        help="seconds of publishing per scenario (rate x seconds documents), events included",
    )
    p.add_argument("--per-call", type=int, default=4, help="documents per PublishBatch call")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of publishing before")
    p.add_argument("--gap", type=float, default=3.0, help="churn: seconds between changes")
    p.add_argument("--settle", type=float, default=40.0, help="seconds for the last alerts")
    p.add_argument(
        "--call-timeout",
        type=float,
        default=Timing().call_timeout,
        help="the nodes' --call-timeout: how long a DN waits for a batch's reports before it "
        "announces it again (default %(default)s)",
    )
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--query-size", type=float, default=3.0, help="mean terms per query")
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--terms", type=float, default=40.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--logs", type=Path, help="keep each scenario's node logs here")
    args = p.parse_args(argv)
    scenarios = args.scenarios.split(",")
    if set(scenarios) - set(SCENARIOS):
        p.error(f"unknown scenario in {args.scenarios}; choose from {', '.join(SCENARIOS)}")
    args.docs = round(args.rate * args.seconds)
    corpus = list(
        generate_corpus(
            args.docs * len(scenarios), seed=args.seed, vocab_size=args.vocab, mean_terms=args.terms
        )
    )
    df = document_frequencies(corpus)
    queries = [
        " ".join(q)
        for q in generate_queries(
            df, args.subscriptions, "skew", mean_size=args.query_size, seed=args.seed
        )
    ]
    runs = []
    result = {
        "benchmark": "bench_churn",
        "command": "python experiments/bench_churn.py " + " ".join(argv or sys.argv[1:]),
        "replicas": 3,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(scenarios):
        docs = corpus[i * args.docs : (i + 1) * args.docs]
        runs.append(run_scenario(name, args, docs, queries))
        (args.out / "bench_churn.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{'scenario':8} {'subs lost':>9} {'alerts':>7} {'lost':>5} {'dup':>4} {'wrong':>5} "
        f"{'failed docs':>11} {'recovery s':>10} {'repair KB':>9}"
    )
    for r in runs:
        rec = r["recovery_seconds_max"]
        print(
            f"{r['scenario']:8} {r['subscriptions_lost']:>9} {r['alerts_expected']:>7} "
            f"{r['alerts_lost']:>5} {r['alerts_duplicated']:>4} {r['alerts_wrong']:>5} "
            f"{r['documents_reported_failed']:>11} {rec if rec is None else round(rec, 1):>10} "
            f"{r['repair_bytes'] / 1000:>9.0f}"
        )
    ok = all(
        r["subscriptions_lost"] == 0
        and r["alerts_lost"] == 0
        and r["alerts_duplicated"] == 0
        and r["alerts_wrong"] == 0
        for r in runs
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
