"""Numbers as a function of the log: the mailboxes a home key's log makes (docs/home-log.md).

Every member that holds the same entries derives the same mailboxes, alert numbers and all:
the entries are applied in the log's order with the home's own rules
(cqengine.core.alerts.mailboxes: a docno enters a mailbox once, past its limits the oldest alert
goes, counted as dropped; an acknowledgement moves a mailbox's first number on), and
nothing else decides a number, not arrival order, not dict order, not a clock. So a member
need not number anything as entries come: it derives the mailboxes when it must serve
them, from a checkpoint (what the entries up to a position made) and the entries after it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableMapping

import numpy as np

from cqengine.core.alerts.mailboxes import (
    Runs,
    Subscription,
    home_record,
    record_alerts,
    subscription_of,
)
from cqengine.core.basis import limits
from cqengine.core.homelog.rows import Rows
from cqengine.core.homelog.table import AlertTable
from cqengine.proto import cqengine_pb2 as pb


class Derived:
    """The subscriptions of a home key's log and their mailboxes, as its entries up to
    `position` make them."""

    def __init__(
        self,
        limit_bytes: int = limits.MAILBOX_BYTES,
        subscriptions: MutableMapping[int, Subscription] | None = None,
    ) -> None:
        """`subscriptions`: where the subscriptions go (a node's own, which every log it
        serves shares: an entry names only subscriptions of its own key)."""
        self.limit_bytes = limit_bytes  # a mailbox's bytes at most (Settings.mailbox_bytes)
        self.subscriptions = {} if subscriptions is None else subscriptions
        self.position = 0
        self.dropped = 0  # alerts the mailboxes' limits pushed out
        self.repeated = 0  # alerts of documents their mailboxes had already
        self.accepted = 0.0  # the last batch applied: when its DN accepted it (0: unknown)
        self.table = AlertTable(self.subscriptions, limit_bytes)  # the mailboxes, numbered
        self.rows = Rows()  # how the entries name the log's subscriptions (homelog.rows)

    def apply(self, position: int, entry: pb.LogEntry) -> Runs:
        """The entry at the next position, applied; the alerts it numbered."""
        if position != self.position + 1:
            raise ValueError(f"entry {position} applied after {self.position}")
        self.position = position
        kind = entry.kind
        if kind == pb.LOG_DELIVER:
            return self._deliver(pb.AlertBatch.FromString(entry.data))
        if kind == pb.LOG_ACKS:
            acked = pb.Acknowledged.FromString(entry.data)
            ids = self.rows.ids_of(acked.rows).tolist() if acked.rows else acked.subscription_ids
            self.table.acknowledge(ids, acked.firsts)
        elif kind == pb.LOG_SUBSCRIBE:
            record = pb.HomeRecord.FromString(entry.data)
            if record.subscription_id not in self.subscriptions:
                self.subscriptions[record.subscription_id] = subscription_of(record)
            self.rows.subscribed(record.subscription_id)
        elif kind == pb.LOG_UNSUBSCRIBE:
            sub_id = pb.HomeRecord.FromString(entry.data).subscription_id
            self.table.forget(sub_id)  # its mailbox goes with it: not folded
            self.subscriptions.pop(sub_id, None)
            self.rows.unsubscribed(sub_id)
        elif kind == pb.LOG_ROWS:
            self.rows.take()
        return []

    def _deliver(self, batch: pb.AlertBatch) -> Runs:
        """A DN's alert batch into the mailboxes by the home's own rule (offer_batch's,
        numbered in columns: cqengine.core.homelog.table); a subscription not (or no
        longer) subscribed at this point of the log takes none."""
        self.accepted = batch.accepted
        if batch.rows:
            ids = self.rows.ids_of(batch.rows)
        else:
            ids = np.array(batch.subscription_ids, dtype=np.uint64)
        offered = self.table.offer(batch, ids)
        self.dropped += offered.dropped
        self.repeated += offered.repeated
        return offered.runs

    def checkpoint(self, key: int | None = None) -> pb.LogCheckpoint:
        """What the entries so far made: each subscription's whole record (its waiting
        alerts, and its memory of the documents acknowledged lately); those of home key
        `key` only, where the mapping is a node's, shared by the logs it leads."""
        subs = self.subscriptions
        homes = [home_record(subs[s]) for s in sorted(subs) if key is None or subs[s].key == key]
        for record in homes:
            record.row = self.rows.row_of.get(record.subscription_id, 0)
        return pb.LogCheckpoint(position=self.position, homes=homes, next_row=self.rows.next)

    @classmethod
    def restore(
        cls,
        checkpoint: pb.LogCheckpoint,
        limit_bytes: int = limits.MAILBOX_BYTES,
        subscriptions: MutableMapping[int, Subscription] | None = None,
    ) -> Derived:
        """The mailboxes a checkpoint holds, to apply the entries after it to (into
        `subscriptions`, where given)."""
        derived = cls(limit_bytes, subscriptions)
        derived.position = checkpoint.position
        for record in checkpoint.homes:
            sub = subscription_of(record)
            box = sub.mailbox
            waiting = record_alerts(record)
            box.extend(waiting)
            box.seen.update(doc[0] for doc in waiting)
            box.acked = deque(record.seen, maxlen=limits.SEEN_KEPT)
            box.seen.update(record.seen)
            derived.subscriptions[sub.id] = sub
        derived.rows.restored(
            checkpoint.next_row, ((r.subscription_id, r.row) for r in checkpoint.homes)
        )
        return derived
