"""A home key's mailboxes as columns: a batch numbered at once (docs/home-log.md).

The log's rule of numbering is `offer_batch`'s, alert by alert: a document a mailbox has
seen lately is a repeat, past a mailbox's limits its oldest alerts go, and every other
alert takes its mailbox's next number. Nearly always only the numbering happens: a
document is new to every mailbox it alerts, and no mailbox is near its limits. So the
mailboxes of the subscriptions a key's log serves are kept here as columns, a row a
subscription: its first and next number as arrays, and its alerts as (row, number,
document) columns appended a batch at a time. A batch is numbered with numpy, each row's
alerts counted on from its next; a document's repeats are found by looking its docno up
once (`held`: the rows and numbers of its alerts), not in a set per mailbox.

A row that might reach a limit in a batch leaves the table first and takes its alerts
the per-alert way: reading a mailbox (Subscription.mailbox) folds its row back into it,
exactly as offering its alerts one by one would have left it
(tests/core/homelog/test_homelog_table.py holds the two to each other); it joins the table again
at a later alert, once far from its limits. Streams, acknowledgements and checkpoints
read the columns without folding them (Subscription.span, .alerts, .remembered, and
`message` for a stream's alerts at once).

A mailbox's memory of documents seen is, on the log, exactly its alerts numbered from
`first - SEEN_KEPT` on (tests/core/homelog/test_homelog_derive.py): the columns keep alerts that
long, and let them go past it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np

from cqengine.core.alerts.batches import Offered, batch_documents
from cqengine.core.alerts.mailboxes import AlertDoc, Runs, Subscription, cost
from cqengine.core.basis import arrays, limits
from cqengine.proto import cqengine_pb2 as pb

GROW = 1024  # rows the arrays grow by
# a mailbox joins the table only this far from its limits (a row near them would leave
# again at once, folded)
JOIN_BELOW = 2
# the columns are swept once they hold this many memories' worth of alerts more than
# twice what the last sweep kept (amortized: a pass over them per as many alerts)
SWEEP_SLACK = 16
Column = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, numbers, documents (places)


class AlertTable:
    """The mailboxes of a key's log, as columns (the module's docstring)."""

    def __init__(self, subscriptions: Mapping[int, Subscription], limit_bytes: int) -> None:
        self.subscriptions = subscriptions
        self.limit_bytes = limit_bytes
        self.subs: list[Subscription | None] = []  # by row (None: it left the table)
        self.row_of: dict[int, int] = {}  # a tracked subscription's row
        self.ids = np.zeros(0, dtype=np.uint64)  # by row
        self.first = np.zeros(0, dtype=np.int64)
        self.next = np.zeros(0, dtype=np.int64)
        self.limit = np.zeros(0, dtype=np.int64)  # its mailbox's limit (Mailbox.limit)
        self.tracked = np.zeros(0, dtype=bool)
        self.heaviest = 0  # what the heaviest document numbered here weighs (cost)
        self.docs: list[AlertDoc] = []  # the documents alerted, by place, in order of number
        self.columns: deque[Column] = deque()  # a batch's alerts each
        self.alerts = 0  # in the columns
        self.kept = 0  # after the last sweep
        self.held: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # docno -> rows, numbers
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # tracked ids, rows
        self._by_row: Column | None = None  # the columns sorted by row and number

    # ---- rows ------------------------------------------------------------------------

    def track(self, sub: Subscription) -> bool:
        """The subscription's mailbox into a row, if plain (nothing of a replica's copying
        in it) and far from its limits; whether it is tracked."""
        if sub.table is self:
            return True
        box = sub.box
        if sub.table is not None or sub.copies is not None:
            return False
        if box.pending or box.unheld or box.early or box.told is not None:
            return False
        if len(box.queue) * JOIN_BELOW > box.limit or box.size * JOIN_BELOW > self.limit_bytes:
            return False
        row = len(self.subs)
        if row == len(self.first):
            self._grow()
        self.subs.append(sub)
        self.row_of[sub.id] = row
        self.ids[row], self.limit[row], self.tracked[row] = sub.id, box.limit, True
        self.first[row], self.next[row] = box.first, box.next
        acked, waiting = list(box.acked), list(box.queue)
        if acked or waiting:  # its memory and its waiting alerts, as a column of their own
            places = np.arange(len(self.docs), len(self.docs) + len(acked) + len(waiting))
            self.docs += [(d, "", "") for d in acked] + waiting
            numbers = np.arange(box.first - len(acked), box.next, dtype=np.int64)
            rows = np.full(len(places), row, dtype=np.int64)
            for at in range(len(places)):
                self.held.setdefault(self.docs[places[at]][0], []).append(
                    (rows[at : at + 1], numbers[at : at + 1])
                )
            self.heaviest = max([self.heaviest] + [cost(d) for d in waiting])
            self._append((rows, numbers, places))
        box.queue.clear()
        box.seen.clear()
        box.acked.clear()
        box.size = 0
        sub.table = self
        self._sorted = None
        return True

    def _grow(self) -> None:
        n = len(self.first) + GROW
        self.ids = np.resize(self.ids, n)
        self.first = np.resize(self.first, n)
        self.next = np.resize(self.next, n)
        self.limit = np.resize(self.limit, n)
        self.tracked = np.concatenate([self.tracked, np.zeros(GROW, dtype=bool)])

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Each subscription's row (-1: not tracked)."""
        if self._sorted is None:
            rows = np.fromiter(self.row_of.values(), dtype=np.int64, count=len(self.row_of))
            order = np.argsort(self.ids[rows])
            self._sorted = (self.ids[rows][order], rows[order])
        known, rows = self._sorted
        if not len(known):
            return np.full(len(ids), -1, dtype=np.int64)
        at = arrays.places(known, ids)
        return np.where(at >= 0, rows[at], -1)

    def release(self, sub: Subscription) -> None:
        """Someone reads this subscription's mailbox: its row is folded into it (as
        offering its alerts one by one would have left it), and leaves the table."""
        first, nxt = self.bounds(sub)
        numbered = self._of_row(self.row_of[sub.id], first - limits.SEEN_KEPT)
        self.forget(sub.id)
        box = sub.box
        box.first = first
        box.queue.extend(doc for seq, doc in numbered if seq >= first)
        if len(box.queue) != nxt - first:
            raise AssertionError(f"row of {sub.id} holds {len(box.queue)} of {first}..{nxt}")
        box.size = sum(map(cost, box.queue))
        box.acked.extend(doc[0] for seq, doc in numbered if seq < first)
        box.seen.update(doc[0] for _, doc in numbered)

    def forget(self, sub_id: int) -> None:
        """The subscription leaves the table (its row's columns are swept away later)."""
        row = self.row_of.pop(sub_id, None)
        if row is None:
            return
        sub = self.subs[row]
        self.tracked[row] = False
        self.subs[row] = None
        self._sorted = None
        if sub is not None:
            sub.table = None

    def _of_row(self, row: int, since: int) -> list[tuple[int, AlertDoc]]:
        """A row's alerts numbered from `since` on, in order of number."""
        rows, seqs, places = self._sorted_columns()
        lo, hi = np.searchsorted(rows, [row, row + 1])
        seqs, places = seqs[lo:hi], places[lo:hi]
        at = seqs >= since
        docs = self.docs
        return [(s, docs[p]) for s, p in zip(seqs[at].tolist(), places[at].tolist())]

    def _sorted_columns(self) -> Column:
        """Every alert in the columns, by row and number (made again once they change)."""
        if self._by_row is None:
            rows, seqs, places = _joined(self.columns)
            order = np.lexsort((seqs, rows))
            self._by_row = (rows[order], seqs[order], places[order])
        return self._by_row

    # ---- numbering -------------------------------------------------------------------

    def offer(self, batch: pb.AlertBatch, ids: np.ndarray | None = None) -> Offered:
        """A DN's alert batch into the mailboxes, numbered as `offer_batch` numbers it:
        the plain rows at once, the others alert by alert in their mailboxes. `ids`: its
        alerts' subscriptions, where the entry names them by row (homelog.rows)."""
        docs = batch_documents(batch)
        if ids is None:
            ids = np.array(batch.subscription_ids, dtype=np.uint64)
        counts = np.array(batch.counts or [len(ids)], dtype=np.int64)
        doc_of = np.repeat(np.arange(len(docs), dtype=np.int64), counts)
        rows = self._rows_joining(ids)
        if len({d[0] for d in docs}) != len(docs):  # a document twice: all alert by alert
            self._out(rows, rows >= 0)
        repeat = self._repeats(docs, rows, doc_of)
        heaviest = max([self.heaviest] + [cost(d) for d in docs])
        self._out(rows, np.isin(rows, self._near(rows[(rows >= 0) & ~repeat], heaviest)))
        repeat &= rows >= 0
        self.heaviest = heaviest
        seqs = np.full(len(ids), -1, dtype=np.int64)
        mine = np.flatnonzero((rows >= 0) & ~repeat)
        if len(mine):
            seqs[mine] = self._number(rows[mine])
            self._keep(docs, rows[mine], seqs[mine], doc_of[mine])
        repeated, dropped, missing = int(repeat.sum()), 0, []
        get = self.subscriptions.get
        for i in np.flatnonzero(rows < 0).tolist():  # out of the table: alert by alert
            sub = get(int(ids[i]))
            if sub is None:
                missing.append(int(ids[i]))
                continue
            box = sub.mailbox
            before = box.dropped
            if box.offer(docs[doc_of[i]], self.limit_bytes):
                seqs[i] = box.next - 1
                dropped += box.dropped - before
            else:
                repeated += 1
        return Offered(_runs(docs, ids, seqs, counts, doc_of), repeated, dropped, missing)

    def _rows_joining(self, ids: np.ndarray) -> np.ndarray:
        """Each alert's row, the subscriptions here not in the table taken in if they may."""
        rows = self.rows(ids)
        if (rows < 0).any():
            get = self.subscriptions.get
            joined = False
            for sub_id in np.unique(ids[rows < 0]).tolist():
                sub = get(sub_id)
                joined = (sub is not None and self.track(sub)) or joined
            if joined:
                rows = self.rows(ids)
        return rows

    def _out(self, rows: np.ndarray, leaving: np.ndarray) -> None:
        """These alerts' rows leave the table (folded into their mailboxes): -1 in `rows`."""
        if leaving.any():
            for row in np.unique(rows[leaving]).tolist():
                sub = self.subs[row]
                if sub is not None:
                    self.release(sub)
            rows[leaving] = -1

    def _repeats(self, docs: list[AlertDoc], rows: np.ndarray, doc_of: np.ndarray) -> np.ndarray:
        """Which tracked alerts are of a document their mailbox has seen: numbered in its
        row from first - SEEN_KEPT on, or named for it earlier in the batch."""
        repeat = np.zeros(len(rows), dtype=bool)
        for j, doc in enumerate(docs):
            before = self.held.get(doc[0])
            if before is None:
                continue
            held_rows = np.concatenate([r for r, _ in before])
            held_seqs = np.concatenate([s for _, s in before])
            live = self.tracked[held_rows] & (held_seqs >= self.first[held_rows] - limits.SEEN_KEPT)
            of_doc = doc_of == j
            repeat[of_doc] = np.isin(rows[of_doc], held_rows[live])
        tracked = np.flatnonzero(rows >= 0)
        if len(tracked):  # a subscription named twice for one document: the first takes it
            pairs = doc_of[tracked] * (len(self.subs) + 1) + rows[tracked]
            _, firsts = np.unique(pairs, return_index=True)
            if len(firsts) < len(tracked):
                again = np.ones(len(tracked), dtype=bool)
                again[firsts] = False
                repeat[tracked[again]] = True
        return repeat & (rows >= 0)

    def _near(self, rows: np.ndarray, heaviest: int) -> np.ndarray:
        """The rows whose alerts in the batch might push older ones out (counted as if
        every alert weighed the heaviest document's)."""
        if not len(rows):
            return rows
        took = np.bincount(rows, minlength=len(self.first))
        after = self.next - self.first + took
        near = (took > 0) & ((after > self.limit) | (after * heaviest > self.limit_bytes))
        return np.flatnonzero(near)

    def _number(self, rows: np.ndarray) -> np.ndarray:
        """The numbers of alerts of these rows, in order: each row's counted on from its
        next."""
        order = np.argsort(rows, kind="stable")
        ranked = rows[order]
        _, rank = arrays.ranks(ranked)
        seqs = np.empty(len(rows), dtype=np.int64)
        seqs[order] = self.next[ranked] + rank
        np.add.at(self.next, rows, 1)
        return seqs

    def _keep(
        self, docs: list[AlertDoc], rows: np.ndarray, seqs: np.ndarray, doc_of: np.ndarray
    ) -> None:
        """Numbered alerts into the columns, and their documents' holders remembered."""
        base = len(self.docs)
        self.docs += docs
        bounds = np.searchsorted(doc_of, np.arange(len(docs) + 1))
        for j, doc in enumerate(docs):
            lo, hi = bounds[j], bounds[j + 1]
            if hi > lo:
                self.held.setdefault(doc[0], []).append((rows[lo:hi], seqs[lo:hi]))
        self._append((rows, seqs, doc_of + base))

    def _append(self, column: Column) -> None:
        self.columns.append(column)
        self._by_row = None
        self.alerts += len(column[0])
        if self.alerts > 2 * self.kept + limits.SEEN_KEPT * SWEEP_SLACK:
            self._sweep()

    def _sweep(self) -> None:
        """Alerts neither waiting nor remembered seen (numbered before first -
        SEEN_KEPT), and those of rows gone, leave the columns, and their documents."""
        rows, seqs, places = _joined(self.columns)
        keep = self.tracked[rows] & (seqs >= self.first[rows] - limits.SEEN_KEPT)
        self._by_row = None
        if keep.sum() * 4 > len(keep) * 3:  # little to let go: kept, in one column
            self.columns = deque([(rows, seqs, places)])
            self.alerts = self.kept = len(rows)
            return
        rows, seqs, places = rows[keep], seqs[keep], places[keep]
        self.alerts = self.kept = len(rows)
        used, places = np.unique(places, return_inverse=True)
        docnos = {d[0] for d in self.docs}
        self.docs = [self.docs[p] for p in used.tolist()]
        for docno in docnos - {d[0] for d in self.docs}:  # every alert of it gone
            self.held.pop(docno, None)
        self.columns = deque([(rows, seqs, places)] if len(rows) else [])

    # ---- acknowledgements and readers --------------------------------------------------

    def acknowledge(self, ids: Sequence[int], firsts: Sequence[int]) -> None:
        """Every alert of each subscription numbered below its first is acknowledged (a
        number past its next: its mailbox's way, Mailbox.acknowledge)."""
        rows = self.rows(np.array(ids, dtype=np.uint64))
        wanted = np.array(firsts, dtype=np.int64)
        plain = rows >= 0
        plain[plain] = wanted[plain] <= self.next[rows[plain]]
        if plain.any():
            np.maximum.at(self.first, rows[plain], wanted[plain])
        get = self.subscriptions.get
        for i in np.flatnonzero(~plain).tolist():
            sub = get(ids[i])
            if sub is not None:
                sub.mailbox.acknowledge(firsts[i])

    def bounds(self, sub: Subscription) -> tuple[int, int]:
        """Its mailbox's first and next number."""
        row = self.row_of[sub.id]
        return self.first.item(row), self.next.item(row)  # (item: a Python int at once)

    def waiting(self, sub: Subscription, start: int, end: int) -> list[AlertDoc]:
        """Its alerts numbered start .. end - 1 still waiting."""
        first, _ = self.bounds(sub)
        numbered = self._of_row(self.row_of[sub.id], max(start, first))
        return [doc for seq, doc in numbered if seq < end]

    def remembered(self, sub: Subscription) -> list[str]:
        """The documents of its latest acknowledged alerts, oldest first."""
        first, _ = self.bounds(sub)
        numbered = self._of_row(self.row_of[sub.id], first - limits.SEEN_KEPT)
        return [doc[0] for seq, doc in numbered if seq < first]

    def message(self, waiting: Sequence[tuple[Subscription, int, int]]) -> pb.AlertBatch:
        """A stream's message of the alerts waiting ((subscription, first number, how
        many), each kept here): a mask over the newest columns, its documents in order of
        number (so each subscription's alerts are too), each once."""
        lo = np.zeros(len(self.first), dtype=np.int64)
        hi = np.zeros(len(self.first), dtype=np.int64)
        wanted = 0
        for sub, start, n in waiting:
            row = self.row_of[sub.id]
            lo[row], hi[row] = start, start + n
            wanted += n
        found: list[Column] = []
        for rows, seqs, places in reversed(self.columns):
            if wanted <= 0:
                break
            at = (seqs >= lo[rows]) & (seqs < hi[rows])
            if at.any():
                found.append((rows[at], seqs[at], places[at]))
                wanted -= int(at.sum())
        rows, seqs, places = _joined(found)
        order = np.argsort(places, kind="stable")
        rows, seqs, places = rows[order], seqs[order], places[order]
        used, counts = np.unique(places, return_counts=True)
        docs = [self.docs[p] for p in used.tolist()]
        batch = pb.AlertBatch(docnos=[d[0] for d in docs])
        if any(d[1] for d in docs):
            batch.titles.extend(d[1] for d in docs)
        if any(d[2] for d in docs):
            batch.snippets.extend(d[2] for d in docs)
        batch.subscription_ids.extend(self.ids[rows].tolist())
        batch.seqs.extend(seqs.tolist())
        if len(docs) > 1:
            batch.counts.extend(counts.tolist())
        return batch


def _joined(columns: Sequence[Column]) -> Column:
    if not columns:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    if len(columns) == 1:
        return columns[0]
    rows, seqs, docs = zip(*columns)
    return np.concatenate(rows), np.concatenate(seqs), np.concatenate(docs)


def _runs(
    docs: list[AlertDoc],
    ids: np.ndarray,
    seqs: np.ndarray,
    counts: np.ndarray,
    doc_of: np.ndarray,
) -> Runs:
    """The alerts numbered (seqs >= 0), a document at a time, in the batch's order."""
    taken = seqs >= 0
    took = np.bincount(doc_of[taken], minlength=len(docs))
    all_ids, numbers = ids.tolist(), seqs.tolist()
    runs: Runs = []
    lo = 0
    for doc, n, t in zip(docs, counts.tolist(), took.tolist()):
        if t and t == n:
            runs.append((doc, all_ids[lo : lo + n], numbers[lo : lo + n]))
        elif t:
            keep = [i for i in range(lo, lo + n) if numbers[i] >= 0]
            runs.append((doc, [all_ids[i] for i in keep], [numbers[i] for i in keep]))
        lo += n
    return runs
