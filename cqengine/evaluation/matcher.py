"""The brute-force matcher: the oracle every alert is checked against.

A query matches a document when every one of its analyzed terms is among the document's
analyzed terms. No index, no pruning, no network: just sets.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping, Sequence

from cqengine.text.analysis import analyze


def document_terms(text: str, title: str = "") -> frozenset[str]:
    """The terms a published document is matched on: its title and its text, as the DN reads it."""
    return frozenset(analyze(f"{title}\n{text}"))


def document_frequencies(docs) -> Counter:
    """How many documents hold each term (docs: anything with .text and .title)."""
    df: Counter = Counter()
    for d in docs:
        df.update(document_terms(d.text, d.title))
    return df


def matches(
    queries: Mapping[int, Iterable[str]], docs: Mapping[str, frozenset[str]]
) -> set[tuple[int, str]]:
    """Every (query key, docno) pair where the document holds all the query's terms."""
    out = set()
    for q, terms in queries.items():
        need = frozenset(terms)
        if not need:
            continue
        out.update((q, docno) for docno, have in docs.items() if need <= have)
    return out


def match_documents(
    queries: Sequence[Sequence[str]], docs: Sequence[frozenset[str]]
) -> list[list[int]]:
    """For each document, the positions of the queries it matches, ascending: `matches`'
    answer, fast enough for 100,000 queries by 10,000 documents. Each query is filed under
    its rarest term (in these documents), so a document only looks at the queries filed
    under its own terms — and still tests every one of their terms."""
    df: Counter = Counter(t for have in docs for t in have)
    filed: dict[str, list[tuple[int, frozenset[str]]]] = {}
    for i, q in enumerate(queries):
        if q:
            filed.setdefault(min(q, key=lambda t: (df[t], t)), []).append((i, frozenset(q)))
    return [
        sorted(i for t in have for i, need in filed.get(t, ()) if need <= have) for have in docs
    ]
