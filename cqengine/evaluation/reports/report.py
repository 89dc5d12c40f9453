"""Reports: each experiment's numbers as Markdown (ours beside the paper's), JSON and PNG.

A report is its experiment's section (cqengine.evaluation.reports.sections) between the parts
every report has: the setup beside the paper's, the oracle's verdict, the table of runs;
its JSON holds the numbers, the plan and every run's measurement, its PNGs the figures
(cqengine.evaluation.reports.plots).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from chord.protocol.routing import SUCCESSORS
from cqengine.evaluation.passes.lab import Lab
from cqengine.evaluation.passes.runs import RunResult, RunSpec
from cqengine.evaluation.reports import paper, plots
from cqengine.evaluation.reports.experiments import Plan
from cqengine.evaluation.reports.markdown import n, table
from cqengine.evaluation.reports.sections import SECTIONS

# ---- the parts every report has ---------------------------------------------------------


def setup(lab: Lab, plan: Plan, command: str) -> list[str]:
    c, s = lab.corpus.describe(), lab.scale
    return (
        ["## Setup", "", f"Command: `{command}`", ""]
        + table(
            ["", "ours", "paper"],
            [
                [
                    "ring",
                    f"{s.nodes} simulated Chord nodes (r = {SUCCESSORS} successors)",
                    "1,000 Chord nodes (p2psim)",
                ],
                [
                    "queries",
                    f"{s.queries:,}, mean size {s.mean_size:g} (sd {0.3 * s.mean_size:g})",
                    "100,000, mean size 5",
                ],
                ["documents", f"{c['documents']:,}", "10,000"],
                [
                    "corpus",
                    f"{c['source']}"
                    + (
                        " (synthetic: `cqengine gen-corpus`)"
                        if c["generated"] and "generated" not in c["source"]
                        else ""
                    )
                    + f": {c['vocabulary']:,} terms, {c['unique_terms_per_document']:.0f} unique "
                    f"terms per document",
                    "TREC-1,2-AP: 46,654 terms, 178 unique terms per document",
                ],
                [
                    "Bloom filter",
                    f"{s.bloom_bits} bits, {s.bloom_hashes} hashes",
                    "1K bits, 5 hashes",
                ],
                [
                    "synopsis K",
                    ", ".join(map(str, plan.synopsis_ks))
                    + f" (table2, breakdown: {plan.synopsis_k})",
                    "500 ... 3,000 (Figure 6: 1,000)",
                ],
            ],
        )
        + [
            "",
            f"Every run publishes the documents into a ring that runs the engine's own code "
            f"(cqengine.core.node on the in-memory transport): embedded-tree announcement with "
            f"Observations 1 and 2, Term Dialogue asking each query's rarest unknown term first "
            f"(document frequencies of the corpus), one term per query per round, and Bloom "
            f"filters fetched once per QN. Byte figures are serialized protobuf sizes of requests "
            f"and replies, counted by the ring's ledger. Seed {s.seed}; each document's "
            f"publishing node and each query's home node are seeded choices.",
            "",
        ]
        + (
            []
            if (s.nodes, s.queries, s.docs) == (1000, 100_000, 10_000)
            else [
                f"**This run's scale is not the paper's** ({s.nodes} nodes, {s.queries:,} "
                f"queries, {s.docs:,} documents): absolute numbers are not comparable with the "
                f"paper's, relative ones only loosely.",
                "",
            ]
        )
    )


def oracle_note(runs: dict[RunSpec, RunResult]) -> list[str]:
    alerts = sum(r.oracle["alerted"] for r in {id(r): r for r in runs.values()}.values())
    return [
        "## Oracle",
        "",
        f"Every run's alerts were taken off the subscribers' mailboxes after each document and "
        f"compared with the brute-force matcher "
        f"(cqengine.evaluation.setup.matcher.match_documents): "
        f"{len(runs)} runs, {alerts:,} alerts, none missing, none unexpected. A workload's runs "
        f"are one pass in which every QN resolves its candidates under each of the workload's "
        f"indexes (all but one as shadow indexes, whose matches reach the DN and are compared "
        f"with the matcher alike), both ways (TD and BF) and as every piggyback depth would have "
        f"pruned them; within an index all of them found the same matches at every QN.",
        "",
    ]


def runs_table(runs: dict[RunSpec, RunResult]) -> list[str]:
    rows = []
    for s, r in sorted(runs.items()):
        m = r.measure(s.documents)
        rows.append(
            [
                s.name,
                s.documents,
                f"{m['documents']:,}",
                n(m["queries_per_doc"]),
                n(m["resolution_bytes_per_doc"]),
                n(m["announce_bytes_per_doc"]),
                n(m["alerts_per_doc"]),
                f"{r.seconds['index']:.0f} + {r.seconds['publish']:.0f}",
            ]
        )
    return (
        ["## Runs", ""]
        + table(
            [
                "run",
                "documents",
                "measured",
                "queries/doc",
                "resolution B/doc",
                "announcement B/doc",
                "alerts/doc",
                "seconds (index + publish; a pass's runs share both)",
            ],
            rows,
        )
        + [""]
    )


def write(
    experiment,
    plan: Plan,
    lab: Lab,
    numbers: dict,
    runs: dict[RunSpec, RunResult],
    out: Path,
    command: str,
    started: float,
) -> list[Path]:
    """NAME.md, NAME.json and the figures' PNGs, in out."""
    out.mkdir(parents=True, exist_ok=True)
    pngs = plots.draw(experiment.name, numbers, out)
    md = (
        [
            f"# {experiment.title}",
            "",
            f"cqengine, {time.strftime('%Y-%m-%d %H:%M')}; the paper: Zhu, *Bandwidth-Efficient "
            f"Continuous Query Processing over DHTs*.",
            "",
        ]
        + setup(lab, plan, command)
        + SECTIONS[experiment.name](numbers, lab)
        + oracle_note(runs)
        + runs_table(runs)
        + ["Figures: " + ", ".join(pngs), ""]
    )
    (out / f"{experiment.name}.md").write_text("\n".join(md))
    data = {
        "experiment": experiment.name,
        "title": experiment.title,
        "command": command,
        "corpus": lab.corpus.describe(),
        "plan": plan.to_json(),
        "results": numbers,
        "paper": {
            "table2_skew": paper.TABLE2_SKEW,
            "quoted": {f"{w}: {k}": v for (w, k), v in paper.QUOTED.items()},
            "sap_over_mhi_max": paper.SAP_OVER_MHI_MAX,
        },
        "runs": {s.name: run_json(s, r) for s, r in sorted(runs.items())},
        "seconds": time.monotonic() - started,
        "memory": lab.memory(),
    }
    (out / f"{experiment.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    return [out / f"{experiment.name}.md", out / f"{experiment.name}.json"] + [
        out / p for p in pngs
    ]


def run_json(spec: RunSpec, r: RunResult) -> dict:
    return {
        "spec": spec.to_json(),
        "documents": spec.documents,
        "published": r.spec.documents,
        "metrics": r.measure(spec.documents),
        "load_percentiles": r.load_percentiles(),
        "oracle": r.oracle,
        "seconds": r.seconds,
        "longest_lists": r.longest,
        "ledger_whole_run": r.ledger,
    }
