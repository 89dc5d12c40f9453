"""The commands that make data: `prep` and `workload` (Spark jobs), `gen-corpus` (a
synthetic corpus) and `corpus` (real text from installed documentation)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cqengine.cli.options import (
    CliError,
    Parser,
    count,
    defaults_of,
    positive,
    positive_float,
    share,
    spark_options,
)
from cqengine.text.corpus import generate_corpus
from cqengine.text.workload import generate_queries


def add_parsers(sub) -> None:
    add_prep(sub)
    add_workload(sub)
    add_gen_corpus(sub)
    add_corpus(sub)


def add_prep(sub) -> None:
    pr = sub.add_parser(
        "prep", help="Spark: analyze a corpus into documents, term statistics and a summary"
    )
    pr.add_argument(
        "--input",
        nargs="+",
        type=Path,
        required=True,
        metavar="PATH",
        help="TREC files (plain/.gz), JSON Lines (docno, text), or directories of them "
        "or of plain-text files",
    )
    pr.add_argument("--out", type=Path, required=True, metavar="DIR")
    pr.add_argument("--skip-bad", action="store_true", help="skip and count malformed documents")
    spark_options(pr)


def add_workload(sub) -> None:
    w = sub.add_parser("workload", help="Spark: generate a query workload from term statistics")
    w.add_argument(
        "--stats", type=Path, required=True, metavar="DIR", help="output of `cqengine prep`"
    )
    w.add_argument("--kind", choices=("uniform", "skew", "inverskew"), required=True)
    w.add_argument("--queries", type=int, required=True, metavar="N")
    d = defaults_of(generate_queries)
    w.add_argument(
        "--mean-size",
        type=positive_float,
        default=d["mean_size"],
        metavar="V",
        help="mean query size; sizes ~ Normal(V, 0.3V) (default %(default)s)",
    )
    w.add_argument("--seed", type=count, default=d["seed"], help="(default %(default)s)")
    w.add_argument(
        "--boolean",
        type=share,
        default=0.0,
        metavar="SHARE",
        help="this share (0-1) of the queries, chosen by seed, rewritten with OR, NOT, "
        "phrases and groups; each query's text is its `query` (default %(default)s)",
    )
    w.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="writes queries.parquet, queries.jsonl and summary.json here",
    )
    spark_options(w)


def add_gen_corpus(sub) -> None:
    g = sub.add_parser("gen-corpus", help="write a synthetic TREC corpus (Zipfian pseudo-words)")
    g.add_argument("--docs", type=count, required=True, metavar="N")
    g.add_argument(
        "--out",
        type=Path,
        required=True,
        help="a file (.gz for gzip), or with --files a directory of part files",
    )
    g.add_argument(
        "--files", type=count, default=1, help="split over this many gzip files (default 1)"
    )
    d = defaults_of(generate_corpus)
    g.add_argument("--seed", type=count, default=d["seed"], help="(default %(default)s)")
    g.add_argument(
        "--vocab",
        type=count,
        default=d["vocab_size"],
        help="vocabulary size (default %(default)s: TREC-AP's)",
    )
    g.add_argument(
        "--mean-terms",
        type=positive_float,
        default=d["mean_terms"],
        help="mean unique terms per document (default %(default)s: TREC-AP's)",
    )
    g.add_argument(
        "--zipf",
        type=positive_float,
        default=d["zipf_s"],
        help="Zipf exponent of term popularity (default %(default)s)",
    )


def add_corpus(sub) -> None:
    cp = sub.add_parser("corpus", help="build a corpus of real text from installed documentation")
    cp_sub = cp.add_subparsers(
        dest="corpus_command", required=True, metavar="SOURCE", parser_class=Parser
    )
    cd = cp_sub.add_parser(
        "debian",
        help="the HTML documentation Debian packages put under /usr/share/doc, as TREC files",
    )
    cd.add_argument("--out", type=Path, required=True, metavar="DIR", help="where to write it")
    cd.add_argument(
        "--packages",
        nargs="+",
        metavar="PACKAGE",
        help="whose documentation (default: the newest postgresql-doc-NN installed, 15 on "
        "Debian 12, and debian-handbook; apt-get install them first)",
    )
    cd.add_argument("--docs", type=positive, metavar="N", help="at most N documents, spread evenly")
    cd.add_argument(
        "--words",
        type=positive,
        default=450,
        metavar="W",
        help="long pages are cut at paragraph breaks into documents of about W words "
        "(default %(default)s, news-article sized)",
    )
    cd.add_argument("--doc-root", type=Path, default=Path("/usr/share/doc"), help=argparse.SUPPRESS)


def spark_session(args: argparse.Namespace):
    from cqengine.spark.session import session

    try:
        return session(args.master)
    except Exception as e:  # the JVM failed to start: say what to check, not a Py4J trace
        raise CliError(
            f"Spark could not start ({type(e).__name__}); it needs Java 17+ on PATH and a "
            f"reachable master"
        ) from None


def run_spark_job(args: argparse.Namespace, job) -> int:
    """Start Spark, run one job on it, print the job's summary as JSON; a refusal is one line."""
    import json

    from cqengine.spark.prep import PrepError
    from cqengine.spark.workload_job import WorkloadError

    spark = spark_session(args)
    try:
        summary = job(spark)
    except (PrepError, WorkloadError) as e:
        raise CliError(str(e)) from None
    finally:
        spark.stop()
    print(json.dumps(summary, indent=2))
    return 0


def cmd_prep(args: argparse.Namespace) -> int:
    from cqengine.spark.prep import run_prep

    for path in args.input:  # before the JVM starts
        if not path.exists():
            raise CliError(f"{path}: no such file or directory")
    return run_spark_job(
        args, lambda spark: run_prep(spark, args.input, args.out, args.skip_bad, args.partitions)
    )


def cmd_workload(args: argparse.Namespace) -> int:
    from cqengine.spark.workload_job import run_workload

    if not (args.stats / "terms.parquet").exists():  # before the JVM starts
        raise CliError(f"{args.stats}: no terms.parquet here; run `cqengine prep` first")
    return run_spark_job(
        args,
        lambda spark: run_workload(
            spark,
            args.stats,
            args.kind,
            args.queries,
            args.mean_size,
            args.seed,
            args.out,
            args.partitions,
            boolean=args.boolean,
        ),
    )


def cmd_gen_corpus(args: argparse.Namespace) -> int:
    from cqengine.progress import Progress
    from cqengine.text.corpus import write_corpus, write_corpus_files

    if args.docs == 0 or args.files == 0 or args.vocab == 0:
        raise CliError("--docs, --files and --vocab must be positive")
    kw = dict(seed=args.seed, vocab_size=args.vocab, mean_terms=args.mean_terms, zipf_s=args.zipf)
    start = time.monotonic()
    if args.files == 1:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_corpus(args.out, args.docs, **kw)
        where = str(args.out)
    else:
        progress = Progress("generating", args.docs)
        paths = write_corpus_files(
            args.out, args.docs, args.files, progress=lambda k: progress.update(k, k), **kw
        )
        progress.close()
        where = f"{len(paths)} files in {args.out}"
    print(f"wrote {args.docs} documents ({where}) in {time.monotonic() - start:.1f}s")
    return 0


def cmd_corpus(args: argparse.Namespace) -> int:
    from cqengine.text.debian import CorpusError, build

    start = time.monotonic()
    try:
        summary = build(
            args.out,
            args.packages,
            args.docs,
            args.words,
            args.doc_root,
            progress=lambda s: print(s, file=sys.stderr, flush=True),
        )
    except CorpusError as e:
        raise CliError(str(e)) from None
    for p in summary["packages"]:
        print(f"{p['package']} {p['version'] or '(version unknown)'}: {p['documents']} documents")
    print(
        f"wrote {summary['documents']} documents ({summary['words']} words) to {args.out} in "
        f"{time.monotonic() - start:.1f}s; `cqengine prep --input {args.out}/*.trec.gz` "
        "analyzes them"
    )
    return 0


COMMANDS = {
    "prep": cmd_prep,
    "workload": cmd_workload,
    "gen-corpus": cmd_gen_corpus,
    "corpus": cmd_corpus,
}
