"""Query resolution at a QN (paper section 6), free of I/O.

Term Dialogue: the QN asks the publishing node about term ids, the DN answers with a bit
vector. Asking is done in rounds: each round every unresolved query contributes its next
`batch` unanswered ids, rarest first when document frequencies are known (a rare term is
the likeliest to be absent, ending the query soonest), else in id order. An answer of
"absent" drops a query; a query whose ids are all present is matched.
Bloom filters: the DN's filter over all its term ids drops every query with an id the
filter rules out; the survivors finish by Term Dialogue, since a filter can err "present".
"""

from __future__ import annotations

from typing import Callable, Sequence

from bitarray import bitarray

from cqengine.announce import Knowledge
from cqengine.bloom import BloomFilter
from cqengine.proto import cqengine_pb2 as pb

Rarity = Callable[[int, str], float]  # (term id, term) -> document frequency


def pack_bits(flags: Sequence[bool]) -> bytes:
    return bitarray(list(flags), endian="little").tobytes()


def unpack_bits(data: bytes, n: int) -> list[bool]:
    bits = bitarray(endian="little")
    bits.frombytes(data)
    if len(bits) < n:
        raise ValueError(f"bit vector of {len(bits)} bits answers {n} ids")
    return bits[:n].tolist()


class Resolution:
    def __init__(self, candidates: Sequence[pb.QueryEntry], know: Knowledge,
                 rarity: Rarity | None = None, batch: int = 1) -> None:
        self.batch = max(1, batch)
        self.answers: dict[int, bool] = {}
        self.pending: dict[int, pb.QueryEntry] = {}
        self.unknown: dict[int, list[int]] = {}
        self.matched: list[pb.QueryEntry] = []
        for e in candidates:
            ids = [(y, t) for y, t in zip(e.term_ids, e.terms) if y not in know.present]
            if rarity is not None:
                ids.sort(key=lambda p: (rarity(*p), p[0]))
            if ids:
                self.pending[e.subscription_id] = e
                self.unknown[e.subscription_id] = [y for y, _ in ids]
            else:
                self.matched.append(e)  # every term already known present

    def apply_bloom(self, bloom: BloomFilter) -> int:
        """Drop queries the filter rules out; returns how many went."""
        ruled_out = [s for s, ids in self.unknown.items() if any(y not in bloom for y in ids)]
        for s in ruled_out:
            self._drop(s)
        return len(ruled_out)

    def question(self) -> list[int]:
        """The ids to ask about this round; empty when every query is decided."""
        ask: set[int] = set()
        for ids in self.unknown.values():
            ask.update([y for y in ids if y not in self.answers][:self.batch])
        return sorted(ask)

    def answer(self, ids: Sequence[int], present: Sequence[bool]) -> None:
        self.answers.update(zip(ids, present))
        for s in list(self.unknown):
            told = [self.answers.get(y) for y in self.unknown[s]]
            if False in told:
                self._drop(s)
            elif None not in told:
                self.matched.append(self.pending.pop(s))
                del self.unknown[s]

    def _drop(self, s: int) -> None:
        del self.pending[s]
        del self.unknown[s]
