"""The query language people write, parsed into a tree and expanded into alternatives.

    a b          both (AND, the default)
    a OR b       either (OR only in capitals); a | b is the same
    -a, NOT a    the document must not contain a (a phrase or a group can be negated too)
    "a b c"      a phrase: its words at consecutive positions of the document's terms
    ( ... )      grouping; NOT binds tighter than AND, and AND tighter than OR

A query matches a document when any alternative of its disjunctive normal form does
(`alternatives`): all its positive terms and phrases present, none of its negated ones.
This module knows words, not terms: its caller analyzes each word into terms. Errors
name the character where they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from math import prod

MAX_ALTERNATIVES = 32  # a query's alternatives after expansion, by default
MAX_DEPTH = 32  # groups and NOTs inside one another, at most (each is a level of recursion)


class QueryError(ValueError):
    """A query that cannot be parsed or expanded; `position` is the character at fault."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at character {position + 1})")
        self.position = position


@dataclass(frozen=True)
class Word:
    text: str


@dataclass(frozen=True)
class Phrase:
    words: tuple[str, ...]


@dataclass(frozen=True)
class Not:
    of: Node


@dataclass(frozen=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Node, ...]


Node = Word | Phrase | Not | And | Or

# a phrase, a parenthesis, a bar, or a word (a leading '-' is a NOT, kept apart below)
_TOKEN = re.compile(r'\s*(?:(")|(\()|(\))|(\|)|([^\s"()|]+))')


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, value, position): kinds are phrase, open, close, or, not, word."""
    out, at = [], 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.end() == at:  # only blanks were left
            break
        assert m.lastindex is not None  # every alternative of a token is a group
        start = m.start(m.lastindex)
        if m.group(1):
            end = text.find('"', m.end())
            if end < 0:
                raise QueryError("a quote is not closed", start)
            out.append(("phrase", text[m.end() : end], start))
            at = end + 1
            continue
        at = m.end()
        if m.group(2) or m.group(3):
            out.append(("open" if m.group(2) else "close", m.group(), start))
        elif m.group(4) or m.group(5) == "OR":
            out.append(("or", "OR", start))
        elif m.group(5) == "NOT":
            out.append(("not", "NOT", start))
        elif m.group(5).startswith("-"):  # each leading '-' negates what follows
            rest = m.group(5).lstrip("-")
            dashes = len(m.group(5)) - len(rest)
            out.extend(("not", "-", start + i) for i in range(dashes))
            if rest:
                out.append(("word", rest, start + dashes))
        else:
            out.append(("word", m.group(5), start))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.at = text, _tokens(text), 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def where(self) -> int:
        token = self.peek()
        return token[2] if token else len(self.text)

    def parse(self) -> Node:
        if not self.tokens:
            raise QueryError("the query is empty", 0)
        node = self.disjunction()
        if self.peek() is not None:
            raise QueryError("a closing parenthesis has no opening one", self.where())
        return node

    def disjunction(self) -> Node:
        parts = [self.conjunction()]
        while (token := self.peek()) is not None and token[0] == "or":
            self.at += 1
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conjunction(self) -> Node:
        parts = []
        while (token := self.peek()) is not None and token[0] not in ("or", "close"):
            parts.append(self.unary())
        if not parts:
            raise QueryError("an operator has nothing on one side", self.where())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def unary(self) -> Node:
        kind, value, at = self.tokens[self.at]
        self.at += 1
        if kind in ("not", "open"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise QueryError(f"groups and NOTs nest more than {MAX_DEPTH} deep", at)
            try:
                return self._nested(kind, value, at)
            finally:
                self.depth -= 1
        if kind == "word":
            return Word(value)
        if kind == "phrase":
            words = tuple(value.split())
            if not words:
                raise QueryError("a phrase is empty", at)
            return Phrase(words)
        raise QueryError("an operator has nothing on one side", at)  # not reached

    def _nested(self, kind: str, value: str, at: int) -> Node:
        """A NOT and what it negates, or a group."""
        if kind == "not":
            after = self.peek()
            if after is None or after[0] in ("or", "close"):
                raise QueryError(f"{value} has nothing to negate", at)
            return Not(self.unary())
        node = self.disjunction()
        if self.peek() is None:
            raise QueryError("a parenthesis is not closed", at)
        self.at += 1
        return node


def parse(text: str) -> Node:
    """The tree of a query; QueryError if it is not one."""
    return _Parser(text).parse()


def show(node: Node) -> str:
    """A tree as query text that parses back to it."""
    if isinstance(node, Word):
        return node.text
    if isinstance(node, Phrase):
        return '"' + " ".join(node.words) + '"'
    if isinstance(node, Not):
        inner = show(node.of)
        return "-" + (f"({inner})" if isinstance(node.of, (And, Or)) else inner)
    if isinstance(node, And):
        return " ".join(f"({show(p)})" if isinstance(p, Or) else show(p) for p in node.parts)
    return " OR ".join(show(p) for p in node.parts)


def analyzed(
    node: Node, sequence: Callable[[str], list[str]], dropped: list[str] | None = None
) -> Node | None:
    """The tree with every word and phrase turned into terms by `sequence` (the analyzer's
    term sequence): a word of no term is dropped (named in `dropped`), a word of several
    is the phrase of them, a phrase of one term is that word. A group left empty goes
    too, a group of one is that one; None if nothing is left."""
    dropped = [] if dropped is None else dropped
    if isinstance(node, (Word, Phrase)):
        text = node.text if isinstance(node, Word) else " ".join(node.words)
        terms = sequence(text)
        if not terms:
            dropped.append(show(node))
            return None
        return Word(terms[0]) if len(terms) == 1 else Phrase(tuple(terms))
    if isinstance(node, Not):
        inner = analyzed(node.of, sequence, dropped)
        return None if inner is None else Not(inner)
    parts = [p for p in (analyzed(p, sequence, dropped) for p in node.parts) if p is not None]
    if len(parts) < 2:
        return parts[0] if parts else None
    return type(node)(tuple(parts))


@dataclass(frozen=True)
class Alternative:
    """One conjunction of a query's expansion: what must be in a document, and what not."""

    words: frozenset[str]
    phrases: frozenset[tuple[str, ...]]
    not_words: frozenset[str] = frozenset()
    not_phrases: frozenset[tuple[str, ...]] = frozenset()

    @property
    def terms(self) -> frozenset[str]:
        """Every term a matching document holds: its words and its phrases' terms."""
        return self.words.union(*self.phrases)

    @property
    def plain(self) -> bool:
        """A conjunction of terms alone, as queries were before this language."""
        return not (self.phrases or self.not_words or self.not_phrases)

    def show(self) -> str:
        """As query text, its parts in a stable order."""
        parts = sorted(self.words) + ['"' + " ".join(p) + '"' for p in sorted(self.phrases)]
        parts += ["-" + w for w in sorted(self.not_words)]
        parts += ['-"' + " ".join(p) + '"' for p in sorted(self.not_phrases)]
        return " ".join(parts)


def alternatives(node: Node, most: int = MAX_ALTERNATIVES) -> list[Alternative]:
    """The query's disjunctive normal form: its alternatives, each once, in a stable order.
    QueryError if there are more than `most`, or if one has nothing positive (it could
    never be indexed: `-a`, `a OR -b`)."""
    out: dict[Alternative, None] = {}
    for literals in _dnf(node, most):
        pos = [x for neg, x in literals if not neg]
        neg = [x for negated, x in literals if negated]
        phrases = frozenset(x.words for x in pos if isinstance(x, Phrase))
        alt = Alternative(  # a word its phrases hold says nothing more: one form for both
            frozenset(x.text for x in pos if isinstance(x, Word)).difference(*phrases),
            phrases,
            frozenset(x.text for x in neg if isinstance(x, Word)),
            frozenset(x.words for x in neg if isinstance(x, Phrase)),
        )
        if not (alt.words or alt.phrases):
            raise QueryError("an alternative has only negated words: it could match anything", 0)
        out[alt] = None
    return list(out)


def _dnf(node: Node, most: int, negated: bool = False) -> list[list[tuple[bool, Node]]]:
    """Conjunctions of literals (negated?, word or phrase), NOT pushed down to them."""
    if isinstance(node, (Word, Phrase)):
        return [[(negated, node)]]
    if isinstance(node, Not):
        return _dnf(node.of, most, not negated)
    either = isinstance(node, Or) != negated  # De Morgan: NOT (a AND b) = -a OR -b
    expanded = [_dnf(p, most, negated) for p in node.parts]
    count = sum(map(len, expanded)) if either else prod(map(len, expanded))
    if count > most:
        raise QueryError(f"the query expands to more than {most} alternatives", 0)
    if either:
        return [conj for e in expanded for conj in e]
    return [sum(c, []) for c in product(*expanded)]
