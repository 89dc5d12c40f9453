"""What an idle ring burns (issue 58): its nodes' CPU while no document comes, by account.

Under load a ring's CPU by stage (bench_live) holds a part that stays at 0.5-0.7
CPU-seconds a second whatever the documents/s: what the ring does for itself. This starts a
ring as `cqengine ring up` does (mutual TLS, data directories, the home log), subscribes
queries through every node, waits for it to settle, then reads every node's meters
(Stats.cpu_seconds, chord.live.meter) twice, `--seconds` apart: CPU-seconds a second over the
ring, by stage and by account, and each node's process CPU from /proc beside them.

    python experiments/bench_idle.py [--nodes 8] [--subscriptions 10000] [--seconds 30]

Writes experiments/results/bench_idle.json.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from inputs import RESULTS, workload_queries
from subscribers import subscribe_all

from chord.live.meter import TICKS
from cqengine.live.client import Client
from cqengine.live.costs import cost_by_stage
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes
from cqengine.text.corpus import generate_corpus


def meters(addresses: list[str], credentials) -> Counter:
    """CPU seconds by account so far, summed over the nodes."""
    out: Counter = Counter()
    for a in addresses:
        with Client(a, 10, credentials) as c:
            out.update(dict(c.stats().cpu_seconds))
    return out


def process_cpu(pids: list[int]) -> float:
    """CPU seconds so far of these processes, as the kernel counts them."""
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--subscriptions", type=int, default=10000)
    p.add_argument("--seconds", type=float, default=30.0, help="how long the ring is watched")
    p.add_argument("--settle", type=float, default=20.0, help="seconds before watching")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    docs = list(generate_corpus(400, seed=args.seed))
    queries = workload_queries("text", docs, args.subscriptions, args.seed)
    with tempfile.TemporaryDirectory(prefix="cqengine-idle-") as tmp:
        root = Path(tmp)
        ring = ring_up(args.nodes, root / "ring.json", out=io.StringIO(), data_root=root / "data")
        try:
            addresses, credentials = ring.addresses(), ring.credentials()
            subscribe_all(addresses, queries, args.seed, credentials)
            print(
                f"{args.subscriptions} subscriptions; settling {args.settle:g} s", file=sys.stderr
            )
            time.sleep(args.settle)  # a measurement window, not a wait for a condition
            pids = [e.pid for e in ring.nodes]
            before, cpu_before, start = (
                meters(addresses, credentials),
                process_cpu(pids),
                time.monotonic(),
            )
            time.sleep(args.seconds)
            after, cpu_after = meters(addresses, credentials), process_cpu(pids)
            seconds = time.monotonic() - start
        finally:
            stop_processes(ring.nodes, grace=5.0)
    spent = {k: (after[k] - before[k]) / seconds for k in after if after[k] - before[k] > 0}
    by_stage = cost_by_stage(spent)
    result = {
        "benchmark": "bench_idle",
        "command": "python experiments/bench_idle.py " + " ".join(argv or sys.argv[1:]),
        "nodes": args.nodes,
        "subscriptions": args.subscriptions,
        "seconds": round(seconds, 1),
        "cpu_seconds_a_second": round(sum(spent.values()), 4),
        "process_cpu_seconds_a_second": round((cpu_after - cpu_before) / seconds, 4),
        "by_stage": {k: round(v, 4) for k, v in by_stage.items()},
        "by_account": {k: round(v, 4) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_idle.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
