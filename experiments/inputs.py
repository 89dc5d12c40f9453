"""What the live benchmarks share of their inputs and outputs: a workload's query texts,
a node's --stats file of document frequencies, and the folder results go to."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.text.analysis import analyze
from cqengine.text.trec import TrecDoc
from cqengine.text.workload import boolean_workload, generate_queries

RESULTS = Path(__file__).resolve().parent / "results"


def workload_queries(kind: str, docs: list[TrecDoc], n: int, seed: int) -> list[str]:
    """n query texts: the paper's Skew queries of the corpus (rewritten in the query
    language, for `boolean`), or 3-4 consecutive words of a random document's text
    (whatever analysis leaves of them must not be empty)."""
    if kind == "boolean":
        texts = [d.text for d in docs]
        return boolean_workload(document_frequencies(docs), n, "skew", 5.0, seed, 1.0, texts)
    if kind == "skew":
        return [
            " ".join(q)
            for q in generate_queries(
                document_frequencies(docs), n, "skew", mean_size=5.0, seed=seed
            )
        ]
    rng = random.Random(seed)
    words = [d.text.split() for d in docs]
    out = []
    while len(out) < n:
        w = words[rng.randrange(len(words))]
        k = rng.choice((3, 4))
        at = rng.randrange(max(1, len(w) - k))
        text = " ".join(w[at : at + k])
        if analyze(text):
            out.append(text)
    return out


def write_stats(df: Counter, path: Path) -> None:
    """The document frequencies as a node's --stats file: term<TAB>df, most frequent first."""
    path.write_text("".join(f"{t}\t{n}\n" for t, n in df.most_common()))
