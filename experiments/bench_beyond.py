"""Issue 44 on real text: the paper's configurations with term-presence headers of K hot
terms (cqengine.core.presence), beside the same configurations without (K = 0).

The inputs are the paper-scale evaluation's (`cqengine experiment`: a prepared corpus cut
to --docs, its Skew workload of --queries queries of mean size 5, SAP-MHI's popular terms
sampled from the first half). Each run is one simulated ring running the engine's code,
documents published one by one (batches of one, as the paper's), its every alert checked
against the brute-force matcher. Per document, from the ledger: candidates, matches,
announcement, resolution and all engine bytes and messages, the headers' share of the
announcement; per node, entries (load percentiles).

    python experiments/bench_beyond.py [--corpus prep-real] [--nodes 1000]
        [--queries 100000] [--docs 10000] [--headers 0,256,1024]
        [--configurations ri/td,oi/td,mhi/bf,sap-mhi/bf]

Writes experiments/results/bench_beyond.json (or --out FILE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from cqengine.core.settings import Settings
from cqengine.evaluation import paper
from cqengine.evaluation.inputs import Inputs, load_prep
from cqengine.evaluation.runs import place
from cqengine.evaluation.scale import Scale
from cqengine.evaluation.sim import EngineSimulator

RESULTS = Path(__file__).resolve().parent / "results"


def settings_for(inputs: Inputs, configuration: str, headers: int) -> Settings:
    strategy, resolution = configuration.split("/")
    popular = None
    if strategy == "sap-mhi":  # K in proportion to the vocabulary, as `cqengine experiment`
        k = max(1, round(1000 * len(inputs.corpus.df) / paper.CORPUS["vocabulary"]))
        popular = inputs.popular(k, k)
    s = inputs.scale
    return Settings(
        strategy=strategy,
        resolution=resolution,
        df=inputs.corpus.df,
        popular=popular,
        seed=s.seed,
        bloom_bits=s.bloom_bits,
        bloom_hashes=s.bloom_hashes,
        header_terms=headers,
    ).validate()


def run(inputs: Inputs, settings: Settings, say) -> dict:
    corpus, scale = inputs.corpus, inputs.scale
    sim = EngineSimulator(scale.nodes, settings, seed=scale.seed)
    nodes, ids = sorted(sim.engines), []
    # placed as `cqengine experiment` places them: at the owner a lookup would find, each
    # query through the node and each document from the node the evaluation picks for it
    with sim.ring.instant_lookups():
        for i, q in enumerate(inputs.workload("skew")):
            home = nodes[place(scale.seed, "query", i, scale.nodes)]
            ids.append(sim.subscribe_terms(q, via=home).subscription_id)
    kinds: Counter[str] = Counter()
    t0 = time.perf_counter()
    for d, (docno, terms) in enumerate(zip(corpus.docnos, corpus.terms)):
        dn = nodes[place(scale.seed, "doc", docno, scale.nodes)]
        report = sim.publish_terms(docno, terms, dn)
        for kind, c in report.kinds.items():
            kinds[kind + ":messages"] += c.messages
            kinds[kind + ":bytes"] += c.bytes
        if d and d % 1000 == 0:
            say(f"  {d} documents, {time.perf_counter() - t0:.0f} s")
    seconds = time.perf_counter() - t0
    oracle = inputs.oracle("skew")
    want = {(ids[q], docno) for docno, hits in zip(corpus.docnos, oracle) for q in hits}
    got = sim.alerts()
    if len(got) != len(set(got)) or set(got) != want:
        raise SystemExit(f"{settings.strategy}: alerts differ from the matcher's")
    n, t = len(corpus), sim.tally

    def per_doc(methods: tuple[str, ...], what: str) -> float:
        return sum(kinds[f"{m}{r}:{what}"] for m in methods for r in ("", ".reply")) / n

    load = np.array(sim.load())
    return {
        "candidates_per_doc": t["candidates"] / n,
        "matches_per_doc": t["matches"] / n,
        "alerts_per_doc": len(got) / n,
        "announcement_bytes_per_doc": per_doc(("Announce",), "bytes"),
        "announcement_messages_per_doc": per_doc(("Announce",), "messages"),
        "header_bytes_per_doc": t["presence_bytes"] / n,
        "resolution_bytes_per_doc": per_doc(("TermDialogue", "GetBloom"), "bytes"),
        "resolution_messages_per_doc": per_doc(("TermDialogue", "GetBloom"), "messages"),
        # every message a document set off, of every kind
        "engine_bytes_per_doc": sum(v for k, v in kinds.items() if k.endswith(":bytes")) / n,
        "engine_messages_per_doc": sum(v for k, v in kinds.items() if k.endswith(":messages")) / n,
        "kinds_bytes_per_doc": {
            k[: -len(":bytes")]: v / n for k, v in sorted(kinds.items()) if k.endswith(":bytes")
        },
        "load_p1_p50_p99": [float(np.percentile(load, p)) for p in (1, 50, 99)],
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=Path("prep-real"), help="`cqengine prep` output")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--docs", type=int, default=10_000)
    p.add_argument("--headers", default="0,256,1024", help="hot terms per header (0: none)")
    p.add_argument("--configurations", default="ri/td,oi/td,mhi/bf,sap-mhi/bf")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "bench_beyond.json")
    args = p.parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    scale = Scale(nodes=args.nodes, queries=args.queries, docs=args.docs, seed=args.seed)
    inputs = Inputs(load_prep(args.corpus), scale, quiet=True)
    inputs.start_oracle("skew")
    result = {
        "command": "python experiments/bench_beyond.py " + " ".join(argv or sys.argv[1:]),
        "corpus": str(args.corpus),
        "nodes": args.nodes,
        "queries": args.queries,
        "documents": len(inputs.corpus),
        "runs": {},
    }
    for configuration in args.configurations.split(","):
        for k in (int(x) for x in args.headers.split(",")):
            name = f"{configuration}/headers={k}"
            say(f"{name}: subscribing {args.queries} queries on {args.nodes} nodes")
            row = run(inputs, settings_for(inputs, configuration, k), say)
            result["runs"][name] = row
            say(
                f"{name}: {row['candidates_per_doc']:.0f} candidates and "
                f"{row['matches_per_doc']:.0f} matches per document; resolution "
                f"{row['resolution_bytes_per_doc']:.0f} B, announcement "
                f"{row['announcement_bytes_per_doc']:.0f} B (headers "
                f"{row['header_bytes_per_doc']:.0f} B), all {row['engine_bytes_per_doc']:.0f} B"
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")  # after every run
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
