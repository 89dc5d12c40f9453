"""The document's Bloom filter over its term ids (the paper: 1K bits, 5 hash functions).

Positions come from one 128-bit mmh3 of the id split into two 64-bit halves and combined
as h1 + i*h2 (Kirsch-Mitzenmacher), which keeps the false-positive rate of k independent
hashes at the cost of one.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import mmh3
import numpy as np
from bitarray import bitarray
from numpy.typing import NDArray


def _positions(term_id: int, bits: int, hashes: int) -> list[int]:
    h1, h2 = mmh3.hash64(term_id.to_bytes(8, "little"), signed=False)
    return [(h1 + i * h2) % bits for i in range(hashes)]


def _fmix(k: NDArray[np.uint64]) -> NDArray[np.uint64]:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


def positions_array(term_ids: np.ndarray, bits: int, hashes: int) -> NDArray[np.intp]:
    """`_positions` for a uint64 array at once, by hash: (hashes, len), column i the
    positions of term_ids[i]. MurmurHash3 x64-128 of the 8-byte little-endian id (what
    mmh3.hash64 computes), written out in numpy, so a QN tests thousands of candidate
    terms against a filter without a Python call each."""
    k1 = term_ids.astype(np.uint64) * np.uint64(0x87C37B91114253D5)
    k1 = (k1 << np.uint64(31)) | (k1 >> np.uint64(33))
    k1 = k1 * np.uint64(0x4CF5AD432745937F)
    h1, h2 = k1 ^ np.uint64(8), np.full(k1.shape, 8, dtype=np.uint64)  # seed 0, length 8
    h1 = h1 + h2
    h2 = h2 + h1
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = h1 + h2
    h2 = h2 + h1
    # (h1 + i*h2) mod bits on unbounded integers, as _positions computes it
    b = np.uint64(bits)
    return (
        ((h1 % b)[None, :] + np.arange(hashes, dtype=np.uint64)[:, None] * (h2 % b)[None, :]) % b
    ).astype(np.intp)


class BloomFilter:
    def __init__(self, bits: int = 1024, hashes: int = 5, data: bytes | None = None) -> None:
        self._check(bits, hashes)
        self.bits, self.hashes = bits, hashes
        self._unpacked: NDArray[np.bool_] | None = (
            None  # the bits as bools, for holds_positions; None after add
        )
        if data is None:
            self.array = bitarray(bits, endian="little")
            self.array.setall(0)
        else:
            if len(data) * 8 != bits:
                raise ValueError(f"filter of {len(data) * 8} bits, expected {bits}")
            self.array = bitarray(endian="little")
            self.array.frombytes(data)

    @staticmethod
    def _check(bits: int, hashes: int) -> None:
        if bits <= 0 or bits % 8 or hashes <= 0:
            raise ValueError(
                f"a Bloom filter needs a positive multiple of 8 bits and hashes, not "
                f"{bits}/{hashes}"
            )

    @classmethod
    def of(cls, term_ids: Iterable[int], bits: int = 1024, hashes: int = 5) -> BloomFilter:
        """The filter holding these ids (what adding each gives), its bits set at once."""
        cls._check(bits, hashes)  # before the bits are laid out
        on = np.zeros(bits, dtype=bool)
        on[positions_array(np.fromiter(term_ids, dtype=np.uint64), bits, hashes).ravel()] = True
        return cls(bits, hashes, np.packbits(on, bitorder="little").tobytes())

    def add(self, term_id: int) -> None:
        self._unpacked = None
        for p in _positions(term_id, self.bits, self.hashes):
            self.array[p] = 1

    def __contains__(self, term_id: int) -> bool:
        return all(self.array[p] for p in _positions(term_id, self.bits, self.hashes))

    def contains_array(
        self, term_ids: np.ndarray, positions: NDArray[np.intp] | None = None
    ) -> NDArray[np.bool_]:
        """Elementwise `in`, for a uint64 array (whose positions_array may be known already)."""
        if positions is None:
            positions = positions_array(term_ids, self.bits, self.hashes)
        return self.holds_positions(positions)

    def holds_positions(self, positions: NDArray[np.intp]) -> NDArray[np.bool_]:
        """Per column of positions (a positions_array's): are all its bits set?"""
        if self._unpacked is None:
            self._unpacked = np.unpackbits(
                np.frombuffer(self.array.tobytes(), dtype=np.uint8), bitorder="little"
            ).view(np.bool_)
        held: NDArray[np.bool_] = np.logical_and.reduce(self._unpacked[positions], axis=0)
        return held

    def to_bytes(self) -> bytes:
        return self.array.tobytes()


@lru_cache(maxsize=64)  # every QN of a document hears the same filter
def received_filter(bits: int, hashes: int, data: bytes) -> BloomFilter:
    """A document's filter as a QN received it; shared, so never added to."""
    return BloomFilter(bits, hashes, data)
