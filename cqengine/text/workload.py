"""Query workloads over a corpus's term statistics (paper section 7.1).

Query sizes follow Normal(v, 0.3v), rounded, at least 1, with distinct terms. Terms are
drawn Uniform (any vocabulary term alike), Skew (in proportion to document frequency) or
InverSkew (the term of frequency rank r gets the probability of rank V-r+1).

Query i is drawn from its own generator, seeded by (seed, i): a workload is the same
whether one process makes it or a Spark job spreads it over any number of partitions.

A boolean mix (`Sampler.boolean`, `boolean_workload`) rewrites a seeded share of the
queries into the query language's other forms, in turn: `a b OR c`, `a b -x`, a phrase
with the rest, `(a OR x) b -"p q"`; x a term drawn as the query's are, a phrase a run of a
document's words of two terms or more when documents are at hand (standing for the
query's first term), else the first term and a drawn one (which real text seldom holds in
a row).
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections.abc import Callable, Mapping, Sequence

from cqengine.text.analysis import analyze_sequence

KINDS = ("uniform", "skew", "inverskew")
PHRASE_TRIES = 50
_WORDS = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # the analyzer's tokens (cqengine.text.analysis)


def term_weights(df: Mapping[str, int], kind: str) -> tuple[list[str], list[float]]:
    """Vocabulary in frequency-rank order (ties by term) and each term's draw weight."""
    ranked = sorted(df, key=lambda t: (-df[t], t))
    freqs = [float(df[t]) for t in ranked]
    if kind == "uniform":
        return ranked, [1.0] * len(ranked)
    if kind == "skew":
        return ranked, freqs
    if kind == "inverskew":
        return ranked, freqs[::-1]
    raise ValueError(f"unknown workload kind {kind!r}; choose one of {', '.join(KINDS)}")


class Sampler:
    """Draws query i of a workload; small and picklable, so Spark can ship it to workers."""

    def __init__(self, df: Mapping[str, int], kind: str, mean_size: float, seed: int) -> None:
        if not df:
            raise ValueError("no terms to draw queries from")
        if mean_size <= 0:
            raise ValueError(f"mean query size must be positive, not {mean_size}")
        self.terms, weights = term_weights(df, kind)
        self.cum = list(itertools.accumulate(weights))
        self.mean, self.seed = mean_size, seed

    def size(self, rng: random.Random) -> int:
        return max(1, min(len(self.terms), round(rng.gauss(self.mean, 0.3 * self.mean))))

    def query(self, i: int) -> list[str]:
        rng = random.Random(f"{self.seed}:{i}")  # str seeds hash the same in every process
        size = self.size(rng)
        chosen: dict[str, None] = {}
        while len(chosen) < size:
            chosen[self.draw(rng)] = None
        return list(chosen)

    def draw(self, rng: random.Random) -> str:
        return self.terms[bisect.bisect_right(self.cum, rng.random() * self.cum[-1])]

    def boolean(
        self, i: int, share: float, phrase: Callable[[random.Random], str] | None = None
    ) -> str:
        """Query i as text: for a seeded `share` of the queries, rewritten into a form of
        the query language (module docstring); else its terms."""
        terms = self.query(i)
        rng = random.Random(f"{self.seed}:{i}:boolean")
        if rng.random() >= share:
            return " ".join(terms)
        pair = phrase or (lambda r: f'"{terms[0]} {self.draw(r)}"')
        form = i % len(BOOLEAN_FORMS)
        return boolean_form(terms, form, lambda: self.draw(rng), lambda: pair(rng))


def generate_queries(
    df: Mapping[str, int], n: int, kind: str = "skew", mean_size: float = 5.0, seed: int = 1
) -> list[list[str]]:
    sampler = Sampler(df, kind, mean_size, seed)
    return [sampler.query(i) for i in range(n)]


BOOLEAN_FORMS = ("or", "not", "phrase", "group")


def boolean_form(
    terms: Sequence[str], form: int, word: Callable[[], str], phrase: Callable[[], str]
) -> str:
    """A conjunction's terms in one of the language's forms (BOOLEAN_FORMS[form])."""
    first, rest = terms[0], " ".join(terms[1:])
    if BOOLEAN_FORMS[form] == "or":
        half = max(1, len(terms) // 2)
        other = " ".join(terms[half:]) or word()
        return f"{' '.join(terms[:half])} OR {other}"
    if BOOLEAN_FORMS[form] == "not":
        return f"{' '.join(terms)} -{word()}"
    if BOOLEAN_FORMS[form] == "phrase":
        return f"{phrase()} {rest}".strip()
    return f"({first} OR {word()}) {rest} -{phrase()}".replace("  ", " ")


def document_phrases(texts: Sequence[str]) -> Callable[[random.Random], str]:
    """Phrases drawn from documents: a run of 2-3 consecutive words of one of them (its
    tokens as the analyzer sees them, lowercased: no quote, bracket or OR of the text's
    becomes the query's)."""
    docs = [w for w in (_WORDS.findall(t.lower()) for t in texts) if len(w) >= 3]

    def phrase(rng: random.Random) -> str:
        for _ in range(PHRASE_TRIES):  # a run of stop words alone is no phrase: another
            words = docs[rng.randrange(len(docs))]
            at, k = rng.randrange(len(words) - 2), rng.randint(2, 3)
            run = words[at : at + k]
            if len(analyze_sequence(" ".join(run))) >= 2:
                break
        return '"' + " ".join(run) + '"'

    return phrase


def boolean_workload(
    df: Mapping[str, int],
    n: int,
    kind: str = "skew",
    mean_size: float = 2.0,
    seed: int = 1,
    share: float = 1.0,
    texts: Sequence[str] = (),
) -> list[str]:
    """n queries as text, a `share` of them in the language's other forms, phrases drawn
    from `texts` (documents' text) when given."""
    sampler = Sampler(df, kind, mean_size, seed)
    phrase = document_phrases(texts) if texts else None
    return [sampler.boolean(i, share, phrase) for i in range(n)]
