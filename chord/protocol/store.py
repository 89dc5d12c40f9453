"""Key ownership hooks: what a node holds for the keys it owns, and how it hands them over.

The ring calls `take_range` when its region shrinks (a new predecessor joined, or it is
leaving) and `put_items` when it receives keys. Items cross the wire as (key, bytes);
`SortedKeyStore` keeps them as objects and encodes only on hand-over, so the engine can
keep its inverted lists as parsed entries.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from chord.protocol.ids import distance

V = TypeVar("V")


class KeyStore(Protocol):
    @property
    def copies(self) -> bool:
        """Does take_range copy (the giver keeps a replica) rather than move? A node
        handed its region once need not be handed it again on every Notify."""
        ...

    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        """Remove and return every item whose key lies in (lo, hi] clockwise."""

    def put_items(self, items: Iterable[tuple[int, bytes]]) -> None:
        """Take ownership of items handed over by another node."""

    def __len__(self) -> int:
        """Items held."""


def _same(value: Any) -> Any:
    return value


class SortedKeyStore(Generic[V]):
    """A multimap key -> values with keys kept sorted, so range hand-over is a bisect."""

    copies = False

    def __init__(
        self, encode: Callable[[V], bytes] = _same, decode: Callable[[bytes], V] = _same
    ) -> None:
        self._keys: list[int] = []
        self._values: dict[int, list[V]] = {}
        self._count = 0
        self.encode, self.decode = encode, decode

    def put(self, key: int, value: V) -> None:
        if key not in self._values:
            bisect.insort(self._keys, key)
            self._values[key] = []
        self._values[key].append(value)
        self._count += 1

    def put_items(self, items: Iterable[tuple[int, bytes]]) -> None:
        for key, data in items:
            self.put(key, self.decode(data))

    def get(self, key: int) -> list[V]:
        return list(self._values.get(key, ()))

    def remove(self, key: int, match: Callable[[V], bool]) -> int:
        """Drop the values under key that match; returns how many went."""
        values = self._values.get(key)
        if not values:
            return 0
        kept = [v for v in values if not match(v)]
        gone = len(values) - len(kept)
        self._count -= gone
        if kept:
            self._values[key] = kept
        else:
            del self._values[key]
            self._keys.pop(bisect.bisect_left(self._keys, key))
        return gone

    def keys(self) -> list[int]:
        return list(self._keys)

    def keys_in(self, lo: int, hi: int) -> list[int]:
        """The keys in (lo, hi] clockwise, in that order (lo == hi: every key)."""
        return [k for a, b in self._spans(lo, hi) for k in self._keys[a:b]]

    def _spans(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Where the keys in (lo, hi] clockwise lie in the sorted keys, as slices."""
        if lo == hi:  # the whole circle
            return [
                (bisect.bisect_right(self._keys, lo), len(self._keys)),
                (0, bisect.bisect_right(self._keys, lo)),
            ]
        if lo < hi:
            return [(bisect.bisect_right(self._keys, lo), bisect.bisect_right(self._keys, hi))]
        return [  # wraps past zero
            (bisect.bisect_right(self._keys, lo), len(self._keys)),
            (0, bisect.bisect_right(self._keys, hi)),
        ]

    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        taken = self.keys_in(lo, hi)
        if not taken:
            return []
        gone = set(taken)
        self._keys = [k for k in self._keys if k not in gone]
        taken.sort(key=lambda k: distance(lo, k))
        out = [(k, self.encode(v)) for k in taken for v in self._values.pop(k)]
        self._count -= len(out)
        return out

    def __len__(self) -> int:
        return self._count
