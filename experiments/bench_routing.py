"""Lookup path length in the simulator for N = 16 ... 4,096 nodes.

For each ring size, random keys are looked up from random nodes over an instantly built
ring; every answer is checked against the oracle. Two successor-list lengths are run:
r = 1 is the Chord paper's setting (fingers only, mean near 1/2 log2 N); r = 8 is our
default, where the successor list finishes the last few hops.

    python experiments/bench_routing.py [--sizes 16,32,...] [--lookups 4000] [--seed 1]

Writes experiments/results/bench_routing.json and bench_routing.png.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from chord.simulation.simulator import Simulator

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SIZES = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


def measure(n: int, r: int, lookups: int, seed: int) -> dict:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    sim = Simulator(r=r, seed=seed)
    sim.build_instant([f"10.{i >> 8 & 255}.{i & 255}.1:7000" for i in range(n)])
    build_s = time.perf_counter() - t0
    oracle, addresses = sim.oracle(), sorted(sim.nodes)
    sim.ledger.reset()
    hops = []
    t0 = time.perf_counter()
    for _ in range(lookups):
        key = rng.getrandbits(64)
        owner, h = sim.lookup(rng.choice(addresses), key)
        if owner != oracle.owner(key):
            raise SystemExit(
                f"lookup of {key:x} in a {n}-node ring found {owner}, not {oracle.owner(key)}"
            )
        hops.append(h)
    lookup_s = time.perf_counter() - t0
    cuts = statistics.quantiles(hops, n=100, method="inclusive")
    traffic = sim.ledger.total()
    return {
        "nodes": n,
        "successors": r,
        "lookups": lookups,
        "mean": statistics.fmean(hops),
        "p1": cuts[0],
        "p50": statistics.median(hops),
        "p99": cuts[98],
        "max": max(hops),
        "half_log2_n": 0.5 * math.log2(n),
        "messages_per_lookup": traffic.messages / lookups,
        "bytes_per_lookup": traffic.bytes / lookups,
        "build_seconds": build_s,
        "lookups_per_second": lookups / lookup_s,
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in sorted({row["successors"] for row in rows}):
        mine = [row for row in rows if row["successors"] == r]
        ns = [row["nodes"] for row in mine]
        mean = [row["mean"] for row in mine]
        ax.errorbar(
            ns,
            mean,
            yerr=[
                [m - row["p1"] for m, row in zip(mean, mine)],
                [row["p99"] - m for m, row in zip(mean, mine)],
            ],
            marker="o",
            capsize=3,
            label=f"mean hops, r={r} (bars: p1-p99)",
        )
    ns = sorted({row["nodes"] for row in rows})
    ax.plot(ns, [0.5 * math.log2(n) for n in ns], "k--", label="½·log2 N (Chord paper)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("nodes N")
    ax.set_ylabel("lookup hops")
    ax.set_title("Chord lookup path length in the simulator")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="comma-separated ring sizes (default %(default)s)",
    )
    p.add_argument(
        "--successors", default="1,8", help="successor-list lengths (default %(default)s)"
    )
    p.add_argument("--lookups", type=int, default=4000, help="lookups per configuration")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rs = [int(s) for s in args.successors.split(",")]
    rows = []
    for r in rs:
        for n in sizes:
            row = measure(n, r, args.lookups, args.seed)
            rows.append(row)
            print(
                f"r={r:<2} N={n:<5} hops mean {row['mean']:.2f} (½log2N {row['half_log2_n']:.2f}) "
                f"p1 {row['p1']:.0f} p99 {row['p99']:.0f}  build {row['build_seconds']:.2f}s  "
                f"{row['lookups_per_second']:.0f} lookups/s",
                file=sys.stderr,
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "bench_routing",
        "seed": args.seed,
        "python": sys.version.split()[0],
        "rows": rows,
    }
    (args.out / "bench_routing.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(rows, args.out / "bench_routing.png")
    print(f"wrote {args.out / 'bench_routing.json'} and {args.out / 'bench_routing.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
