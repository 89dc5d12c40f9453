"""The document's Bloom filter over its term ids (the paper: 1K bits, 5 hash functions).

Positions come from one 128-bit mmh3 of the id split into two 64-bit halves and combined
as h1 + i*h2 (Kirsch-Mitzenmacher), which keeps the false-positive rate of k independent
hashes at the cost of one.
"""

from __future__ import annotations

from typing import Iterable

import mmh3
from bitarray import bitarray


def _positions(term_id: int, bits: int, hashes: int) -> list[int]:
    h1, h2 = mmh3.hash64(term_id.to_bytes(8, "little"), signed=False)
    return [(h1 + i * h2) % bits for i in range(hashes)]


class BloomFilter:
    def __init__(self, bits: int = 1024, hashes: int = 5, data: bytes | None = None) -> None:
        if bits <= 0 or bits % 8 or hashes <= 0:
            raise ValueError(f"a Bloom filter needs a positive multiple of 8 bits and hashes, not {bits}/{hashes}")
        self.bits, self.hashes = bits, hashes
        self.array = bitarray(bits, endian="little")
        if data is None:
            self.array.setall(0)
        else:
            if len(data) * 8 != bits:
                raise ValueError(f"filter of {len(data) * 8} bits, expected {bits}")
            self.array = bitarray(endian="little")
            self.array.frombytes(data)

    @classmethod
    def of(cls, term_ids: Iterable[int], bits: int = 1024, hashes: int = 5) -> "BloomFilter":
        bf = cls(bits, hashes)
        for t in term_ids:
            bf.add(t)
        return bf

    def add(self, term_id: int) -> None:
        for p in _positions(term_id, self.bits, self.hashes):
            self.array[p] = 1

    def __contains__(self, term_id: int) -> bool:
        return all(self.array[p] for p in _positions(term_id, self.bits, self.hashes))

    def to_bytes(self) -> bytes:
        return self.array.tobytes()
