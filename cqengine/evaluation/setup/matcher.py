"""The brute-force matcher: the oracle every alert is checked against.

A query of terms matches a document when every one of them is among the document's
analyzed terms. A query in the query language (cqengine.text.query) is read off its tree
as parsed, straight from the README's definitions (`holds`): a word is present when its
terms are (several terms: at consecutive places), a phrase likewise, NOT, AND and OR as
they read, a word that analysis leaves no term of is left out of its group. No index,
no alternatives, no pruning, no network: just sets and sequences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from cqengine.text.analysis import analyze, analyze_sequence
from cqengine.text.query import And, Node, Not, Phrase, Word, parse


def document_terms(text: str, title: str = "") -> frozenset[str]:
    """The terms a published document is matched on: its title and its text, as the DN reads it."""
    return frozenset(analyze(f"{title}\n{text}"))


def document_sequence(text: str, title: str = "") -> list[str]:
    """The document's term sequence, as its DN reads it (what phrases match)."""
    return analyze_sequence(f"{title}\n{text}")


def holds(query: str, sequence: Sequence[str]) -> bool:
    """Does a document of this term sequence match the query?"""
    return _value(parse(query), sequence, frozenset(sequence)) is True


def match_queries(queries: Sequence[str], sequences: Sequence[Sequence[str]]) -> list[list[int]]:
    """For each document (its term sequence), the positions of the queries it matches,
    ascending: `holds` of each, fast enough for thousands by thousands. Each query is
    tried only on the documents holding a term it cannot match without (`_needs`)."""
    df: Counter = Counter(t for s in sequences for t in set(s))
    trees = [parse(q) for q in queries]
    filed: dict[str, list[int]] = {}
    anywhere = []  # queries that need no term (a NOT alone): tried everywhere
    for i, tree in enumerate(trees):
        need = _needs(tree, df)
        if need is None:
            anywhere.append(i)
        for t in need or ():
            filed.setdefault(t, []).append(i)
    out = []
    for sequence in sequences:
        have = frozenset(sequence)
        tried = sorted({i for t in have for i in filed.get(t, ())}.union(anywhere))
        out.append([i for i in tried if _value(trees[i], sequence, have) is True])
    return out


_DROPPED = frozenset({""})  # a node analysis leaves nothing of: no part of its group


def _needs(node: Node, df: Counter) -> frozenset[str] | None:
    """Terms of which a document the node is true for holds at least one (None: no such
    terms; _DROPPED: the node is left out). A word or phrase needs each of its terms (the
    rarest will do); AND needs what one of its parts needs (the rarest such); OR needs
    what any of its parts needs; NOT needs nothing."""
    if isinstance(node, (Word, Phrase)):
        terms = _terms(node)
        return frozenset([min(terms, key=lambda t: (df[t], t))]) if terms else _DROPPED
    if isinstance(node, Not):
        return _DROPPED if _needs(node.of, df) is _DROPPED else None
    needs = [n for n in (_needs(p, df) for p in node.parts) if n is not _DROPPED]
    if not needs:
        return _DROPPED
    if isinstance(node, And):
        sure = [n for n in needs if n is not None]
        return min(sure, key=lambda n: sum(df[t] for t in n)) if sure else None
    return None if any(n is None for n in needs) else frozenset().union(*needs)


@lru_cache(maxsize=1 << 16)
def _terms(node: Word | Phrase) -> tuple[str, ...]:
    return tuple(analyze_sequence(node.text if isinstance(node, Word) else " ".join(node.words)))


def _value(node: Node, sequence: Sequence[str], have: frozenset[str]) -> bool | None:
    """The node's truth for the document; None if analysis leaves nothing of it."""
    if isinstance(node, (Word, Phrase)):
        terms = list(_terms(node))
        if not terms:
            return None
        if len(terms) == 1:
            return terms[0] in have
        n = len(terms)
        return any(list(sequence[i : i + n]) == terms for i in range(len(sequence) - n + 1))
    if isinstance(node, Not):
        inner = _value(node.of, sequence, have)
        return None if inner is None else not inner
    values = [v for v in (_value(p, sequence, have) for p in node.parts) if v is not None]
    if not values:
        return None
    return all(values) if isinstance(node, And) else any(values)


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
