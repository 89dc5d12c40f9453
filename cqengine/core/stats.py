"""What a node reports of itself (Engine's Stats): its counters, what it holds, the work it
has in flight, and a digest of its state that a call changing nothing leaves as it was."""

from __future__ import annotations

from typing import Callable

import mmh3

from cqengine.core.context import Context
from cqengine.core.copies import numbers
from cqengine.core.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb

# Why alerts are lost, counted apart (Stats.dropped_by): nothing is lost silently.
DROP_REASONS = {
    "document_gone": "the DN no longer held the document (evicted from its cache)",
    "dn_failed": "a QN could not resolve with the DN or report to it (unreachable, bad answer)",
    "home_unreachable": "the DN could not reach the subscriber's home node",
    "mailbox_full": "a subscriber's mailbox overflowed and dropped its oldest alert",
    "reports_missing": "documents (not alerts) of a batch delivered without the reports of "
    "nodes that failed under each of its announcements: their alerts are lost",
}


class Stats:
    def __init__(
        self,
        ctx: Context,
        synopsis: Synopsis,
        copies: Callable[[], int],
        in_flight: Callable[[], int],
    ) -> None:
        """`copies()`: copies of my range the last reconciliation found whole (Replication);
        `in_flight()`: my batches not through yet (DN)."""
        self.ctx, self.synopsis, self.copies, self.in_flight = ctx, synopsis, copies, in_flight

    def reply(self, ledger) -> pb.StatsReply:
        ctx = self.ctx
        c = ctx.counters
        dropped = {why: c[f"dropped:{why}"] for why in DROP_REASONS if c[f"dropped:{why}"]}
        subs = ctx.subscriptions.values()
        full = sum(s.box.dropped for s in subs)  # not s.mailbox: a replica's copies stay kept
        if full:
            dropped["mailbox_full"] = full
        replica_homes = sum(1 for s in subs if s.key and not ctx.serves(s.key))
        region = ctx.region()
        index = ctx.index
        primary = (
            sum(len(index.get(k)) for k in index.keys_in(*region))
            if region is not None
            else len(index)
        )
        return pb.StatsReply(
            node=ctx.me.address,
            node_id=ctx.me.id,
            ledger=[
                pb.Count(kind=k, messages=v.messages, bytes=v.bytes)
                for k, v in ledger.snapshot().items()
            ],
            index_entries=len(index),
            subscriptions=len(ctx.subscriptions) - replica_homes,
            documents_published=c["documents_published"],
            candidates=c["candidates"],
            matches=c["matches"],
            alerts_delivered=c["alerts_delivered"],
            alerts_dropped=sum(dropped.values()),
            alerts_repeated=c["alerts_repeated"],
            dropped_by=dropped,
            config=ctx.settings.to_pb(values=False),
            synopsis_size=len(self.synopsis.entries),
            synopsis_digest=self.synopsis.digest(),
            reindexed=c["reindexed"],
            alerts_retried=c["alerts_retried"],
            primary_entries=primary,
            replica_entries=len(index) - primary,
            repairs=c["repairs"],
            copies=self.copies() if ctx.replicated else 1,
            replica_homes=replica_homes,
            alerts_waiting=sum(
                len(s.mailbox.queue) for s in subs if not s.key or ctx.serves(s.key)
            ),
            held_documents=ctx.store.held_documents,
            messages_refused=ctx.chord.refused + c["messages_refused"],
            state_digest=self.state_digest(),
            batches_in_flight=self.in_flight(),
        )

    def state_digest(self) -> int:
        """A fingerprint of what this node holds, not of when: its index and home records
        as reconciliation digests them, its subscriptions' mailboxes, the batches it holds
        and its neighbours. A call that changes nothing leaves it as it was."""
        ctx = self.ctx
        t = ctx.chord.table
        whole = ctx.store.digests(ctx.me.id, ctx.me.id)  # lo == hi: the whole circle
        subs = list(ctx.subscriptions.values())
        firsts, nexts, _ = numbers(subs, ctx.store.copied)  # not folding a replica's copies
        boxes = sorted(zip((s.id for s in subs), firsts.tolist(), nexts.tolist()))
        held = sorted(ctx.store.held)
        parts = (whole, boxes, held, len(ctx.index), t.predecessor, t.successors)
        return mmh3.hash64(repr(parts).encode(), signed=False)[0]
