"""Which hot terms a term-presence header should carry (issue 44, item 2): how much of
Term Dialogue the K most frequent terms answer, beside the K terms QNs asked about most.

A simulated ring running the engine's code (OI, Term Dialogue, no headers) publishes
documents one by one and every question a QN asks its DN is recorded with its answer.
The first half of the documents ranks the terms (by questions asked, by "absent"
answers); the second half is the test: for each ranking and K, the share of the
questions, and of the "absent" answers (the candidates a header would drop), about a
term among the first K. The document-frequency ranking is what every node can agree on
from the ring's term statistics (cqengine.core.terms.presence); the question ranking is the
greedy cover a node could only learn by counting traffic.

    python experiments/bench_header_cover.py [--corpus corpus-real] [--nodes 1000]
        [--queries 100000] [--docs 400] [--ks 16,64,256,1024]

Writes experiments/results/bench_header_cover.json (or --out FILE).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from simulated import corpus_options, load, subscribed

from cqengine.core.resolution.resolution import unpack_many
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.measuring.tally import Tally
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.text.analysis import term_id
from cqengine.text.workload import boolean_workload

RESULTS = Path(__file__).resolve().parent / "results"


class Questions(Tally):
    """Every Term Dialogue question of the rounds (not the last round's conditions): the
    document it was about, the id asked, and whether the DN found it present."""

    def __init__(self) -> None:
        super().__init__()
        self.doc = 0
        self.asked: list[tuple[int, int, bool]] = []

    def on_resolution_call(self, node, heard, rpc, request, reply) -> None:
        super().on_resolution_call(node, heard, rpc, request, reply)
        if rpc != "TermDialogue" or request.phrase_lengths:
            return
        present = unpack_many([reply.present], [len(request.ids)]).tolist()
        self.asked += [(self.doc, y, p) for y, p in zip(request.ids, present)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_options(p, 100_000, 5.0, 400, RESULTS / "bench_header_cover.json")
    p.add_argument("--ks", default="16,64,256,1024")
    args = p.parse_args(argv)
    docs = load(args.corpus, args.docs, args.seed)
    df = document_frequencies(docs)
    queries = boolean_workload(df, args.queries, "skew", args.mean_size, args.seed, 0.0)
    settings = Settings(strategy="oi", resolution="td", df=df, seed=args.seed)
    sim = EngineSimulator(args.nodes, settings, seed=args.seed)
    subscribed(sim, queries)
    watch = Questions()
    sim.observe(watch)
    for k, d in enumerate(docs):
        watch.doc = k
        sim.publish(d.docno, d.text, d.title)
    half = len(docs) // 2
    learn = [a for a in watch.asked if a[0] < half]
    test = [a for a in watch.asked if a[0] >= half]
    absent = [a for a in test if not a[2]]
    rankings = {
        "document_frequency": [
            term_id(t) for t, _ in sorted(df.items(), key=lambda x: (-x[1], term_id(x[0])))
        ],
        "questions": [y for y, _ in Counter(y for _, y, _ in learn).most_common()],
        "absent_answers": [y for y, _ in Counter(y for _, y, p in learn if not p).most_common()],
    }
    rows = {}
    for name, ranking in rankings.items():
        for k in (int(x) for x in args.ks.split(",")):
            hot = set(ranking[:k])
            row = rows[f"{name}/{k}"] = {
                "questions_answered": sum(a[1] in hot for a in test) / max(1, len(test)),
                "absent_answered": sum(a[1] in hot for a in absent) / max(1, len(absent)),
            }
            print(
                f"{name:>18} K={k:<5} answers {100 * row['questions_answered']:.1f}% of the "
                f"questions, {100 * row['absent_answered']:.1f}% of the absent answers",
                file=sys.stderr,
            )
    tested = len(docs) - half
    result = {
        "command": "python experiments/bench_header_cover.py " + " ".join(argv or sys.argv[1:]),
        "corpus": str(args.corpus or "generated"),
        "nodes": args.nodes,
        "queries": args.queries,
        "documents": len(docs),
        "questions_per_doc": len(test) / tested,
        "absent_answers_per_doc": len(absent) / tested,
        "rankings": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
