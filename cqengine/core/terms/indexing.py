"""Which of a query's terms it is indexed under: RI, OI, MHI and SAP-MHI (paper sections 4, 8).

Every strategy sees the query's (term id, term) pairs sorted by id and returns the position
of the indexing term. RI draws from a generator seeded per subscription, so a run is
reproducible; OI takes the rarest term by document frequency (a term the statistics never
saw counts as rarest); SAP-MHI takes the first term in id order that is not popular.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

STRATEGIES = ("ri", "oi", "mhi", "sap-mhi")

Pairs = Sequence[tuple[int, str]]  # (term id, term), sorted by id


def random_index(pairs: Pairs, rng: random.Random) -> int:
    return rng.randrange(len(pairs))


def optimal_index(pairs: Pairs, df: Mapping[str, int]) -> int:
    return min(range(len(pairs)), key=lambda i: (df.get(pairs[i][1], 0), pairs[i][0]))


def min_hash_index(pairs: Pairs) -> int:
    return 0


def sampled_min_hash_index(pairs: Pairs, popular: frozenset[int] | set[int]) -> int:
    """Algorithm 5: the first term by id that the synopsis (term ids) does not list; MHI's if
    all are."""
    return next((i for i, (x, _) in enumerate(pairs) if x not in popular), 0)


def chooser(
    strategy: str,
    seed: int,
    df: Mapping[str, int] | None,
    popular: Callable[[], frozenset[int]] | None,
) -> Callable[[Pairs, int], int]:
    """A function (pairs, subscription id) -> position of the indexing term. `popular`
    gives the current popular term ids (a synopsis changes; so may the choice)."""
    if strategy == "ri":
        return lambda pairs, sub: random_index(
            pairs, random.Random(seed * 0x9E3779B97F4A7C15 ^ sub)
        )
    if strategy == "oi":
        if df is None:
            raise ValueError("OI indexing needs term statistics (--stats FILE)")
        return lambda pairs, sub: optimal_index(pairs, df)
    if strategy == "mhi":
        return lambda pairs, sub: min_hash_index(pairs)
    if strategy == "sap-mhi":
        if popular is None:
            raise ValueError("SAP-MHI indexing needs a source of popular terms")
        return lambda pairs, sub: sampled_min_hash_index(pairs, popular())
    raise ValueError(
        f"unknown indexing strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
    )
