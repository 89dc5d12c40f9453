"""Array idioms the columns share (a replica's copies, cqengine.core.alerts.copies; a home log's
mailboxes, cqengine.core.homelog.table): a key's place in a sorted table, and a value's
rank among its equals."""

from __future__ import annotations

import numpy as np


def places(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each key's place in a sorted table (-1: not in it)."""
    if not len(table):
        return np.full(len(keys), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return np.where(table[at] == keys, at, -1)


def ranks(ranked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of sorted values: each one's run of equal values (0, 1, ...), and its rank in it."""
    starts = np.ones(len(ranked), dtype=bool)
    starts[1:] = ranked[1:] != ranked[:-1]
    group = np.cumsum(starts) - 1
    return group, np.arange(len(ranked)) - np.flatnonzero(starts)[group]
