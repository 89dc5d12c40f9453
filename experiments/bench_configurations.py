"""How long does each paper-scale configuration take alone, and which meet the 2-minute goal?

Runs experiments/bench_sim.py once per configuration (strategy x workload x resolution
method, one method alone, as a user running one configuration would), each in a process of
its own so that its peak memory is its own, and gathers what each reports: seconds in all,
to index and to publish, peak memory, queries and alerts per document, and whether every
alert equalled the matcher's.

    python experiments/bench_configurations.py [--corpus PREP_DIR] [--strategies ri,oi,mhi,sap-mhi]
        [--workloads uniform,skew,inverskew] [--resolutions td] [--goal 120] [--out FILE]
        [-- MORE BENCH_SIM ARGUMENTS]

Without --corpus each configuration generates its corpus as bench_sim.py does.

Writes experiments/results/bench_configurations.json (or --out FILE). Ten to forty minutes
on 2 cores, depending on the configurations chosen.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.settings import RESOLUTIONS
from cqengine.evaluation import EvaluationError
from cqengine.evaluation.reports.evaluate import writable
from cqengine.evaluation.reports.experiments import WORKLOADS

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def choices(text: str, allowed, what: str) -> list[str]:
    got = [t for t in text.split(",") if t]
    bad = [t for t in got if t not in allowed]
    if bad or not got:
        raise argparse.ArgumentTypeError(
            f"{what}: {', '.join(bad) or 'none'} (choose from {', '.join(allowed)})"
        )
    return got


def summary(r: dict, goal: float) -> dict:
    """What one bench_sim result says of its configuration."""
    (run,) = r["runs"]
    s, o, m = r["seconds"], run["oracle"], run["metrics"]
    return {
        "configuration": run["name"],
        "seconds": s["configuration_total"],
        "index_seconds": s["index"],
        "publish_seconds": s["publish"],
        "under_goal": s["configuration_total"] < goal,
        "peak_memory_mib": r["peak_memory_mib"],
        "queries_per_doc": m["queries_per_doc"],
        "alerts_per_doc": m["alerts_per_doc"],
        "resolution_bytes_per_doc": m["resolution_bytes_per_doc"],
        "alerts_equal_matcher": not (
            o["missing"] or o["unexpected"] or o["wrong_docno"] or o["disagreements"]
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, help="prep output (default: each run generates one)")
    p.add_argument(
        "--strategies",
        type=lambda t: choices(t, STRATEGIES, "--strategies"),
        default=list(STRATEGIES),
    )
    p.add_argument(
        "--workloads", type=lambda t: choices(t, WORKLOADS, "--workloads"), default=list(WORKLOADS)
    )
    p.add_argument(
        "--resolutions", type=lambda t: choices(t, RESOLUTIONS, "--resolutions"), default=["td"]
    )
    p.add_argument(
        "--goal",
        type=float,
        default=120.0,
        help="seconds a configuration should take (default 120)",
    )
    p.add_argument("--out", type=Path, default=RESULTS / "bench_configurations.json")
    p.add_argument(
        "bench_args", nargs="*", help="after --: more bench_sim.py arguments (e.g. --docs 2000)"
    )
    args = p.parse_args(argv)
    try:
        writable(args.out.parent)  # before many minutes of runs
    except EvaluationError as e:
        p.error(str(e))
    todo = [(s, w, r) for w in args.workloads for s in args.strategies for r in args.resolutions]
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, (strategy, workload, resolution) in enumerate(todo, 1):
            out = Path(tmp) / f"{strategy}_{workload}_{resolution}.json"
            cmd = [
                sys.executable,
                str(HERE / "bench_sim.py"),
                "--strategy",
                strategy,
                "--workload",
                workload,
                "--resolution",
                resolution,
                "--out",
                str(out),
                *args.bench_args,
            ]
            if args.corpus:
                cmd += ["--corpus", str(args.corpus)]
            print(
                f"[{i}/{len(todo)}] {strategy}/{workload}/{resolution} ...",
                file=sys.stderr,
                flush=True,
            )
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                print(
                    f"bench_configurations: {strategy}/{workload}/{resolution} failed",
                    file=sys.stderr,
                )
                return 1
            rows.append(summary(json.loads(out.read_text()), args.goal))
            print(
                f"[{i}/{len(todo)}] {rows[-1]['configuration']}: {rows[-1]['seconds']:.0f} s "
                f"(publishing {rows[-1]['publish_seconds']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    result = {
        "benchmark": "bench_configurations",
        "goal_seconds": args.goal,
        "corpus": str(args.corpus) if args.corpus else "generated",
        "bench_args": args.bench_args,
        "seconds": time.perf_counter() - started,
        "under_goal": sum(r["under_goal"] for r in rows),
        "configurations": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for r in rows:
        print(
            f"{r['configuration']:32s} {r['seconds']:7.1f} s  "
            f"{'under' if r['under_goal'] else 'OVER '} the goal  {r['queries_per_doc']:9.0f} "
            f"queries/doc  {r['alerts_per_doc']:6.1f} alerts/doc"
        )
    print(f"{result['under_goal']} of {len(rows)} configurations under {args.goal:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
