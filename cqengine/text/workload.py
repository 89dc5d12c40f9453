"""Query workloads over a corpus's term statistics (paper section 7.1).

Query sizes follow Normal(v, 0.3v), rounded, at least 1, with distinct terms. Terms are
drawn Uniform (any vocabulary term alike), Skew (in proportion to document frequency) or
InverSkew (the term of frequency rank r gets the probability of rank V-r+1).

Query i is drawn from its own generator, seeded by (seed, i): a workload is the same
whether one process makes it or a Spark job spreads it over any number of partitions.
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
            chosen[self.terms[bisect.bisect_right(self.cum, rng.random() * self.cum[-1])]] = None
        return list(chosen)


def generate_queries(
    df: Mapping[str, int], n: int, kind: str = "skew", mean_size: float = 5.0, seed: int = 1
) -> list[list[str]]:
    sampler = Sampler(df, kind, mean_size, seed)
    return [sampler.query(i) for i in range(n)]
