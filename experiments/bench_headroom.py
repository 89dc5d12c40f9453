"""What a perfect aggregate filter could take off the announcement (issue 44, item 1's ceiling).

On a simulated ring running the engine's code, a Skew workload is subscribed and the
documents are published one by one (batches of one, as the paper's). Every announcement
message a node sends to a next hop is watched: its runs carry the ids whose keys lie in
the subtree under that hop, and each id's inverted list lives at the id's owner, inside
that subtree. A message none of whose ids has a list anywhere in the ring therefore
reaches only nodes with nothing to match; a filter knowing exactly what each subtree
indexes would not send it. The ids without a list are what such a filter would trim from
the messages it still sends. Both are ceilings: a real summary (a Bloom filter of a
range's ids, refreshed by maintenance) answers "maybe" more often than this one, and
trimming ids changes what Observations 1 and 2 may prune with, which the engine would
have to allow for.

    python experiments/bench_headroom.py [--corpus DIR_OF_TREC_FILES] [--nodes 1000]
        [--queries 10000] [--docs 1000] [--strategies ri,oi,mhi]

Without --corpus it generates a TREC-AP-like corpus in-process. Writes
experiments/results/bench_headroom.json (or --out FILE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from simulated import check, corpus_options, load, subscribed

from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.measuring.tally import Tally
from cqengine.evaluation.setup.matcher import document_frequencies, document_terms, match_documents
from cqengine.text.analysis import analyze, term_id
from cqengine.text.workload import boolean_workload

RESULTS = Path(__file__).resolve().parent / "results"


class Headroom(Tally):
    """A Tally that also sorts every announcement message by what a perfect filter of
    the subtree under its next hop would do with it: one knowing which ids have a list
    (`indexed`), and one knowing, for each document, the ids under which a query that
    matches it is indexed (`matching`: docno -> ids, from the matcher)."""

    def __init__(self, indexed: set[int], matching: dict[str, set[int]] | None = None) -> None:
        super().__init__()
        self.indexed = indexed  # the ids that have an inverted list somewhere
        self.matching = matching or {}
        self.docnos: dict[int, str] = {}  # a DN's document key -> its docno
        self.messages = self.needed = self.ids = self.listed = self.matched = 0

    def on_published(self, node, doc) -> None:
        super().on_published(node, doc)
        self.docnos[doc.key] = doc.docno

    def on_announce(self, node, msg) -> None:
        super().on_announce(node, msg)
        ids = [i for run in msg.runs for i in run.ids]
        listed = sum(1 for i in ids if i in self.indexed)
        self.messages += 1
        self.needed += listed > 0
        self.ids += len(ids)
        self.listed += listed
        self.matched += any(not self._matching(msg, run).isdisjoint(run.ids) for run in msg.runs)

    def _matching(self, msg, run) -> set[int]:
        """The index ids of the queries that match the run's document."""
        key = msg.doc_keys[run.doc] if run.doc < len(msg.doc_keys) else None
        return self.matching.get(self.docnos.get(key, ""), set())


def run(nodes: int, settings: Settings, queries: list[str], docs, seed: int) -> dict:
    sim = EngineSimulator(nodes, settings, seed=seed)
    replies = subscribed(sim, queries)
    indexed = {key for e in sim.engines.values() for key in e.index.keys()}
    terms = [document_terms(d.text, d.title) for d in docs]
    oracle = match_documents([analyze(q) for q in queries], terms)
    # each document's matching queries' index ids: where its alerts come from
    index_ids = [{term_id(a.index_term) for a in r.alternatives} for r in replies]
    matching = {
        d.docno: set().union(*(index_ids[q] for q in hits)) for d, hits in zip(docs, oracle)
    }
    watch = Headroom(indexed, matching)
    sim.observe(watch)
    t0 = time.perf_counter()
    ledger = 0  # Announce messages the ledger counted: the watch must have seen each
    for d in docs:
        report = sim.publish(d.docno, d.text, d.title)
        ledger += report.kinds["Announce"].messages if "Announce" in report.kinds else 0
    n = len(docs)
    ids = [r.subscription_id for r in replies]
    check(sim.alerts(), {(ids[q], d.docno) for d, hits in zip(docs, oracle) for q in hits}, "")
    return {
        "indexed_ids": len(indexed),
        "announce_messages_per_doc": watch.messages / n,
        "ledger_announce_messages_per_doc": ledger / n,
        "needed_messages_per_doc": watch.needed / n,
        "skippable_share": 1 - watch.needed / watch.messages if watch.messages else 0.0,
        "ids_per_doc": watch.ids / n,
        "listed_ids_per_doc": watch.listed / n,
        "trimmable_id_share": 1 - watch.listed / watch.ids if watch.ids else 0.0,
        # a filter knowing which entries could match the document (their other terms)
        "matching_messages_per_doc": watch.matched / n,
        "query_aware_skippable_share": 1 - watch.matched / max(1, watch.messages),
        "seconds": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_options(p, 10_000, 2.0, 1000, RESULTS / "bench_headroom.json")
    p.add_argument("--strategies", default="ri,oi,mhi")
    args = p.parse_args(argv)
    docs = load(args.corpus, args.docs, args.seed)
    df = document_frequencies(docs)
    # the Skew draws as query texts (no operator: conjunctions, as the paper's)
    queries = boolean_workload(df, args.queries, "skew", args.mean_size, args.seed, 0.0)
    result = {
        "command": "python experiments/bench_headroom.py " + " ".join(argv or sys.argv[1:]),
        "corpus": str(args.corpus or "generated"),
        "documents": len(docs),
        "nodes": args.nodes,
        "queries": args.queries,
        "mean_size": args.mean_size,
        "strategies": {},
    }
    for strategy in args.strategies.split(","):
        settings = Settings(strategy=strategy, resolution="td", df=df, seed=args.seed)
        row = result["strategies"][strategy] = run(args.nodes, settings, queries, docs, args.seed)
        print(
            f"{strategy}: {row['announce_messages_per_doc']:.1f} announcement messages per "
            f"document, {row['needed_messages_per_doc']:.1f} carrying an id with a list "
            f"({100 * row['skippable_share']:.0f}% skippable); "
            f"{100 * row['trimmable_id_share']:.0f}% of the ids sent have no list; "
            f"{row['matching_messages_per_doc']:.1f} lead to a match "
            f"({100 * row['query_aware_skippable_share']:.0f}% skippable knowing the queries)",
            file=sys.stderr,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
