"""The home: where a subscription's alerts enter its mailbox, numbered, and leave it only
when its subscriber acknowledges them (cqengine.core.alerts.mailboxes).

A DN's alert batch reaches the node that serves each subscription's home key. It puts each
(subscription, docno) in the mailbox once, numbering alerts 0, 1, 2, ... per subscription
with no gap. Replicated, new alerts are copied to the home's replicas before a stream may
show them, so that whichever replica serves next knows every number a subscriber may have
seen. A node that finds its predecessor gone takes the alerts of the home keys it now owns.

With the ring's home log on (Settings.home_log), a batch is appended to its home key's log
instead, and numbered once committed (cqengine.core.home.homes): nothing is copied per
alert, and a home without a majority of its log's members numbers nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from inspect import isgenerator

from chord.proto import chord_pb2 as chord_pb
from chord.protocol.calls import Call, Op, PeerUnreachable
from cqengine.core.alerts.batches import numbered_runs, offer_batch
from cqengine.core.alerts.mailboxes import Mailbox, Runs, Subscription
from cqengine.core.basis import limits
from cqengine.core.basis.errors import MINORITY, EngineError
from cqengine.core.frame.context import Context
from cqengine.core.frame.handoffs import Copier
from cqengine.core.home.homes import Held, HomeLogs, Moved
from cqengine.core.home.stats import Histogram
from cqengine.core.homelog.rows import Rows
from cqengine.proto import cqengine_pb2 as pb


class Home:
    def __init__(self, ctx: Context, replication: Copier, logs: HomeLogs | None = None) -> None:
        """`replication`: alerts and acknowledgements changed here, to my replicas; `logs`:
        the home keys' logs, on the home log (Settings.home_log; None: alerts numbered
        here and copied), which tell me what their committed entries number (`applied`)."""
        self.ctx, self.replication, self.logs = ctx, replication, logs
        self.latency = Histogram()  # s from each alert's document accepted to its mailbox
        self.alert_listeners: list[Callable[[list[int]], None]] = []  # told who was alerted

    def on_deliver(self, batch: pb.AlertBatch) -> pb.DeliverReply | Op:
        ctx = self.ctx
        if self.logs is not None and batch.home_id:
            return self._logged(batch)
        if batch.home_id and not ctx.serves(batch.home_id):
            if batch.owner and batch.home and ctx.chord.settled:
                return self._delivered_if_mine(batch)
            return pb.DeliverReply(moved=True)
        return self._delivered(batch)

    def _logged(self, batch: pb.AlertBatch) -> Op:
        """The batch appended to its home key's log as it came (DN hints aside; its
        subscriptions named by row where the log may: homelog.rows); its alerts numbered
        once it is committed (`applied`)."""
        assert self.logs is not None
        alerts = len(batch.subscription_ids)
        try:
            yield from self.logs.append(batch.home_id, lambda rows: [_deliver_entry(batch, rows)])
        except Moved:
            return pb.DeliverReply(moved=True)
        except Held:
            self.ctx.count("alerts_held", alerts)
            return pb.DeliverReply(held=True)
        return pb.DeliverReply()

    def applied(self, runs: Runs, fresh: bool, accepted: float) -> None:
        """A committed entry of a log numbered these alerts here (`fresh`: first here, not
        another leader's applied as I take its key over; `accepted`: when their DN
        accepted them, for the latency, which counts the wait for a majority too). The
        journal keeps the log, not the mailboxes it makes."""
        if fresh:
            if accepted:
                self._measured(accepted, runs)
            self._alerted(runs)

    def acknowledge(self, acks: Sequence[tuple[Subscription, int]]) -> Op | None:
        """Each subscriber has every alert of its subscription numbered below its next_seq:
        they leave the mailboxes, and the replicas' copies in one message to each (a
        client acknowledges many subscriptions at once). On the home log, an operation:
        they are appended to their keys' logs, and leave once committed; the subscriber
        is answered only then (an acknowledgement a failure could undo would show its
        alerts again), UNAVAILABLE if the log has no majority."""
        ctx = self.ctx
        if self.logs is not None:
            return self._acknowledged_by_log(acks)
        boxes, subs, firsts = [], [], []
        for sub, next_seq in acks:
            box = sub.mailbox
            n = min(next_seq, box.shown) - box.first
            if n > 0:
                if ctx.replicated and box.told is None:
                    box.told = box.first  # what the replicas know, until the copy is through
                box.pop(n)
                boxes.append(box)
                subs.append(sub.id)
                firsts.append(box.first)
                if ctx.journal is not None:
                    ctx.journal.acknowledged(sub.id, box.first)
        if subs and ctx.replicated:
            acked = pb.Acknowledged(subscription_ids=subs, firsts=firsts)
            ctx.store.homes.count_copies(subs)
            ctx.host.spawn(self._acknowledgements_copied(boxes, acked))
        return None

    def _acknowledged_by_log(self, acks: Sequence[tuple[Subscription, int]]) -> Op:
        assert self.logs is not None
        by_key: dict[int, pb.Acknowledged] = {}
        for sub, next_seq in acks:
            have, _, nxt = sub.span()
            first = min(next_seq, nxt)
            if first > have and sub.key:
                acked = by_key.setdefault(sub.key, pb.Acknowledged())
                acked.subscription_ids.append(sub.id)
                acked.firsts.append(first)
        for key, acked in sorted(by_key.items()):
            try:
                yield from self.logs.append(key, partial(_acks_entries, acked), limits.ACK_LINGER)
            except Held:
                raise EngineError("UNAVAILABLE", MINORITY) from None
            except Moved:
                raise EngineError(
                    "UNAVAILABLE", f"home key {key:016x} is served by another node now"
                ) from None

    def _acknowledgements_copied(self, boxes: list[Mailbox], acked: pb.Acknowledged) -> Op:
        """Acknowledgements to my replicas; until they are through, reconciliation does
        not count them missing there (Mailbox.settled)."""
        try:
            yield from self.replication.copy(pb.Records(acknowledged=acked))
        finally:  # on their way no more: a replica that missed them is repaired
            self.ctx.store.homes.count_copies(acked.subscription_ids, -1)
            for box, first in zip(boxes, acked.firsts):
                if box.told is not None:
                    box.told = None if max(box.told, first) >= box.first else max(box.told, first)

    def _delivered_if_mine(self, batch: pb.AlertBatch) -> Op:
        """The ring's lookup says the batch's home key is mine, and my predecessor says not.
        If its home is gone for sure (no longer my predecessor, and it refuses connections:
        a home only slow to answer still numbers its alerts, and two numberings would
        clash), the key is mine: my predecessor went with it, and I hold the copies of its
        subscriptions. A live predecessor other than the home (one that joined between
        us) owns the key: taking the alerts here would hide them where no stream looks."""
        ctx = self.ctx
        pred = ctx.chord.table.predecessor
        if pred is not None and pred.address == batch.home:
            # it notified me (back from a restart, say) and serves the key; a refusal may be
            # my channel to it still backing off. Gone, my table drops it soon: the DN retries
            return pb.DeliverReply(moved=True)
        others = [] if pred is None else [pred.address]
        for address in [batch.home, *others]:
            try:
                yield Call(ctx.peer(address), "Ping", chord_pb.Empty())
                return pb.DeliverReply(moved=True)
            except PeerUnreachable as e:
                if not e.refused:
                    return pb.DeliverReply(moved=True)
        if ctx.chord.table.predecessor != pred:
            # a node came before me while I asked (the home back from a restart, say): it
            # may number the alerts now, with the records I handed it; two numberings clash
            return pb.DeliverReply(moved=True)
        reply = self._delivered(batch)
        if isgenerator(reply):
            reply = yield from reply
        return reply

    def _delivered(self, batch: pb.AlertBatch) -> pb.DeliverReply | Op:
        """The batch's alerts into the mailboxes of the subscriptions I serve."""
        ctx = self.ctx
        runs, repeated, _, missing = offer_batch(
            batch, ctx.subscriptions, ctx.settings.mailbox_bytes
        )
        # a subscription missing was unsubscribed meanwhile, or its record has not reached
        # me yet (unknown)
        gone = ctx.store.homes.gone
        unknown = bool(batch.home_id) and any(s not in gone for s in missing)
        if repeated:
            ctx.count("alerts_repeated", repeated)
        if batch.accepted and runs:
            self._measured(batch.accepted, runs)
        # the DN tries the batch again later (those taken now it finds seen), while
        # reconciliation brings me the records of my region that I lack
        reply = pb.DeliverReply(moved=unknown)
        if runs and ctx.replicated:
            return self._shown_once_copied(runs, reply)
        self._alerted(runs)
        return reply

    def _measured(self, accepted: float, runs: Runs) -> None:
        """The new alerts' latency: now less when the DN accepted their batch's first
        document (a clock behind the DN's reads as none)."""
        alerts = sum(len(took) for _, took, _ in runs)
        self.latency.observe(max(0.0, self.ctx.host.clock() - accepted), alerts)

    def _shown_once_copied(self, runs: Runs, reply: pb.DeliverReply) -> Op:
        """New alerts go to the replicas of their homes first, and only then on a stream
        (and into the journal): whichever replica serves next knows every alert numbered.
        They go as a stream shows them, each document once: a copy costs what a Deliver
        did, not a whole alert per subscription."""
        subscriptions, store = self.ctx.subscriptions, self.ctx.store
        subs: dict[int, Subscription] = {}
        for _, took, numbers in runs:
            for sub_id, seq in zip(took, numbers):
                sub = subs[sub_id] = subscriptions[sub_id]
                sub.mailbox.pending.add(seq)
        store.homes.count_copies(subs)
        try:
            yield from self.replication.copy(pb.Records(alerts=[numbered_runs(runs)]))
        finally:  # however it ends: alerts held back for good would block their streams
            for _, took, numbers in runs:
                for sub_id, seq in zip(took, numbers):
                    subs[sub_id].mailbox.pending.discard(seq)
            store.homes.count_copies(subs, -1)
            # not those unsubscribed or handed over meanwhile
            gone = {s for s, sub in subs.items() if subscriptions.get(s) is not sub}
            self._alerted(runs if not gone else _without(runs, gone))
        return reply

    def _alerted(self, runs: Runs) -> None:
        if not runs:
            return
        ctx = self.ctx
        if ctx.journal is not None and self.logs is None:
            ctx.journal.alerted_runs(runs)
        alerted = [sub_id for _, took, _ in runs for sub_id in took]
        ctx.count("alerts_delivered", len(alerted))
        for listener in self.alert_listeners:
            listener(alerted)


def _without(runs: Runs, gone: set[int]) -> Runs:
    """The runs' alerts but those of these subscriptions."""
    out = []
    for doc, took, numbers in runs:
        kept = [(s, q) for s, q in zip(took, numbers) if s not in gone]
        if kept:
            out.append((doc, [s for s, _ in kept], [q for _, q in kept]))
    return out


def _deliver_entry(batch: pb.AlertBatch, rows: Rows | None) -> pb.LogEntry:
    """A DN's batch as its log's entry: without the DN's hints (owner, home), its
    subscriptions by row if `rows` names every one (a subscription made since that entry
    waits to be applied: by id)."""
    named = rows.rows_of(batch.subscription_ids) if rows is not None else None
    if named is not None or batch.owner or batch.home:
        plain = pb.AlertBatch()
        plain.CopyFrom(batch)  # (the DN's own message: it may keep it, to try again)
        plain.ClearField("owner")
        plain.ClearField("home")
        if named is not None:
            plain.ClearField("subscription_ids")
            plain.rows.extend(named.tolist())
        batch = plain
    return pb.LogEntry(kind=pb.LOG_DELIVER, data=batch.SerializeToString())


def _acks_entries(acked: pb.Acknowledged, rows: Rows | None) -> list[pb.LogEntry]:
    """Acknowledgements as their log's entry (one, as the log composes entries), by row
    if `rows` names every one."""
    named = rows.rows_of(acked.subscription_ids) if rows is not None else None
    if named is not None:
        acked = pb.Acknowledged(rows=named.tolist(), firsts=acked.firsts)
    return [pb.LogEntry(kind=pb.LOG_ACKS, data=acked.SerializeToString())]
