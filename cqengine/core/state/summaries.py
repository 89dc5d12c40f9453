"""Summaries of records, as columns: what reconciliation compares (cqengine.core.state.records).

A record's summary tells its copies apart: an entry's (key, subscription, version,
tombstone), a home record's (key, subscription, tombstone, first, next, and whether some
alerts were acknowledged before this copy held them: mailboxes.Mailbox.unheld). The owner of a
range sends a digest of each bucket of summaries. A replica answers the buckets that differ
with its summaries in them, not its records: under load nearly every bucket differs by
alerts still on their way, and whole records (mailboxes and all) cost both sides a pass
over everything they hold and megabytes on the wire at every round. From the summaries the
owner sends back only what the replica lacks (a mailbox's missing alerts, not the mailbox),
and asks for only those records it lacks itself.

Summaries are numpy columns: a digest is a vectorized hash and a sum per bucket, not a
Python object and a hash call per record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cqengine.core.basis import limits
from cqengine.proto import cqengine_pb2 as pb

U64 = np.uint64
_M1, _M2 = U64(0xBF58476D1CE4E5B9), U64(0x94D049BB133111EB)


def _mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """splitmix64's finalizer: every bit of x moves every bit of the result (uint64
    arithmetic wraps, as it must)."""
    x = (x ^ (x >> U64(30))) * _M1
    x = (x ^ (x >> U64(27))) * _M2
    return x ^ (x >> U64(31))


def _hash(*columns: np.ndarray) -> np.ndarray:
    h = np.full(len(columns[0]), 0x9E3779B97F4A7C15, dtype=U64)
    for c in columns:
        h = _mix(h ^ c.astype(U64))
    return h


def _u64(values: Iterable[int]) -> np.ndarray:
    return np.fromiter(values, dtype=U64)


def in_range(keys: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Which keys lie in (lo, hi] clockwise; lo == hi is the whole circle."""
    if lo == hi:
        return np.ones(len(keys), dtype=bool)
    a, b = U64(lo), U64(hi)
    return (keys > a) & (keys <= b) if lo < hi else (keys > a) | (keys <= b)


State = tuple[bool, int, int, bool]  # a home record's: tombstone, first, next, blind


@dataclass
class Entries:
    """Entry records' summaries: a tombstone ranks above an entry of equal version."""

    keys: np.ndarray
    subs: np.ndarray
    versions: np.ndarray
    deleted: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple[int, int, int, bool]]) -> Entries:
        return cls(
            _u64(r[0] for r in rows),
            _u64(r[1] for r in rows),
            _u64(r[2] for r in rows),
            np.fromiter((r[3] for r in rows), dtype=bool, count=len(rows)),
        )

    def hashes(self) -> np.ndarray:
        return _hash(self.keys, self.subs, self.versions, self.deleted)

    def plus(self, other: Entries) -> Entries:
        if not len(other.keys):
            return self
        return Entries(*(np.concatenate(c) for c in zip(self.columns(), other.columns())))

    def columns(self) -> tuple[np.ndarray, ...]:
        return self.keys, self.subs, self.versions, self.deleted

    def where(self, mask: np.ndarray) -> Entries:
        return Entries(self.keys[mask], self.subs[mask], self.versions[mask], self.deleted[mask])

    def ranks(self) -> dict[tuple[int, int], tuple[int, bool]]:
        """(key, subscription) -> (version, tombstone), which compare as records do."""
        return {
            (k, s): (v, d)
            for k, s, v, d in zip(
                self.keys.tolist(),
                self.subs.tolist(),
                self.versions.tolist(),
                self.deleted.tolist(),
            )
        }


@dataclass
class Homes:
    """Home records' summaries: a tombstone has first = next = 0."""

    keys: np.ndarray
    subs: np.ndarray
    deleted: np.ndarray
    firsts: np.ndarray
    nexts: np.ndarray
    blind: np.ndarray  # some acknowledged alerts' documents not known seen

    @classmethod
    def of(cls, rows: list[tuple[int, int, bool, int, int, bool]]) -> Homes:
        n = len(rows)
        return cls(
            _u64(r[0] for r in rows),
            _u64(r[1] for r in rows),
            np.fromiter((r[2] for r in rows), dtype=bool, count=n),
            _u64(r[3] for r in rows),
            _u64(r[4] for r in rows),
            np.fromiter((r[5] for r in rows), dtype=bool, count=n),
        )

    def columns(self) -> tuple[np.ndarray, ...]:
        return self.keys, self.subs, self.deleted, self.firsts, self.nexts, self.blind

    def hashes(self) -> np.ndarray:
        return _hash(*self.columns())

    def plus(self, other: Homes) -> Homes:
        if not len(other.keys):
            return self
        return Homes(*(np.concatenate(c) for c in zip(self.columns(), other.columns())))

    def where(self, mask: np.ndarray) -> Homes:
        return Homes(*(c[mask] for c in self.columns()))

    def states(self) -> dict[int, State]:
        """subscription -> (tombstone, first, next, blind)."""
        firsts, nexts = self.firsts.tolist(), self.nexts.tolist()
        rows = zip(self.subs.tolist(), self.deleted.tolist(), firsts, nexts, self.blind.tolist())
        return {s: (d, f, n, b) for s, d, f, n, b in rows}


def bucket_count(records: int) -> int:
    """Digests for a range of this many records (limits.BUCKETS)."""
    want = -(-records // limits.RECORDS_PER_BUCKET)
    return min(limits.MAX_BUCKETS, max(limits.BUCKETS, 1 << max(0, want - 1).bit_length()))


def buckets(subs: np.ndarray, n: int) -> np.ndarray:
    return (subs % U64(n)).astype(np.intp)


def digests(hashes: np.ndarray, subs: np.ndarray, n: int | None = None) -> list[int]:
    """The sum (mod 2^64) of the hashes in each of n buckets (by default as many as
    bucket_count gives): equal sets, equal digests, in whatever order they are held."""
    sums = np.zeros(bucket_count(len(subs)) if n is None else n, dtype=U64)
    np.add.at(sums, buckets(subs, len(sums)), hashes)
    return sums.tolist()


def differing(mine: list[int], theirs: Iterable[int]) -> list[int]:
    """The buckets whose digests differ."""
    return [b for b, (m, t) in enumerate(zip(mine, theirs)) if m != t]


def in_buckets(subs: np.ndarray, chosen: Iterable[int], n: int) -> np.ndarray:
    return np.isin(buckets(subs, n), np.fromiter(chosen, dtype=np.intp))


def to_message(entries: Entries, homes: Homes) -> pb.Summaries:
    return pb.Summaries(
        entry_keys=entries.keys.tolist(),
        entry_subs=entries.subs.tolist(),
        entry_versions=entries.versions.tolist(),
        entry_deleted=entries.deleted.tolist(),
        home_keys=homes.keys.tolist(),
        home_subs=homes.subs.tolist(),
        home_deleted=homes.deleted.tolist(),
        home_firsts=homes.firsts.tolist(),
        home_nexts=homes.nexts.tolist(),
        home_blind=homes.blind.tolist(),
    )


def of_message(m: pb.Summaries) -> tuple[Entries, Homes]:
    return (
        Entries(
            np.array(m.entry_keys, dtype=U64),
            np.array(m.entry_subs, dtype=U64),
            np.array(m.entry_versions, dtype=U64),
            np.array(m.entry_deleted, dtype=bool),
        ),
        Homes(
            np.array(m.home_keys, dtype=U64),
            np.array(m.home_subs, dtype=U64),
            np.array(m.home_deleted, dtype=bool),
            np.array(m.home_firsts, dtype=U64),
            np.array(m.home_nexts, dtype=U64),
            np.array(m.home_blind, dtype=bool),
        ),
    )


def problem(m: pb.Summaries) -> str | None:
    """Why a replica's summaries cannot be compared (columns of unequal lengths)."""
    e = {len(m.entry_keys), len(m.entry_subs), len(m.entry_versions), len(m.entry_deleted)}
    h = {len(m.home_keys), len(m.home_subs), len(m.home_deleted), len(m.home_firsts)}
    if len(e) > 1 or len(h | {len(m.home_nexts), len(m.home_blind)}) > 1:
        return "summaries in columns of unequal lengths"
    return None


@dataclass
class Plan:
    """What reconciling a range with one replica takes, from both sides' summaries."""

    send_entries: list[tuple[int, int]]  # (key, subscription): mine, the replica lacks
    want_entries: list[tuple[int, int]]  # the replica's, which I lack
    send_homes: list[tuple[int, int | None]]  # (subscription, its next there; None: whole)
    want_homes: list[int]

    def with_wanted(self, again: Plan) -> Plan:
        """This plan and what `again` (made once the records wanted were merged) sends of
        those records: the replica may lack something of them still."""
        entries, homes = set(self.want_entries), set(self.want_homes)
        return Plan(
            self.send_entries + [k for k in again.send_entries if k in entries],
            [],
            self.send_homes + [h for h in again.send_homes if h[0] in homes],
            [],
        )


def plan(
    mine: tuple[Entries, Homes],
    theirs: tuple[Entries, Homes],
    settled: dict[int, tuple[int, int]] | None = None,
) -> Plan:
    """Compare my summaries with a replica's (both of the buckets that differ); `settled`:
    the (first, next) of my mailboxes with copies on their way to the replicas, without
    what is on its way (the others as mine)."""
    out = Plan([], [], [], [])
    m, t = mine[0].ranks(), theirs[0].ranks()
    out.send_entries = [k for k, rank in m.items() if k not in t or t[k] < rank]
    out.want_entries = [k for k, rank in t.items() if k not in m or m[k] < rank]
    mh, th = mine[1].states(), theirs[1].states()
    settled = settled or {}
    for sub, state in mh.items():
        now = settled.get(sub)
        sure = state if now is None else (state[0], min(now[0], state[1]), now[1], state[3])
        send = needs(th.get(sub), state, sure)
        if send is not False:
            out.send_homes.append((sub, send))
    out.want_homes = [sub for sub, state in th.items() if sub not in mh or lacks(mh[sub], state)]
    return out


def lacks(a: State, b: State) -> bool:
    """Whether a copy whose summary is `a` lacks anything of one whose summary is `b`."""
    if a[0]:
        return False  # a tombstone beats every record
    return b[0] or b[1] > a[1] or b[2] > a[2] or (a[3] and not b[3])


def needs(theirs: State | None, mine: State, settled: State | None = None) -> int | None | bool:
    """What a copy summarized `theirs` needs of mine: None my whole record (or my
    tombstone), a number: my alerts from it and my acknowledgement, False nothing I can
    send (it lacks nothing of mine but what is on its way to it (`settled`: mine without
    that), or it holds something I lack: I ask for that first)."""
    if theirs is None:
        return None
    if not lacks(theirs, mine if settled is None else settled) or lacks(mine, theirs):
        return False
    if mine[0] or theirs[3] or theirs[2] < mine[1]:
        # a tombstone; or it lacks what was acknowledged, whose documents a copy must know
        # seen (a batch announced again must not alert it twice): the whole record's
        # memory of them comes with it
        return None
    return theirs[2]
