"""A subscription's query as the engine holds it: analyzed into alternatives (the query
language: cqengine.text.query), each placed as an index entry of its own.

An entry holds every term a matching document must hold (its words and its phrases'
terms): announcement, pruning and the rounds of resolution look at those alone, as the
paper's Observations require. What else it asks of a document (terms it must not hold,
phrases it must or must not hold) rides along in the entry, and is settled after its
terms are found present (cqengine.core.resolution.conditions).

An entry's record is known by its key and its *slot*: the subscription's id for the
first alternative, so that a conjunctive query's entry is what it always was, and a hash
of the id and the alternative's number for the others (64 random bits: no slot meets
another subscription's id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from chord.protocol.ids import hash_id
from cqengine.core.basis import limits
from cqengine.core.basis.errors import EngineError
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze, analyze_sequence, term_id
from cqengine.text.query import Alternative, QueryError, alternatives, analyzed, parse, show

NO_TERMS = "the query has no terms left after stop-word removal and stemming"


def slot(sub_id: int, alternative: int) -> int:
    """The slot of a subscription's alternative: its entries' identity under a key."""
    return sub_id if not alternative else hash_id(f"{sub_id:016x}/{alternative}")


def entry_slot(entry: pb.QueryEntry) -> int:
    return slot(entry.subscription_id, entry.alternative)


@dataclass(frozen=True)
class Query:
    """A query analyzed: its text in terms (`text`), its alternatives, every term some
    alternative needs present (in the order the query has them), and the words of the
    query that analysis left out."""

    text: str
    alternatives: tuple[Alternative, ...]
    terms: tuple[str, ...]
    dropped: tuple[str, ...] = ()

    @property
    def plain(self) -> bool:
        """A conjunction of terms, as every query was before the query language."""
        return len(self.alternatives) == 1 and self.alternatives[0].plain


def conjunction(terms: list[str]) -> Query:
    """The query of terms analyzed already (a Spark job's, say): all of them."""
    alt = Alternative(frozenset(terms), frozenset())
    return Query(alt.show(), (alt,), tuple(dict.fromkeys(terms)))


def analyze_query(text: str, most: int = 32) -> Query:
    """A query's text parsed and analyzed: EngineError (INVALID_ARGUMENT, naming where)
    if it is not a query, leaves no term, or expands to more than `most` alternatives."""
    try:
        dropped: list[str] = []
        tree = analyzed(parse(text), analyze_sequence, dropped) if text.strip() else None
        if tree is None:
            raise QueryError(NO_TERMS, 0)
        alts = alternatives(tree, most)
    except QueryError as e:
        raise EngineError("INVALID_ARGUMENT", str(e)) from None
    query = Query(show(tree), tuple(alts), _in_order(text, alts), tuple(dropped))
    problem = query_problem(query)
    if problem is not None:
        raise problem
    return query


def _in_order(text: str, alts: list[Alternative]) -> tuple[str, ...]:
    """The terms the alternatives need present, in the order the text has them."""
    need = set().union(*(a.terms for a in alts))
    first = [t for t in analyze(text) if t in need]
    return tuple(first + sorted(need.difference(first)))


def query_problem(query: Query) -> EngineError | None:
    """Why a query of these alternatives is refused (None: it is not)."""
    every = set().union(*(a.terms | a.not_words.union(*a.not_phrases) for a in query.alternatives))
    if not every:
        return EngineError("INVALID_ARGUMENT", NO_TERMS)
    if len(every) > limits.MAX_QUERY_TERMS:
        return EngineError(
            "INVALID_ARGUMENT",
            f"the query has {len(every)} terms; at most {limits.MAX_QUERY_TERMS} are allowed",
        )
    for a in query.alternatives:  # what the last round asks of a document, bounded alike
        asked = len(a.not_words) + sum(map(len, a.phrases | a.not_phrases))
        if asked > limits.MAX_QUERY_TERMS:
            return EngineError(
                "INVALID_ARGUMENT",
                f"an alternative has {asked} terms in phrases and negated; at most "
                f"{limits.MAX_QUERY_TERMS} are allowed",
            )
    return None


def entry_of(alt: Alternative, number: int) -> pb.QueryEntry:
    """An alternative's entry, but for where it is indexed and whose it is: its terms by
    id, and what it asks besides."""
    pairs = sorted((term_id(t), t) for t in alt.terms)
    entry = pb.QueryEntry(
        term_ids=[p[0] for p in pairs], terms=[p[1] for p in pairs], alternative=number
    )
    for t in sorted(alt.not_words):
        entry.not_ids.append(term_id(t))
        entry.not_terms.append(t)
    for negated, phrases in ((False, alt.phrases), (True, alt.not_phrases)):
        for p in sorted(phrases):
            entry.phrases.add(ids=[term_id(t) for t in p], terms=p, negated=negated)
    return entry


# what signature gives: an entry's term ids alone, or with its not-ids and its phrases
# (ids, negated)
Signature: TypeAlias = (
    tuple[int, ...]
    | tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[tuple[int, ...], bool], ...]]
)


def signature(entry: pb.QueryEntry) -> Signature:
    """What an entry asks of a document: entries alike in it are one query to match
    (merged: cqengine.core.state.postings.Block)."""
    if not entry.not_ids and not entry.phrases:
        return tuple(entry.term_ids)
    phrases = tuple((tuple(p.ids), p.negated) for p in entry.phrases)
    return (tuple(entry.term_ids), tuple(entry.not_ids), phrases)


def conditional(entry: pb.QueryEntry) -> bool:
    """Does it ask more of a document than its terms?"""
    return bool(entry.not_ids or entry.phrases)
