"""Preprocessing throughput: `cqengine prep` over generated corpora on an embedded Spark.

For each size, a TREC corpus with TREC-AP's statistics (46,654-term vocabulary, 178 unique
terms per document) is generated into 8 gzip part files, then preprocessed with
local[2]; the time of the job alone (Spark already started) gives documents per second.

    python experiments/bench_prep.py [--sizes 10000,100000] [--master local[2]]

Writes experiments/results/bench_prep.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from cqengine.spark.prep import run_prep
from cqengine.spark.session import session
from cqengine.text.corpus import write_corpus_files

RESULTS = Path(__file__).resolve().parent / "results"


def measure(spark, n: int, work: Path, files: int, seed: int) -> dict:
    corpus = work / f"corpus-{n}"
    t0 = time.perf_counter()
    write_corpus_files(corpus, n, files, seed=seed)
    generate_s = time.perf_counter() - t0
    print(f"generated {n} documents in {generate_s:.1f}s", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    summary = run_prep(spark, [corpus], work / f"prep-{n}")
    prep_s = time.perf_counter() - t0
    return {
        "documents": n,
        "files": files,
        "generate_seconds": generate_s,
        "prep_seconds": prep_s,
        "documents_per_second": n / prep_s,
        "vocabulary": summary["vocabulary"],
        "unique_terms_per_document": summary["unique_terms_per_document"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    spark = session(args.master, app="bench-prep")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-prep-") as tmp:
            for n in (int(s) for s in args.sizes.split(",")):
                rows.append(measure(spark, n, Path(tmp), args.files, args.seed))
                print(
                    f"{n} documents: {rows[-1]['documents_per_second']:.0f} docs/s", file=sys.stderr
                )
    finally:
        spark.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "bench_prep", "master": args.master, "rows": rows}
    (args.out / "bench_prep.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
