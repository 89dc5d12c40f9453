"""Which keys lie in a range of the ring, as every part of a node's records asks it.

A node's records are found and handed over by range (lo, hi] of keys, clockwise: one key
at a time (`in_range`), or many at once (`outside`) where a node drops what no owner
counts on it for any more, a pass that runs every round and mostly finds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from chord.protocol.ids import in_open_closed
from cqengine.core.state import summaries


def in_range(key: int, lo: int, hi: int) -> bool:
    """key in (lo, hi] clockwise; lo == hi is the whole circle."""
    return lo == hi or in_open_closed(key, lo, hi)


def outside(keys: Iterable[int], ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Which of these keys lie in none of the ranges, tested as an array."""
    column = np.fromiter(keys, dtype=np.uint64)
    kept = np.zeros(len(column), dtype=bool)
    for lo, hi in ranges:
        kept |= summaries.in_range(column, lo, hi)
    return ~kept
