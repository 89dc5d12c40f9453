"""Key ownership hooks: what a node holds for the keys it owns, and how it hands them over.

The ring calls `take_range` when its region shrinks (a new predecessor joined, or it is
leaving) and `put_items` when it receives keys. The engine plugs in its own store (inverted
lists); `SortedKeyStore` is the plain reference store the ring's tests use.
"""

from __future__ import annotations

import bisect
from typing import Iterable, Protocol

from chord.ids import distance


class KeyStore(Protocol):
    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        """Remove and return every item whose key lies in (lo, hi] clockwise."""

    def put_items(self, items: Iterable[tuple[int, bytes]]) -> None:
        """Take ownership of items handed over by another node."""

    def __len__(self) -> int:
        """Items held."""


class SortedKeyStore:
    """A multimap key -> values with keys kept sorted, so range hand-over is a bisect."""

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._values: dict[int, list[bytes]] = {}

    def put(self, key: int, value: bytes) -> None:
        if key not in self._values:
            bisect.insort(self._keys, key)
            self._values[key] = []
        self._values[key].append(value)

    def put_items(self, items: Iterable[tuple[int, bytes]]) -> None:
        for key, value in items:
            self.put(key, value)

    def get(self, key: int) -> list[bytes]:
        return list(self._values.get(key, ()))

    def keys(self) -> list[int]:
        return list(self._keys)

    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        if lo == hi:  # the whole circle
            spans = [(0, len(self._keys))]
        elif lo < hi:
            spans = [(bisect.bisect_right(self._keys, lo), bisect.bisect_right(self._keys, hi))]
        else:  # wraps past zero
            spans = [(bisect.bisect_right(self._keys, lo), len(self._keys)),
                     (0, bisect.bisect_right(self._keys, hi))]
        taken = [k for a, b in spans for k in self._keys[a:b]]
        if not taken:
            return []
        gone = set(taken)
        self._keys = [k for k in self._keys if k not in gone]
        taken.sort(key=lambda k: distance(lo, k))
        return [(k, v) for k in taken for v in self._values.pop(k)]

    def __len__(self) -> int:
        return sum(len(v) for v in self._values.values())
