"""How long does one paper-scale configuration take on the simulator, and how much memory?

One configuration: a 1,000-node ring, 100,000 queries (mean size 5) indexed by one
strategy, 10,000 documents published and resolved by Term Dialogue and by Bloom filters —
exactly what `cqengine experiment` runs per point: the two runs in one pass, each checked
against the matcher. Reported per stage: corpus loading, workload, oracle, indexing,
publishing (workers = cores), the time per run (the pass and the indexing shared out), and
peak resident memory of the main process and of the largest worker. `--resolution td`
times one method's run alone.

    python experiments/bench_sim.py [--corpus PREP_DIR] [--strategy mhi] [--workload skew]
                  [--resolution td,bf] [--piggyback 0] [--docs 10000] [--workers N]

Without --corpus it generates the TREC-AP-like corpus in-process (what `cqengine
gen-corpus --docs 10000` writes, analyzed as `cqengine prep` would). Writes
experiments/results/bench_sim.json (or --out FILE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cqengine.evaluation import EvaluationError
from cqengine.evaluation.passes.lab import Lab
from cqengine.evaluation.passes.runs import IndexSpec, RunSpec
from cqengine.evaluation.reports.evaluate import default_workers, writable
from cqengine.evaluation.setup.inputs import generated, load_prep
from cqengine.evaluation.setup.scale import Scale

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, help="prep output (default: generate in-process)")
    p.add_argument("--strategy", default="mhi")
    p.add_argument("--workload", default="skew")
    p.add_argument("--resolution", default="td,bf", help="td, bf or td,bf (one pass)")
    p.add_argument("--piggyback", type=int, default=0)
    p.add_argument("--synopsis-k", type=int, default=1000, help="SAP-MHI's K")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "bench_sim.json")
    args = p.parse_args(argv)
    try:
        writable(args.out.parent)  # before minutes of runs
    except EvaluationError as e:
        p.error(str(e))

    t0 = time.perf_counter()
    corpus = (
        load_prep(args.corpus) if args.corpus else generated(args.docs, args.seed, 46654, 178.0)
    )
    t_corpus = time.perf_counter() - t0
    scale = Scale(
        nodes=args.nodes, queries=args.queries, docs=args.docs, seed=args.seed, workers=args.workers
    )
    lab = Lab(corpus, scale)
    sk = args.synopsis_k if args.strategy == "sap-mhi" else 0
    specs = [
        RunSpec(IndexSpec(args.strategy, args.workload, sk), r, args.piggyback)
        for r in args.resolution.split(",")
    ]
    t1 = time.perf_counter()
    results = lab.run(specs)
    total = time.perf_counter() - t1
    first = results[specs[0]]
    n = first.measure()["documents"]
    out = {
        "benchmark": "bench_sim",
        "configurations": [s.to_json() for s in specs],
        "scale": {
            "nodes": args.nodes,
            "queries": args.queries,
            "docs": args.docs,
            "workers": args.workers,
            "seed": args.seed,
        },
        "corpus": lab.corpus.describe(),
        "seconds": {
            "corpus": t_corpus,
            **dict(lab.timings),
            "configuration_total": total,
            "per_run": total / len(specs),
            "index": first.seconds["index"],
            "publish": first.seconds["publish"],
        },
        "documents_per_second": n / first.seconds["publish"],
        "ms_per_document_per_worker": 1000 * first.seconds["publish"] * args.workers / n,
        "subscriptions_per_second": args.queries / first.seconds["index"],
        "peak_memory_mib": lab.memory(),
        "runs": [
            {
                "name": s.name,
                "metrics": {k: v for k, v in results[s].measure().items() if k != "ledger"},
                "oracle": results[s].oracle,
            }
            for s in specs
        ],
        "load_percentiles": first.load_percentiles(),
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(
        json.dumps(
            {k: out[k] for k in ("seconds", "documents_per_second", "peak_memory_mib")}, indent=2
        )
    )
    for run in out["runs"]:
        print(run["name"], json.dumps(run["oracle"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
