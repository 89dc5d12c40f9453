"""A home key's subscriptions by row: how its log names them in 1-3 bytes, not 8.

Every LOG_DELIVER entry of a key's log is kept by each of its members, so each alert's
8-byte subscription id went over the wire once to the leader and again to every other
member. Once the log has a LOG_ROWS entry (its leader appends one, on a ring whose every
node speaks protocol 4: feature "rows"), its subscriptions have rows: those of the key
then, 1, 2, ... in order of id; each one subscribed after, the next; a row is never taken
again, so an entry naming the row of a subscription gone names nobody, as its id would.
A row is derived from the entries like every number on the log (docs/home-log.md), and a
checkpoint carries each record's row and the next, so every member reads a row alike.

The leader names subscriptions by row only in entries it appends while no entry that
changes the rows (a subscription made or ended, LOG_ROWS) is appended but not yet
applied at its copy: the rows it looks up then are the rows the entry is applied with.
Rows stay inside the log: a row is what one log's entries made it, so a DN, a stream and
a client name subscriptions by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from cqengine.core.basis import arrays
from cqengine.proto import cqengine_pb2 as pb

# the entry kinds that change a log's rows
CHANGES_ROWS = frozenset({pb.LOG_SUBSCRIBE, pb.LOG_UNSUBSCRIBE, pb.LOG_ROWS})
SCANNED = 256  # entries past the applied ones a leader looks through for such kinds


class Rows:
    """The rows of one key's log's subscriptions, as its entries so far made them."""

    def __init__(self) -> None:
        self.row_of: dict[int, int] = {}  # each subscription of the log -> its row (0: none)
        self.next = 0  # the row the next subscription takes (0: rows not taken yet)
        self.ids = np.zeros(1, dtype=np.uint64)  # by row (0: nobody)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # ids, rows by id

    @property
    def taken(self) -> bool:
        """Has the log's LOG_ROWS entry been applied (its entries may name rows)?"""
        return self.next > 0

    def subscribed(self, sub_id: int, row: int = 0) -> None:
        """A subscription of the log: its row the next (or `row`, a checkpoint's)."""
        if sub_id in self.row_of:
            return
        if self.taken and not row:
            row, self.next = self.next, self.next + 1
        self.row_of[sub_id] = row
        if row:
            self._place(sub_id, row)

    def unsubscribed(self, sub_id: int) -> None:
        row = self.row_of.pop(sub_id, 0)
        if row:
            self.ids[row] = 0
            self._sorted = None

    def take(self) -> None:
        """LOG_ROWS: every subscription of the log a row, in order of id, from 1."""
        self.ids = np.zeros(len(self.row_of) + 1, dtype=np.uint64)
        self._sorted = None
        for row, sub_id in enumerate(sorted(self.row_of), 1):
            self.row_of[sub_id] = row
            self.ids[row] = sub_id
        self.next = len(self.row_of) + 1

    def restored(self, next_row: int, records: Iterable[tuple[int, int]]) -> None:
        """A checkpoint's rows: the next, and each (subscription, row)."""
        self.next = next_row
        for sub_id, row in records:
            self.subscribed(sub_id, row)

    def _place(self, sub_id: int, row: int) -> None:
        if row >= len(self.ids):  # grown by half again at least (amortized)
            grown = np.zeros(max(row + 1, len(self.ids) * 3 // 2), dtype=np.uint64)
            grown[: len(self.ids)] = self.ids
            self.ids = grown
        self.ids[row] = sub_id
        self._sorted = None

    # ---- reading and writing entries ----------------------------------------------------

    def ids_of(self, rows: Sequence[int]) -> np.ndarray:
        """The subscriptions these rows name (0: a row of nobody now, or never given)."""
        at = np.array(rows, dtype=np.int64)
        named = at < len(self.ids)
        return np.where(named, self.ids[np.where(named, at, 0)], 0).astype(np.uint64)

    def rows_of(self, ids: Sequence[int]) -> np.ndarray | None:
        """The rows of these subscriptions, or None if one has none (not of the log, or
        subscribed before LOG_ROWS was applied): the entry names them by id then."""
        if not self.taken:
            return None
        if self._sorted is None:
            rows = np.flatnonzero(self.ids[: self.next])
            order = np.argsort(self.ids[rows])
            self._sorted = (self.ids[rows][order], rows[order])
        known, rows = self._sorted
        if not len(known):
            return None
        at = arrays.places(known, np.array(ids, dtype=np.uint64))
        if (at < 0).any():
            return None
        found: np.ndarray = rows[at]
        return found
