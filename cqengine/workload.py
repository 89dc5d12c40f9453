"""Query workloads over a corpus's term statistics (paper section 7.1), in plain Python.

Query sizes follow Normal(v, 0.3v), rounded, at least 1, with distinct terms. Terms are
drawn Uniform (any vocabulary term alike), Skew (in proportion to document frequency) or
InverSkew (the term of frequency rank r gets the probability of rank V-r+1). The Spark
job for paper-scale workloads follows the same definitions.
"""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Mapping

KINDS = ("uniform", "skew", "inverskew")


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


def query_size(rng: random.Random, mean: float, vocab: int) -> int:
    return max(1, min(vocab, round(rng.gauss(mean, 0.3 * mean))))


def generate_queries(df: Mapping[str, int], n: int, kind: str = "skew", mean_size: float = 5.0,
                     seed: int = 1) -> list[list[str]]:
    terms, weights = term_weights(df, kind)
    if not terms:
        raise ValueError("no terms to draw queries from")
    cum = list(itertools.accumulate(weights))
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        size = query_size(rng, mean_size, len(terms))
        chosen: dict[str, None] = {}
        while len(chosen) < size:
            chosen[terms[bisect.bisect_left(cum, rng.random() * cum[-1])]] = None
        out.append(list(chosen))
    return out
