"""The home: where a subscription's alerts enter its mailbox, numbered, and leave it only
when its subscriber acknowledges them (cqengine.core.mailboxes).

A DN's alert batch reaches the node that serves each subscription's home key. It puts each
(subscription, docno) in the mailbox once, numbering alerts 0, 1, 2, ... per subscription
with no gap. Replicated, new alerts are copied to the home's replicas before a stream may
show them, so that whichever replica serves next knows every number a subscriber may have
seen. A node that finds its predecessor gone takes the alerts of the home keys it now owns.
"""

from __future__ import annotations

from inspect import isgenerator
from typing import Callable, Sequence

from chord.node import Call, Op, PeerUnreachable
from chord.proto import chord_pb2 as chord_pb
from cqengine.core.checks import per_document
from cqengine.core.context import Context
from cqengine.core.mailboxes import AlertDoc, Subscription, numbered_batch
from cqengine.proto import cqengine_pb2 as pb

Copy = Callable[[pb.Records], Op]  # records to my replicas (Replication.copy)
Kept = list[tuple[int, int, AlertDoc]]  # (subscription, its alert's number, document)


class Home:
    def __init__(self, ctx: Context, copy: Copy) -> None:
        self.ctx, self.copy = ctx, copy
        self.alert_listeners: list[Callable[[list[int]], None]] = []  # told who was alerted
        self.acked: dict[int, int] = {}  # acknowledgements not yet copied: sub -> first
        self.copying_acks = False

    def on_deliver(self, batch: pb.AlertBatch) -> pb.DeliverReply | Op:
        ctx = self.ctx
        if batch.home_id and not ctx.serves(batch.home_id):
            if batch.owner and batch.home and ctx.chord.settled:
                return self._delivered_if_mine(batch)
            return pb.DeliverReply(moved=True)
        return self._delivered(batch)

    def acknowledge(self, acks: Sequence[tuple[Subscription, int]]) -> None:
        """Each subscriber has every alert of its subscription numbered below its next_seq:
        they leave the mailboxes, and the replicas' copies in one message to each (a
        client acknowledges many subscriptions at once)."""
        ctx = self.ctx
        for sub, next_seq in acks:
            box = sub.mailbox
            n = min(next_seq, box.shown) - box.first
            if n > 0:
                box.pop(n)
                if ctx.journal is not None:
                    ctx.journal.acknowledged(sub.id, box.first)
                if ctx.replicated:
                    self.acked[sub.id] = box.first
        if self.acked and not self.copying_acks:
            self.copying_acks = True
            ctx.host.spawn(self._copy_acknowledged())

    def _copy_acknowledged(self) -> Op:
        """Acknowledgements to my replicas, those gathered while the last copy went in the
        next: one message a round, as columns, however many clients acknowledge meanwhile.
        A replica that has not heard yet holds the alerts a little longer, no more: a
        client that comes back to it says what it has."""
        try:
            while self.acked:
                acked, self.acked = self.acked, {}
                copy = pb.Acknowledged(subscription_ids=list(acked), firsts=list(acked.values()))
                yield from self.copy(pb.Records(acknowledged=copy))
        finally:
            self.copying_acks = False

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
        subs = batch.subscription_ids
        n = len(batch.docnos)
        counts = per_document(batch.counts, len(subs))
        titles, snippets = batch.titles or [""] * n, batch.snippets or [""] * n
        start = 0
        subscriptions = ctx.subscriptions
        limit = ctx.settings.mailbox_bytes
        kept: Kept = []
        unknown = False  # a subscription whose record has not reached me yet
        for doc, c in zip(zip(batch.docnos, titles, snippets), counts):
            for sub_id in subs[start : start + c]:
                sub = subscriptions.get(sub_id)  # None: unsubscribed meanwhile, or not here yet
                if sub is not None:
                    if sub.mailbox.offer(doc, limit):
                        kept.append((sub_id, sub.mailbox.next - 1, doc))
                elif batch.home_id and sub_id not in ctx.store.gone:
                    unknown = True
            start += c
        # the DN tries the batch again later (those taken now it finds seen), while
        # reconciliation brings me the records of my region that I lack
        reply = pb.DeliverReply(moved=unknown)
        if kept and ctx.replicated:
            return self._shown_once_copied(kept, reply)
        self._alerted(kept)
        return reply

    def _shown_once_copied(self, kept: Kept, reply: pb.DeliverReply) -> Op:
        """New alerts go to the replicas of their homes first, and only then on a stream
        (and into the journal): whichever replica serves next knows every alert numbered.
        They go as a stream shows them, each document once: a copy costs what a Deliver
        did, not a whole alert per subscription."""
        ctx = self.ctx
        subs = {sub_id: ctx.subscriptions[sub_id] for sub_id, _, _ in kept}
        for sub_id, seq, _ in kept:
            subs[sub_id].mailbox.pending.add(seq)
        try:
            yield from self.copy(pb.Records(alerts=[numbered_batch(kept)]))
        finally:  # however it ends: alerts held back for good would block their streams
            for sub_id, seq, _ in kept:
                subs[sub_id].mailbox.pending.discard(seq)
            # not those unsubscribed or handed over meanwhile
            self._alerted([a for a in kept if ctx.subscriptions.get(a[0]) is subs[a[0]]])
        return reply

    def _alerted(self, kept: Kept) -> None:
        if not kept:
            return
        ctx = self.ctx
        if ctx.journal is not None:
            ctx.journal.alerted(kept)
        alerted = [sub_id for sub_id, _, _ in kept]
        ctx.count("alerts_delivered", len(alerted))
        for listener in self.alert_listeners:
            listener(alerted)
