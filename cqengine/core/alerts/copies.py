"""A replica's copies of mailboxes, kept as the columns they come in until someone looks.

A replica takes every alert its homes number and every acknowledgement of them: hundreds
a document, twice over at R = 3. Nearly all are acknowledged before anyone reads the
replica's copy of their mailbox: it is read only when the replica starts serving the
subscription, answers for its record, or is asked what it holds. So a replica does not put
each alert into a mailbox and take it out again. It keeps the copies as columns
(subscription, number, document) beside each subscription's first and next number as
arrays, and folds them into the mailboxes when the columns grow past limits.COPIES_KEPT
alerts, an eighth of the subscriptions at a time. Reconciliation's summaries and the state
digest read the numbers from the arrays (`numbers`).

A subscription is *tracked* here while its mailbox is plain (served elsewhere, waiting for
nothing numbered earlier, with no number acknowledged that it never held). Reading its
mailbox (Subscription.mailbox) takes its copies out of the columns into it, and stops the
tracking, since the reader may change it. A copy that does not simply join on (a gap, a
repeat, an acknowledgement ahead of its alerts) is merged the old way
(cqengine.core.state.records), its mailbox read first.

What a fold ends with is exactly what taking the copies one by one ends with: the same
mailboxes, the same memory of documents seen (tests/core/alerts/test_copies.py holds it to that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from cqengine.core.alerts.batches import batch_documents
from cqengine.core.alerts.mailboxes import AlertDoc, Runs, Subscription, cost
from cqengine.core.basis import arrays, limits
from cqengine.proto import cqengine_pb2 as pb

# subscriptions whose copies are taken out of the columns alone (an array pass each) before
# a reader's release folds everyone's (a pass in Python): a gap now and then costs little,
# a reconciliation that reads thousands of mailboxes one fold
FOLD_AFTER = 16
SLICES = 8  # a fold of the columns grown past limits.COPIES_KEPT takes this many steps
Rest = list[tuple[int, int, AlertDoc]]


class Copies:
    """Alerts and acknowledgements copied here, not yet in their mailboxes."""

    def __init__(self, subscriptions: Mapping[int, Subscription]) -> None:
        self.subscriptions = subscriptions
        # the subscriptions here as a sorted table (new ones join it when it is made again)
        self.ids = np.zeros(0, dtype=np.uint64)
        self.objs: list[Subscription] = []
        self.tracked = np.zeros(0, dtype=bool)
        self.first = np.zeros(0, dtype=np.int64)  # a tracked one's first, its copies counted
        self.next = np.zeros(0, dtype=np.int64)  # and its next
        self.missed = 0  # alerts of subscriptions not in the table since it was made
        self.cursor = 0  # the first row of the next slice to fold
        self.slices = 0
        self.removals = 0  # the subscriptions' removals when it was made
        self.folds = 0
        self._empty()

    def _empty(self) -> None:
        self.docs: list[AlertDoc] = []  # the documents alerted, by their place
        self.sizes: list[int] = []  # and what each weighs in a mailbox (cost)
        self.columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # row, seq, doc
        self.alerts = 0  # in the columns
        self.acked: list[np.ndarray] = []  # rows whose first moved on
        self.released = 0  # subscriptions whose copies were folded alone since

    # ---- taking copies ---------------------------------------------------------------

    def take_alerts(self, batch: pb.AlertBatch, serves: Callable[[int], bool]) -> tuple[Runs, Rest]:
        """A home's numbered copy: the alerts that join on a tracked subscription's copy
        are kept here, and come back as runs a document at a time (for the journal); the
        others come back as (subscription, number, document), to merge the old way."""
        ids = np.array(batch.subscription_ids, dtype=np.uint64)
        rows = self._tracked_rows(ids, serves)
        seqs = np.array(batch.seqs, dtype=np.int64)
        counts = np.array(batch.counts or [len(ids)], dtype=np.int64)
        docs = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        ok = self._joining(rows, seqs)
        titled = batch_documents(batch)
        runs = self._keep(titled, ids, rows, seqs, docs, counts, ok) if ok.any() else []
        rest = np.flatnonzero(~ok).tolist()
        if not rest:
            return runs, []
        subs, numbers = ids[rest].tolist(), seqs[rest].tolist()
        return runs, [(s, q, titled[d]) for s, q, d in zip(subs, numbers, docs[rest].tolist())]

    def take_acknowledged(
        self, acked: pb.Acknowledged
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """A home's copy of acknowledgements: those of tracked subscriptions that
        acknowledge only alerts held are kept. Returns the new firsts of those (for the
        journal) and the others, to acknowledge the old way: (subscription, first)."""
        ids = np.array(acked.subscription_ids, dtype=np.uint64)
        firsts = np.array(acked.firsts, dtype=np.int64)
        rows = self._tracked_rows(ids, None)
        ok = rows >= 0
        ok[ok] = firsts[ok] <= self.next[rows[ok]]
        kept = []
        if ok.any():
            where = rows[ok]
            before = self.first[where]
            np.maximum.at(self.first, where, firsts[ok])
            moved = self.first[where] > before
            self.acked.append(where[moved])
            now = self.first[where][moved].tolist()
            kept = list(dict(zip(ids[ok][moved].tolist(), now)).items())
        rest = np.flatnonzero(~ok)
        return kept, list(zip(ids[rest].tolist(), firsts[rest].tolist()))

    def _tracked_rows(self, ids: np.ndarray, serves: Callable[[int], bool] | None) -> np.ndarray:
        """Each subscription's row in the table if it is tracked (-1: not). With `serves`,
        those in the table whose mailbox is plain are tracked from now on."""
        rows = self._rows(ids)
        missed = int((rows < 0).sum())
        left = getattr(self.subscriptions, "removals", 0) - self.removals
        if serves is not None and max(self.missed + missed, left) > len(self.ids) // 4:
            self._make_table()  # so many came or left: make the table again
            rows = self._rows(ids)
        self.missed += int((rows < 0).sum())
        found = rows >= 0
        if serves is not None:
            self._track(np.unique(rows[found][~self.tracked[rows[found]]]).tolist(), serves)
        out = np.full(len(rows), -1, dtype=np.int64)
        out[found] = np.where(self.tracked[rows[found]], rows[found], -1)
        return out

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """Each subscription's row in the table (-1: not in it)."""
        return arrays.places(self.ids, ids)

    def _make_table(self) -> None:
        """The table of the subscriptions here as they are now (every copy folded first)."""
        self.fold()
        for sub in self.objs:
            if sub.copies is self:
                sub.copies, sub.at = None, -1
        subs = list(self.subscriptions.values())
        ids = np.fromiter((s.id for s in subs), dtype=np.uint64, count=len(subs))
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.objs = [subs[i] for i in order.tolist()]
        n = len(subs)
        self.tracked = np.zeros(n, dtype=bool)
        self.first = np.zeros(n, dtype=np.int64)
        self.next = np.zeros(n, dtype=np.int64)
        self.missed, self.cursor = 0, 0
        self.removals = getattr(self.subscriptions, "removals", 0)

    def _track(self, rows: list[int], serves: Callable[[int], bool]) -> None:
        """Track the subscriptions in these rows that are still the ones here and whose
        mailbox is plain: served elsewhere, waiting for nothing numbered earlier, with no
        number acknowledged that it never held, nothing of a home's in flight."""
        get, objs = self.subscriptions.get, self.objs
        plain = [r for r in rows if get(objs[r].id) is objs[r] and _plain(objs[r], serves)]
        if not plain:
            return
        boxes = [objs[r].box for r in plain]
        self.tracked[plain] = True
        self.first[plain] = [b.first for b in boxes]
        self.next[plain] = [b.first + len(b.queue) for b in boxes]
        for r in plain:
            objs[r].copies, objs[r].at = self, r

    def release(self, sub: Subscription) -> None:
        """Someone reads this subscription's mailbox, and may change it: its copies kept
        go into it, and it is tracked no more. Its own are taken out of the columns (an
        array pass); after FOLD_AFTER releases, everyone's are folded instead."""
        row = sub.at
        if self.released < FOLD_AFTER:
            self._fold_row(row)
            self.released += 1
        else:
            self.fold()
        self.tracked[row] = False
        sub.copies, sub.at = None, -1

    def _joining(self, rows: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Which alerts are kept here: those of tracked subscriptions whose alerts in the
        copy are numbered on from its next, without a gap or a repeat."""
        ok = rows >= 0
        if not ok.any():
            return ok
        i = np.flatnonzero(ok)
        order = i[np.lexsort((seqs[i], rows[i]))]
        at = rows[order]
        group, rank = arrays.ranks(at)
        good = seqs[order] == self.next[at] + rank
        whole = np.ones(group[-1] + 1, dtype=bool)
        np.logical_and.at(whole, group, good)
        ok[order] = whole[group]
        return ok

    def _keep(
        self,
        titled: list[AlertDoc],
        ids: np.ndarray,
        rows: np.ndarray,
        seqs: np.ndarray,
        docs: np.ndarray,
        counts: np.ndarray,
        ok: np.ndarray,
    ) -> Runs:
        """The alerts that join on, into the columns; the journal's runs of them."""
        base = len(self.docs)
        self.docs.extend(titled)
        self.sizes.extend(map(cost, titled))
        self.columns.append((rows[ok], seqs[ok], docs[ok] + base))
        self.alerts += int(ok.sum())
        np.add.at(self.next, rows[ok], 1)
        runs: Runs = []
        ends = np.cumsum(counts).tolist()
        start = 0
        for d, end in enumerate(ends):
            took = ok[start:end]
            if took.any():
                subs, numbers = ids[start:end][took], seqs[start:end][took]
                runs.append((titled[d], subs.tolist(), numbers.tolist()))
            start = end
        if self.alerts >= limits.COPIES_KEPT:
            self._fold_slice()
        return runs

    # ---- folding ---------------------------------------------------------------------

    def fold(self) -> None:
        """Every copy kept here into its mailbox: its alerts join on, and those
        acknowledged leave (remembered as seen, as Mailbox.pop does). Subscriptions stay
        tracked: their mailboxes are as the table has them."""
        if not self.columns and not self.acked:
            return
        self._fold(lambda rows: np.ones(len(rows), dtype=bool))
        self._empty()
        self.folds += 1

    def _fold_slice(self) -> None:
        """The copies kept of the next SLICES-th of the table's rows into their mailboxes
        (round the table, a slice at a time): a fold holds the event loop for a slice's
        alerts, not for all of them (a node that stops answering for half a second looks
        gone to its neighbours)."""
        n = len(self.ids)
        lo = self.cursor
        hi = min(n, lo + -(-n // SLICES))
        self.cursor = hi % n if n else 0
        self._fold(lambda rows: (rows >= lo) & (rows < hi))
        if self.cursor == 0:  # round the table: the documents no copy kept names go
            self._compact()
        self.slices += 1

    def _fold_row(self, row: int) -> None:
        """One subscription's copies kept into its mailbox."""
        self._fold(lambda rows: rows == row)

    def _fold(self, chosen: Callable[[np.ndarray], np.ndarray]) -> None:
        """The copies kept of the rows `chosen` picks (a mask of an array of rows) into
        their mailboxes, and out of the columns: alerts by row and number, then the
        acknowledgements of rows with no alert kept."""
        if self.alerts:
            rows, seqs, which = self._columns()
            mine = chosen(rows)
            at = np.flatnonzero(mine)
            if len(at):
                order = at[np.lexsort((seqs[at], rows[at]))]
                self._apply(rows[order], which[order])
                self.alerts -= len(at)
                left = (rows[~mine], seqs[~mine], which[~mine])
                self.columns = [left] if self.alerts else []
        if self.acked:
            acked = np.unique(np.concatenate(self.acked))
            mine = chosen(acked)
            for row, first in zip(acked[mine].tolist(), self.first[acked[mine]].tolist()):
                self.objs[row].box.acknowledge(first)  # only alerts held: no unheld
            self.acked = [acked[~mine]]

    def _compact(self) -> None:
        if not self.alerts:
            self.docs, self.sizes, self.columns = [], [], []
            return
        rows, seqs, which = self._columns()
        used, which = np.unique(which, return_inverse=True)
        self.docs = [self.docs[i] for i in used.tolist()]
        self.sizes = [self.sizes[i] for i in used.tolist()]
        self.columns = [(rows, seqs, which.astype(np.int64))]

    def _columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The columns kept, as one chunk."""
        if len(self.columns) > 1:
            rows, seqs, docs = zip(*self.columns)
            self.columns = [(np.concatenate(rows), np.concatenate(seqs), np.concatenate(docs))]
        return self.columns[0]

    def _apply(self, rows: np.ndarray, which: np.ndarray) -> None:
        """Alerts kept (their rows and documents, by row and number) into the mailboxes,
        those each row's first says acknowledged leaving at once."""
        starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        ends = np.append(starts[1:], len(rows)).tolist()
        docs = np.empty(len(self.docs), dtype=object)
        docs[:] = self.docs
        docnos = np.array([d[0] for d in self.docs], dtype=object)
        alerted, named = docs[which].tolist(), docnos[which].tolist()
        weight = np.concatenate(([0], np.cumsum(np.array(self.sizes, dtype=np.int64)[which])))
        weight = weight.tolist()  # weight[j]: what the alerts before the jth weigh
        grouped = rows[starts]
        objs = self.objs
        firsts = self.first[grouped].tolist()
        for row, s, e, first in zip(grouped.tolist(), starts.tolist(), ends, firsts):
            # of the new alerts s .. e - 1, those before `kept` were acknowledged already
            box = objs[row].box
            kept = s + max(0, first - box.first - len(box.queue))
            if first > box.first:
                box.pop(min(first - box.first, len(box.queue)))
            if kept > s:
                box.passed(named[s:kept])
            if kept < e:
                box.queue.extend(alerted[kept:e])
                box.size += weight[e] - weight[kept]
                box.seen.update(named[kept:e])


def _plain(sub: Subscription, serves: Callable[[int], bool]) -> bool:
    box = sub.box
    if not sub.key or box.early or box.unheld or box.pending or box.told is not None:
        return False
    return not serves(sub.key)


def numbers(
    subs: list[Subscription], kept: Copies | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each subscription's first and next number and whether some acknowledged alerts'
    documents are not known seen (unheld), the copies `kept` for it counted but not
    folded, as reading its mailbox would. A tracked one's are read from the table."""
    n = len(subs)
    at = np.fromiter((s.at for s in subs), np.int64, n) if kept is not None else np.full(n, -1)
    tracked = at >= 0
    firsts, nexts = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    if kept is not None:
        firsts[tracked], nexts[tracked] = kept.first[at[tracked]], kept.next[at[tracked]]
    rest = np.flatnonzero(~tracked)
    boxes = [subs[i].box for i in rest.tolist()]
    firsts[rest] = [b.first for b in boxes]
    nexts[rest] = [b.first + len(b.queue) for b in boxes]
    for i in rest.tolist():  # a home's mailbox kept in its log's table
        table = subs[i].table
        if table is not None:
            firsts[i], nexts[i] = table.bounds(subs[i])
    blind = np.zeros(n, dtype=bool)  # a tracked one has none unheld
    blind[rest] = [bool(b.unheld) for b in boxes]
    return firsts, nexts, blind
