"""Duplicate-insensitive synopses of the K most popular terms (paper section 8.1).

The coin-tossing experiment CT(y) is played once per (term, document): the number of
tosses until the first head is the number of trailing zero bits of a hash of the pair,
plus one, capped at y. Because the value is a function of the pair, a document seen along
two gossip paths, or published twice, can never raise a term's value. A term's value is
the maximum over the documents holding it — about log2 of its document frequency — and a
synopsis is the K terms of highest value (ties: smaller term id first).

Merging keeps the maximum per term, then the top K. Merge-then-truncate is a semilattice
homomorphism: a term that belongs in the top K of everything is in the top K of every
part that holds its maximum (anything ranked above it there is ranked above it overall).
So a node keeps only K entries, merging is idempotent, commutative and associative, and
gossiping only what changed since the last push to a neighbour converges to the synopsis a
central computation over all documents gives.

With `hashes` h > 1 each term keeps h independent CT registers and its value is their sum
(stochastic averaging, as in HyperLogLog): a better popularity estimate for h bytes per
entry instead of one. The homomorphism above needs a single register, though: with h > 1 a
term's registers may peak in different parts, and truncating a part can drop one. Merging
stays idempotent and commutative and the result is close to, but not always exactly, the
central top K; h = 1 (the paper's) is exact.
"""

from __future__ import annotations

from collections.abc import Iterable

import mmh3

Entry = tuple[int, tuple[int, ...]]  # (term id, CT registers)


def coin_tosses(term_id: int, docno: str, y: int, hashes: int = 1) -> tuple[int, ...]:
    """CT(y) for the pair, once per register: tosses until the first head, at most y."""
    key = docno.encode("utf-8") + b"\x00" + term_id.to_bytes(8, "little")
    out = []
    for j in range(hashes):
        h = mmh3.hash64(key, seed=j, signed=False)[0]
        out.append(min(y, (h & -h).bit_length()) if h else y)
    return tuple(out)


def rank_key(entry: Entry) -> tuple[int, int]:
    term, values = entry
    return (-sum(values), term)


def top_k(entries: dict[int, tuple[int, ...]], k: int) -> dict[int, tuple[int, ...]]:
    if len(entries) <= k:
        return dict(entries)
    return dict(sorted(entries.items(), key=rank_key)[:k])


def merge(a: dict[int, tuple[int, ...]], b: Iterable[Entry], k: int) -> dict[int, tuple[int, ...]]:
    """The top K of the per-term, per-register maxima of a and b."""
    out = dict(a)
    for term, values in b:
        old = out.get(term)
        out[term] = values if old is None else tuple(map(max, old, values))
    return top_k(out, k)


class Synopsis:
    """A node's synopsis, with a change clock so gossip can send deltas."""

    def __init__(self, k: int, y: int = 32, hashes: int = 1) -> None:
        self.k, self.y, self.hashes = k, y, hashes
        self.entries: dict[int, tuple[int, ...]] = {}
        self.changed_at: dict[int, int] = {}  # term -> clock of its last change
        self.clock = 0

    def add_document(self, docno: str, term_ids: Iterable[int]) -> bool:
        return self.merge((t, coin_tosses(t, docno, self.y, self.hashes)) for t in term_ids)

    def merge(self, entries: Iterable[Entry]) -> bool:
        """Merge entries in; True when the synopsis changed."""
        new = merge(self.entries, entries, self.k)
        if new == self.entries:
            return False
        self.clock += 1
        for term, values in new.items():
            if self.entries.get(term) != values:
                self.changed_at[term] = self.clock
        self.entries = new
        self.changed_at = {t: c for t, c in self.changed_at.items() if t in new}
        return True

    def since(self, clock: int) -> list[Entry]:
        """Entries changed after `clock`: what a neighbour last told at `clock` lacks."""
        return sorted((t, self.entries[t]) for t, c in self.changed_at.items() if c > clock)

    def popular(self) -> frozenset[int]:
        return frozenset(self.entries)

    def digest(self) -> int:
        """A fingerprint of the entries, to compare synopses across nodes."""
        data = b"".join(t.to_bytes(8, "little") + bytes(v) for t, v in sorted(self.entries.items()))
        return mmh3.hash64(data, signed=False)[0]
