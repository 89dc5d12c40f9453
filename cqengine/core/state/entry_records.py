"""A node's inverted-list entries as records that merge, with their tombstones.

Entries are immutable: a record is (version, tombstone or entry), and of two records of
one (key, subscription) the higher version wins, a tombstone at equal version. Merging is
a maximum, so copies that have seen the same records agree whatever the order (a join
semilattice). A tombstone is kept TOMBSTONE_TTL seconds, long enough to reach every
replica, then collected. Its age travels with it, counted on each holder's monotonic
clock (cqengine.core.basis.ages), so every copy collects it at about the same time
whatever the nodes' wall clocks say.

The entries themselves are the inverted index's (cqengine.core.state.postings); this part
of the record store (cqengine.core.state.records) adds the tombstones and the merge.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from cqengine.core.basis.ages import Ages
from cqengine.core.state.journal import Journal
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.ranges import in_range, outside
from cqengine.core.state.summaries import Entries
from cqengine.core.terms.queries import entry_slot
from cqengine.proto import cqengine_pb2 as pb


@dataclass(frozen=True)
class Rank:
    """How an entry record compares: by version, a tombstone winning at equal version."""

    version: int
    deleted: bool

    def __lt__(self, other: Rank) -> bool:
        return (self.version, self.deleted) < (other.version, other.deleted)


class EntryRecords:
    """The entry records under a node's keys: the index's entries and their tombstones,
    each tombstone's version and when it was made (on the `now` clock of `ages`)."""

    def __init__(self, index: InvertedIndex, ages: Ages) -> None:
        self.index = index
        self.ages = ages
        self.journal: Journal | None = None
        self.tombstones: dict[tuple[int, int], tuple[int, float]] = {}  # (key, slot): version, made

    def rank(self, key: int, sub: int) -> Rank | None:
        tomb = self.tombstones.get((key, sub))
        if tomb is not None:
            return Rank(tomb[0], True)
        e = self.index.entry(key, sub)
        return None if e is None else Rank(e.version, False)

    def put_entry(self, key: int, entry: pb.QueryEntry, made: float | None = None) -> bool:
        """Merge an entry record (a tombstone when `made`: when it was, on my `now` clock);
        whether it changed what is held."""
        sub = entry_slot(entry)  # tombstones carry the slot as their subscription
        new = Rank(entry.version, made is not None)
        old = self.rank(key, sub)
        if old is not None and not old < new:
            return False
        if made is not None:
            if self.index.holds(key, sub):
                self.index.remove(key, lambda e: entry_slot(e) == sub)
            if self.ages.fresh(made):
                self.tombstones[(key, sub)] = (entry.version, made)
                if self.journal is not None:
                    self.journal.tombstoned(key, sub, entry.version, self.ages.stamp(made))
            return True
        if self.tombstones.pop((key, sub), None) is not None and self.journal is not None:
            self.journal.tombstoned(key, sub, None, 0.0)
        self.index.replace(key, entry)
        return True

    def delete_entry(self, key: int, sub: int, version: int) -> bool:
        """Tombstone (key, sub) at this version, now."""
        entry = pb.QueryEntry(subscription_id=sub, version=version)
        return self.put_entry(key, entry, self.ages.now())

    def entry_records(self, lo: int, hi: int) -> Iterator[pb.EntryRecord]:
        """Every entry record under keys in (lo, hi], tombstones too."""
        for key in self.index.keys_in(lo, hi):
            for e in self.index.get(key):
                yield pb.EntryRecord(key=key, entry=e)
        for (key, sub), (version, made) in self.tombstones.items():
            if in_range(key, lo, hi):
                entry = pb.QueryEntry(subscription_id=sub, version=version)
                yield pb.EntryRecord(key=key, entry=entry, **self.ages.deleted(made))

    def entry_record(self, key: int, sub: int) -> pb.EntryRecord | None:
        """The record of (key, sub) as sent, its tombstone if it has one (None: neither)."""
        tomb = self.tombstones.get((key, sub))
        if tomb is not None:
            entry = pb.QueryEntry(subscription_id=sub, version=tomb[0])
            return pb.EntryRecord(key=key, entry=entry, **self.ages.deleted(tomb[1]))
        e = self.index.entry(key, sub)
        return None if e is None else pb.EntryRecord(key=key, entry=e)

    def indexed_in(self, lo: int, hi: int) -> Entries:
        """The summaries of the index's entries under keys in (lo, hi]."""
        return Entries.of([(k, s, v, False) for k, s, v in self.index.versions_in(lo, hi)])

    def tombstones_in(self, lo: int, hi: int) -> Entries:
        """The summaries of my tombstones under keys in (lo, hi]."""
        tombs = self.tombstones.items()
        return Entries.of([(k, s, v, True) for (k, s), (v, _) in tombs if in_range(k, lo, hi)])

    def expire(self, due: float) -> None:
        """Collect the tombstones made before `due`."""
        for (key, sub), (_, made) in list(self.tombstones.items()):
            if made < due:
                self._collect(key, sub)

    def drop_outside(self, ranges: Sequence[tuple[int, int]]) -> int:
        """Drop the entries and tombstones under keys in none of these ranges; how many
        entries went (tombstones are not counted)."""
        gone = 0
        keys = self.index.keys()
        for at in np.flatnonzero(outside(keys, ranges)).tolist():
            gone += self.index.remove(keys[at], lambda e: True)
        tombs = list(self.tombstones)
        for at in np.flatnonzero(outside((k for k, _ in tombs), ranges)).tolist():
            self._collect(*tombs[at])
        return gone

    def _collect(self, key: int, sub: int) -> None:
        del self.tombstones[(key, sub)]
        if self.journal is not None:
            self.journal.tombstoned(key, sub, None, 0.0)
