"""What OR, NOT and phrases cost, and what merging identical queries saves, on the
simulator running the engine's own code.

1. Boolean beside conjunctive: one Skew workload of conjunctions (its terms drawn from the
   corpus's document frequencies), and the same draws rewritten into the query
   language's forms (`cqengine.text.workload.boolean_workload`: a b OR c, a b -x, a phrase
   with the rest, (a OR x) b -"p q"; phrases runs of the documents' own words), each
   subscribed on its own ring of NODES nodes, the documents published one by one, by Term
   Dialogue and by Bloom filters. Every alert is checked against the matcher
   (cqengine.evaluation.setup.matcher: match_documents for conjunctions, match_queries for the
   language). Reported per document: messages and bytes by kind, candidates, the last
   round's questions (negated terms, phrases), CPU seconds.
2. Merging: SUBSCRIBERS subscriptions of DISTINCT boolean queries, each subscriber picking
   a query with Zipf popularity (the query of rank r with weight 1/r, seeded), on MHI
   (identical queries file under one key) with merging on and off: index entries (records)
   and block columns, candidates, resolution bytes and messages per document, CPU.

    python experiments/bench_boolean.py [--corpus DIR_OF_TREC_FILES] [--nodes 1000]
        [--queries 10000] [--docs 1000] [--subscribers 10000] [--distinct 1000]

Without --corpus it generates a TREC-AP-like corpus in-process. Writes
experiments/results/bench_boolean.json (or --out FILE).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

from simulated import check, corpus_options, load, subscribed

from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import (
    document_frequencies,
    document_sequence,
    document_terms,
    match_documents,
    match_queries,
)
from cqengine.text.analysis import analyze
from cqengine.text.trec import TrecDoc
from cqengine.text.workload import boolean_workload

RESULTS = Path(__file__).resolve().parent / "results"


def run(
    nodes: int,
    settings: Settings,
    queries: list[str],
    docs: list[TrecDoc],
    seed: int,
    merge: bool = True,
) -> tuple[dict, list, list]:
    """Subscribe, publish one by one, collect: the costs per document, the replies, and
    every alert (subscription, docno)."""
    sim = EngineSimulator(nodes, settings, seed=seed)
    for e in sim.engines.values():
        e.index.merge = merge
    replies = subscribed(sim, queries)
    kinds: Counter = Counter()
    counters: Counter = Counter()
    cpu = time.process_time()
    for d in docs:
        r = sim.publish(d.docno, d.text, d.title)
        for kind, c in r.kinds.items():
            kinds[kind, "messages"] += c.messages
            kinds[kind, "bytes"] += c.bytes
        counters.update(r.counters)
    cpu = time.process_time() - cpu
    alerts = sim.alerts()
    n = len(docs)
    columns = sum(len(b) for e in sim.engines.values() for b in map(e.index.block, e.index.keys()))
    out = {
        "per_document": {
            kind: {"messages": kinds[kind, "messages"] / n, "bytes": kinds[kind, "bytes"] / n}
            for kind in sorted({k for k, _ in kinds})
        },
        "candidates_per_doc": counters["candidates"] / n,
        "asked_negated_per_doc": counters["asked:negated"] / n,
        "asked_phrases_per_doc": counters["asked:phrases"] / n,
        "alerts": len(alerts),
        "cpu_s_per_doc": cpu / n,
        "index_entries": sum(len(e.index) for e in sim.engines.values()),
        "block_columns": columns,
    }
    return out, replies, alerts


def totals(row: dict, kinds: tuple[str, ...] | None = None) -> tuple[float, float]:
    per = row["per_document"]
    chosen = [k for k in per if kinds is None or k.removesuffix(".reply") in kinds]
    return sum(per[k]["messages"] for k in chosen), sum(per[k]["bytes"] for k in chosen)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_options(p, 10_000, 2.0, 1000, RESULTS / "bench_boolean.json")
    p.add_argument("--subscribers", type=int, default=10_000)
    p.add_argument("--distinct", type=int, default=1000)
    p.add_argument("--strategy", default="mhi")
    args = p.parse_args(argv)

    docs = load(args.corpus, args.docs, args.seed)
    df = document_frequencies(docs)
    texts = [d.text for d in docs]
    conj = boolean_workload(df, args.queries, "skew", args.mean_size, args.seed, 0.0)
    boolean = boolean_workload(df, args.queries, "skew", args.mean_size, args.seed, 1.0, texts)
    print(
        f"{len(docs)} documents, {len(df)} terms; {len(conj)} queries, e.g. {boolean[:4]}",
        file=sys.stderr,
    )
    sequences = [document_sequence(d.text, d.title) for d in docs]
    oracle_conj = match_documents(
        [analyze(q) for q in conj], [document_terms(d.text, d.title) for d in docs]
    )
    oracle_bool = match_queries(boolean, sequences)

    result = {
        "command": "python experiments/bench_boolean.py " + " ".join(argv or sys.argv[1:]),
        "corpus": str(args.corpus or "generated"),
        "documents": len(docs),
        "nodes": args.nodes,
        "queries": args.queries,
        "mean_size": args.mean_size,
        "strategy": args.strategy,
        "examples": boolean[:8],
        "workloads": {},
    }
    for resolution in ("td", "bf"):
        settings = Settings(strategy=args.strategy, resolution=resolution, df=df, seed=args.seed)
        for name, queries, oracle in (
            ("conjunctive", conj, oracle_conj),
            ("boolean", boolean, oracle_bool),
        ):
            t0 = time.perf_counter()
            row, replies, alerts = run(args.nodes, settings, queries, docs, args.seed)
            ids = [r.subscription_id for r in replies]
            check(alerts, {(ids[q], d.docno) for d, hits in zip(docs, oracle) for q in hits}, name)
            row["alternatives"] = sum(len(r.alternatives) for r in replies)
            row["seconds"] = time.perf_counter() - t0
            result["workloads"][f"{name}-{resolution}"] = row
            m, b = totals(row)
            print(
                f"{name}-{resolution}: {row['alerts']} alerts = matcher; {m:.1f} messages, "
                f"{b:.0f} bytes per document; {row['candidates_per_doc']:.1f} candidates",
                file=sys.stderr,
            )

    # merging: subscribers share queries, Zipf popularity over DISTINCT boolean queries
    rng = random.Random(args.seed)
    pool = boolean[: args.distinct]
    weights = [1 / (r + 1) for r in range(len(pool))]
    shared = rng.choices(pool, weights, k=args.subscribers)
    hits = match_queries(pool, sequences)
    result["merging"] = {
        "subscribers": args.subscribers,
        "distinct": len(set(shared)),
        "drawn": "each subscriber picks query r of DISTINCT with weight 1/r",
    }
    settings = Settings(strategy="mhi", resolution="td", df=df, seed=args.seed)
    for merge in (True, False):
        row, replies, alerts = run(args.nodes, settings, shared, docs, args.seed, merge)
        at = {q: i for i, q in enumerate(pool)}
        want = {
            (r.subscription_id, d.docno)
            for r, q in zip(replies, shared)
            for d, h in zip(docs, hits)
            if at[q] in h
        }
        check(alerts, want, f"merging {merge}")
        row["resolution"] = dict(
            zip(("messages", "bytes"), totals(row, ("TermDialogue", "GetBloom")))
        )
        result["merging"]["on" if merge else "off"] = row
        print(
            f"merge {merge}: {row['block_columns']} columns for {row['index_entries']} entries, "
            f"{row['candidates_per_doc']:.1f} candidates, {row['cpu_s_per_doc'] * 1e3:.1f} ms/doc",
            file=sys.stderr,
        )
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
