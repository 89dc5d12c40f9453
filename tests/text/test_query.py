"""The query language: any tree printed parses back to itself; its alternatives match a
document exactly when the tree, evaluated directly, does; malformed queries are refused
with the position of the problem."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cqengine.text.query import (
    And,
    Not,
    Or,
    Phrase,
    QueryError,
    Word,
    alternatives,
    parse,
    show,
)

WORDS = ["storm", "surge", "levee", "held", "e-mail", "o'brien", "1989", "or", "not"]

words = st.sampled_from(WORDS).map(Word)
phrases = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(lambda w: Phrase(tuple(w)))
trees = st.recursive(
    words | phrases,
    lambda inner: st.one_of(
        inner.map(Not),
        st.lists(inner, min_size=2, max_size=3).map(lambda p: And(tuple(p))),
        st.lists(inner, min_size=2, max_size=3).map(lambda p: Or(tuple(p))),
    ),
    max_leaves=8,
)


def flat(node):
    """A tree as the parser builds it: nested ANDs (ORs) in one AND (OR)."""
    if isinstance(node, Not):
        return Not(flat(node.of))
    if isinstance(node, (And, Or)):
        parts = []
        for p in map(flat, node.parts):
            parts.extend(p.parts if type(p) is type(node) else [p])
        return type(node)(tuple(parts))
    return node


@hsettings(max_examples=300, deadline=None)
@given(trees)
def test_a_tree_printed_parses_back_to_itself(tree):
    assert parse(show(tree)) == flat(tree)


def holds(node, doc: frozenset[str]) -> bool:
    """The tree evaluated on a document's words, straight from its definition (phrases
    of one word only, as a bag of words cannot say more)."""
    if isinstance(node, Word):
        return node.text in doc
    if isinstance(node, Phrase):
        return len(node.words) == 1 and node.words[0] in doc
    if isinstance(node, Not):
        return not holds(node.of, doc)
    if isinstance(node, And):
        return all(holds(p, doc) for p in node.parts)
    return any(holds(p, doc) for p in node.parts)


def matches(alt, doc: frozenset[str]) -> bool:
    one = {p[0] for p in alt.phrases if len(p) == 1}
    if any(len(p) > 1 for p in alt.phrases):
        return False
    if any(len(p) == 1 and p[0] in doc for p in alt.not_phrases):
        return False
    return alt.words | one <= doc and not (alt.not_words & doc)


@hsettings(max_examples=300, deadline=None)
@given(trees, st.frozensets(st.sampled_from(WORDS)))
def test_alternatives_match_a_document_exactly_when_the_tree_does(tree, doc):
    try:
        alts = alternatives(tree, most=10_000)
    except QueryError:  # an alternative with nothing positive: refused, not evaluated
        return
    assert len(set(alts)) == len(alts)
    if all(len(p) == 1 for a in alts for p in a.phrases | a.not_phrases):
        assert any(matches(a, doc) for a in alts) == holds(tree, doc)


def test_the_language_as_documented():
    assert parse("a b") == And((Word("a"), Word("b")))
    assert parse("a OR b") == parse("a | b") == Or((Word("a"), Word("b")))
    assert parse("a or b") == And((Word("a"), Word("or"), Word("b")))  # OR only in capitals
    assert parse("-a b") == parse("NOT a b") == And((Not(Word("a")), Word("b")))
    assert parse('"the levee held"') == Phrase(("the", "levee", "held"))
    assert parse('-"levee held"') == Not(Phrase(("levee", "held")))
    assert parse("e-mail") == Word("e-mail")  # a dash inside a word is the word's
    # NOT binds tighter than AND, AND tighter than OR
    assert parse("a b OR c") == Or((And((Word("a"), Word("b"))), Word("c")))
    assert parse("a (b OR c)") == And((Word("a"), Or((Word("b"), Word("c")))))
    alts = alternatives(parse("(hurricane OR typhoon) -warning"))
    assert [sorted(a.words) for a in alts] == [["hurricane"], ["typhoon"]]
    assert all(a.not_words == {"warning"} for a in alts)
    assert len(alternatives(parse("a OR a"))) == 1  # each alternative once


@pytest.mark.parametrize(
    "query, message, position",
    [
        ("", "empty", 0),
        ("(a b", "parenthesis is not closed", 0),
        ("a b)", "closing parenthesis has no opening", 3),
        ('a "b c', "quote is not closed", 2),
        ("a OR", "nothing on one side", 4),
        ("OR a", "nothing on one side", 0),
        ("a (OR b)", "nothing on one side", 3),
        ("a -", "nothing to negate", 2),
        ("NOT", "nothing to negate", 0),
        ('a ""', "phrase is empty", 2),
    ],
)
def test_a_malformed_query_is_refused_where_it_goes_wrong(query, message, position):
    with pytest.raises(QueryError, match=message) as e:
        parse(query)
    assert e.value.position == position


def test_a_query_that_could_never_be_indexed_or_expands_too_far_is_refused():
    for query in ["-a", "a OR -b", "NOT (a b)"]:
        with pytest.raises(QueryError, match="only negated"):
            alternatives(parse(query))
    six = " ".join(f"(a{i} OR b{i})" for i in range(6))  # 64 alternatives
    with pytest.raises(QueryError, match="more than 32"):
        alternatives(parse(six))
    assert len(alternatives(parse(six), most=64)) == 64
