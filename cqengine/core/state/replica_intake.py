"""A replica taking in what a home copies to it between records: the alerts the home
numbered, and the acknowledgements of them.

A home copies each alert it numbers, and each acknowledgement, to the replicas of the
subscription's record (cqengine.core.home.home): hundreds a document, twice over at R = 3.
Nearly every alert simply joins on a copy of its mailbox and is acknowledged before
anyone reads that copy, so those are kept as columns (cqengine.core.alerts.copies), told to
the journal a document at a time. The others (a gap, an early copy, one held already, a
subscription served here) are merged into their mailboxes in order of number. What a
copy lacks before them is told back, for the home to send from there.

The mailboxes are the home records' (cqengine.core.state.home_records); this part of the
record store (cqengine.core.state.records) takes the copies into them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cqengine.core.alerts.batches import numbered_batch, numbered_documents, runs_of
from cqengine.core.alerts.copies import Copies
from cqengine.core.alerts.mailboxes import AlertDoc, Runs, Subscription, Subscriptions, cost
from cqengine.core.state.home_records import HomeRecords
from cqengine.proto import cqengine_pb2 as pb


class ReplicaIntake:
    """Takes a home's copies into the mailboxes of `homes`. With replicas, and the
    subscriptions a dict that tells their departures (not the home log's), the copies
    that join on are kept as columns (`copied`) until a mailbox is read."""

    def __init__(self, homes: HomeRecords, replicas: int) -> None:
        self.homes = homes
        subscriptions = homes.subscriptions
        columns = replicas > 1 and isinstance(subscriptions, Subscriptions) and not homes.logged
        self.copied: Copies | None = Copies(subscriptions) if columns else None

    def put_alerts(
        self, batch: pb.AlertBatch, serves: Callable[[int], bool]
    ) -> list[tuple[int, int]]:
        """Merge alerts a home numbered (batches.numbered_batch) into the copies of their
        mailboxes (`serves(key)`: this node serves that home key, so its own numbering
        wins). Returns the subscriptions of which this copy lacks alerts before those,
        each with the number it lacks from (0: the record itself): send from there."""
        if self.copied is None:
            return self._merged(batch, serves)
        runs, rest = self.copied.take_alerts(batch, serves)
        journal = self.homes.journal
        if runs and journal is not None:
            journal.alerted_runs(runs)
        return self._merged(numbered_batch(rest), serves) if rest else []

    def _merged(self, batch: pb.AlertBatch, serves: Callable[[int], bool]) -> list[tuple[int, int]]:
        """put_alerts, a mailbox at a time: each alert that joins on is appended where it
        lands in one pass over the batch's columns; a subscription with an alert that
        does not has its alerts of the batch from there on merged in order of number
        (Mailbox.put)."""
        subscriptions, gone = self.homes.subscriptions, self.homes.gone
        behind: dict[int, int] = {}
        merged: dict[int, list[tuple[int, AlertDoc]]] = {}  # those that do not join on
        runs: Runs = []
        get = subscriptions.get
        for doc, subs, seqs in numbered_documents(batch):
            size = cost(doc)
            took: list[int] = []
            numbers: list[int] = []
            for sub_id, seq in zip(subs, seqs):
                if sub_id in merged:
                    merged[sub_id].append((seq, doc))
                    continue
                sub = get(sub_id)
                if sub is None:
                    if sub_id not in gone:
                        behind[sub_id] = 0
                    continue
                box = sub.mailbox
                if seq == box.first + len(box.queue) and not box.early:
                    box.join(doc, size)
                    took.append(sub_id)
                    numbers.append(seq)
                else:
                    merged[sub_id] = [(seq, doc)]
            if took:
                runs.append((doc, took, numbers))
        journal = self.homes.journal
        if runs and journal is not None:
            journal.alerted_runs(runs)
        for sub_id, alerts in merged.items():
            gap = self._merge_alerts(subscriptions[sub_id], alerts, serves)
            if gap is not None:
                behind[sub_id] = gap
        return list(behind.items())

    def _merge_alerts(
        self, sub: Subscription, alerts: list[tuple[int, AlertDoc]], serves: Callable[[int], bool]
    ) -> int | None:
        """A copy's alerts of one subscription into its mailbox, run by run in order of
        number; the number it lacks alerts from, if there is a gap before them."""
        box = sub.mailbox
        before = box.next
        alerts.sort(key=lambda a: a[0])
        gap = None
        for start, docs in runs_of(alerts):
            gap = box.put(start, docs, serves(sub.key))
            if gap is not None:
                break
        self.homes.journal_alerted(sub, before)
        return gap

    def put_acknowledged(self, acked: pb.Acknowledged) -> list[int]:
        """Acknowledgements a home copied: each subscription's alerts numbered below its
        first are acknowledged. Returns the subscriptions whose records this copy lacks."""
        journal = self.homes.journal
        rest: Iterable[tuple[int, int]]
        if self.copied is None:
            rest = zip(acked.subscription_ids, acked.firsts)
        else:
            kept, rest = self.copied.take_acknowledged(acked)
            if journal is not None:
                for sub_id, first in kept:
                    journal.acknowledged(sub_id, first)
        lacks = []
        for sub_id, first in rest:
            sub = self.homes.subscriptions.get(sub_id)
            if sub is None:
                if sub_id not in self.homes.gone:
                    lacks.append(sub_id)
            elif sub.mailbox.acknowledge(first) and journal is not None:
                journal.acknowledged(sub_id, sub.mailbox.first)
        return lacks
