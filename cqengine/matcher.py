"""The brute-force matcher: the oracle every alert is checked against.

A query matches a document when every one of its analyzed terms is among the document's
analyzed terms. No index, no pruning, no network: just sets.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from cqengine.analysis import analyze


def document_terms(text: str, title: str = "") -> frozenset[str]:
    """The terms a published document is matched on: its title and its text, as the DN reads it."""
    return frozenset(analyze(f"{title}\n{text}"))


def document_frequencies(docs) -> Counter:
    """How many documents hold each term (docs: anything with .text and .title)."""
    df: Counter = Counter()
    for d in docs:
        df.update(document_terms(d.text, d.title))
    return df


def matches(queries: Mapping[int, Iterable[str]], docs: Mapping[str, frozenset[str]]) -> set[tuple[int, str]]:
    """Every (query key, docno) pair where the document holds all the query's terms."""
    out = set()
    for q, terms in queries.items():
        need = frozenset(terms)
        if not need:
            continue
        out.update((q, docno) for docno, have in docs.items() if need <= have)
    return out
