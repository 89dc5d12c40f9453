"""`cqengine experiment` (the paper's evaluation on the simulator) and `cqengine demo` (a
live ring per strategy, its alerts checked)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from cqengine.cli.options import CliError, count, defaults_of, positive, positive_float
from cqengine.demo import run_demo
from cqengine.evaluation.setup.scale import HEADERS, QUICK, Scale, quick_scale


def names_list(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing")
    return names


def add_parsers(sub) -> None:
    add_experiment(sub)
    add_demo(sub)


def add_experiment(sub) -> None:
    x = sub.add_parser(
        "experiment", help="reproduce the paper's evaluation on the simulator: report, JSON, plots"
    )
    x.add_argument(
        "name",
        choices=("table2", "piggyback", "synopsis", "breakdown", "all", "beyond"),
        help="table2 (Table 2), piggyback (Figure 3), synopsis (Figures 4, 5), breakdown "
        "(Figure 6), or all of them; beyond: the paper's configurations with the techniques "
        "that go past it (term-presence headers), beside the paper's own",
    )
    x.add_argument(
        "--corpus",
        type=Path,
        metavar="DIR",
        help="output of `cqengine prep` (optional with --quick)",
    )
    x.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="writes NAME.md, NAME.json and the figures' PNGs here",
    )
    # the scale's defaults are the paper's, or --quick's; a value given overrides either
    paper, quick = Scale(), QUICK
    x.add_argument(
        "--nodes",
        type=positive,
        help=f"ring size (default {paper.nodes}; --quick: {quick['nodes']})",
    )
    x.add_argument(
        "--queries",
        type=positive,
        help=f"queries per workload (default {paper.queries}; --quick: {quick['queries']})",
    )
    x.add_argument(
        "--docs",
        type=positive,
        help="documents published, the first by docno; synopses sample the first half "
        f"(default {paper.docs}; --quick: {quick['docs']})",
    )
    x.add_argument(
        "--mean-size",
        type=positive_float,
        metavar="V",
        help=f"mean query size; sizes ~ Normal(V, 0.3V) (default {paper.mean_size:g})",
    )
    x.add_argument("--seed", type=count, default=paper.seed, help="(default %(default)s)")
    x.add_argument(
        "--workers", type=positive, help="processes publishing in parallel (default: one per core)"
    )
    x.add_argument(
        "--quick",
        action="store_true",
        help=f"every run small ({quick['nodes']} nodes, {quick['queries']:,} queries, "
        f"{quick['docs']} documents, K scaled to the vocabulary), on a generated corpus unless "
        "--corpus is given: a minute or two; --nodes, --queries, --docs and --mean-size still "
        "set what they name",
    )
    x.add_argument(
        "--header-terms",
        type=positive,
        metavar="K",
        help="beyond: hot terms per term-presence header (default: the measured choice, "
        f"{HEADERS})",
    )
    x.add_argument(
        "--techniques",
        type=names_list,
        metavar="A,B",
        help="beyond: the techniques to run beside the paper's own (default: every one: "
        "headers, balanced, filters, merged, all)",
    )
    x.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def add_demo(sub) -> None:
    demo = sub.add_parser(
        "demo", help="a live ring per strategy: workload, corpus, alerts checked, costs compared"
    )
    d = defaults_of(run_demo)
    demo.add_argument(
        "-n",
        "--nodes",
        type=int,
        default=d["nodes"],
        help="nodes of each ring (default %(default)s)",
    )
    demo.add_argument(
        "--queries",
        type=int,
        default=d["n_queries"],
        help="queries subscribed (default %(default)s)",
    )
    demo.add_argument(
        "--docs", type=int, default=d["n_docs"], help="documents published (default %(default)s)"
    )
    demo.add_argument("--seed", type=int, default=d["seed"], help="(default %(default)s)")


def cmd_experiment(args: argparse.Namespace) -> int:
    from cqengine.evaluation import EvaluationError
    from cqengine.evaluation.reports.evaluate import corpus_for, default_workers, evaluate

    scale = (
        quick_scale(args.seed, args.workers or default_workers())
        if args.quick
        else Scale(seed=args.seed, workers=args.workers or default_workers())
    )
    given = {
        k: v
        for k, v in (
            ("nodes", args.nodes),
            ("queries", args.queries),
            ("docs", args.docs),
            ("mean_size", args.mean_size),
        )
        if v is not None
    }
    scale = replace(scale, **given)
    command = (
        "cqengine " + " ".join(sys.argv[1:])
        if sys.argv[1:2] == ["experiment"]
        else f"cqengine experiment {args.name}"
    )
    try:
        corpus = corpus_for(args.corpus, args.quick, args.seed, scale.docs)
        if args.quick and args.docs is None:  # a small prep output is used whole
            scale.docs = min(scale.docs, len(corpus))
        if args.name == "beyond":
            from cqengine.evaluation.reports.beyond import beyond

            headers = args.header_terms or HEADERS
            files = beyond(
                corpus, scale, args.out, command, args.quiet, headers, names=args.techniques
            )
        else:
            files = evaluate(args.name, corpus, scale, args.out, command, args.quick, args.quiet)
    except EvaluationError as e:
        raise CliError(str(e)) from None
    for f in files:
        print(f)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    return 0 if run_demo(args.nodes, args.queries, args.docs, args.seed) else 1


COMMANDS = {"experiment": cmd_experiment, "demo": cmd_demo}
