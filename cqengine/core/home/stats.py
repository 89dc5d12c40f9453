"""What a node reports of itself (Engine's Stats): its counters, what it holds, the work it
has in flight, and a digest of its state that a call changing nothing leaves as it was."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TypedDict

import mmh3

from chord.protocol.ledger import Ledger
from cqengine.core.alerts.copies import numbers
from cqengine.core.frame.context import Context
from cqengine.core.home.homes import HomeLogs
from cqengine.core.terms.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb

# Why alerts are lost, counted apart (Stats.dropped_by): nothing is lost silently.
DROP_REASONS = {
    "document_gone": "the DN no longer held the document (evicted from its cache)",
    "dn_failed": "a QN could not resolve with the DN or report to it (unreachable, bad answer)",
    "home_unreachable": "the DN could not reach the subscriber's home node",
    "home_in_minority": "the subscriber's home held the alerts for want of a majority of "
    "its log's members for longer than the DN keeps them (limits.HELD_FOR)",
    "home_full": "the subscriber's home refused the alerts, its data directory full, for "
    "longer than the DN keeps them (limits.HELD_FOR)",
    "mailbox_full": "a subscriber's mailbox overflowed and dropped its oldest alert",
    "reports_missing": "documents (not alerts) of a batch delivered without the reports of "
    "nodes that failed under each of its announcements: their alerts are lost",
}

# seconds: the upper bounds of the publish-to-alert latency buckets (Prometheus' defaults,
# stretched to a minute: a home unreachable for a while delivers late, not never)
LATENCY_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Histogram:
    """Observations counted in buckets (pb.Histogram): counts[i] is of values at most
    bounds[i] and above the bound before; the last, of values above every bound."""

    def __init__(self, bounds: Sequence[float] = LATENCY_BOUNDS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += times
        self.sum += value * times

    def to_pb(self) -> pb.Histogram:
        return pb.Histogram(bounds=self.bounds, counts=self.counts, sum=self.sum)


class LogStats(TypedDict, total=False):
    """What the home keys' logs here come to: Stats' fields, none without logs."""

    logs_led: int
    logs_in_minority: int
    log_entries: int


class Stats:
    def __init__(
        self,
        ctx: Context,
        synopsis: Synopsis,
        copies: Callable[[], int],
        in_flight: Callable[[], int],
        latency: Histogram,
        logs: HomeLogs | None = None,
    ) -> None:
        """`copies()`: copies of my range the last reconciliation found whole (Replication);
        `in_flight()`: my batches not through yet (DN); `latency`: publish to alert, as
        the home measures it (Home); `logs`: the home keys' logs (Settings.home_log)."""
        self.ctx, self.synopsis, self.copies, self.in_flight = ctx, synopsis, copies, in_flight
        self.latency, self.logs = latency, logs

    def reply(self, ledger: Ledger, digests: bool = True) -> pb.StatsReply:
        """The node's Stats; without `digests`, no state or synopsis digest (each reads
        everything the node holds)."""
        ctx = self.ctx
        c = ctx.counters
        dropped = {why: c[f"dropped:{why}"] for why in DROP_REASONS if c[f"dropped:{why}"]}
        full, replica_homes, waiting = self._homes()
        if full:
            dropped["mailbox_full"] = full
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
            header_bytes=c["presence_bytes"],
            announcements_filtered=c["announcements_filtered"],
            filter_waits=c["filter_waits"],
            matches=c["matches"],
            alerts_delivered=c["alerts_delivered"],
            alerts_dropped=sum(dropped.values()),
            alerts_repeated=c["alerts_repeated"],
            dropped_by=dropped,
            config=ctx.settings.to_pb(values=False),
            synopsis_size=len(self.synopsis.entries),
            synopsis_digest=self.synopsis.digest() if digests else 0,
            reindexed=c["reindexed"],
            alerts_retried=c["alerts_retried"],
            primary_entries=primary,
            replica_entries=len(index) - primary,
            repairs=c["repairs"],
            copies=self.copies() if ctx.replicated else 1,
            replica_homes=replica_homes,
            alerts_waiting=waiting,
            held_documents=ctx.store.held_documents,
            held_batches=len(ctx.store.batches.held),
            messages_refused=ctx.chord.refused + c["messages_refused"],
            state_digest=self.state_digest() if digests else 0,
            batches_in_flight=self.in_flight(),
            alert_latency=self.latency.to_pb(),
            alerts_held=c["alerts_held"],
            documents_sent_again=c["documents_sent_again"],
            documents_unkept=c["documents_unkept"],
            storage_full=ctx.storage_full(),
            # (beside the gate's: calls refused before any handler ran, the node's data
            # directory full; cqengine.core.node.EngineNode.writable)
            calls_refused={"storage_full": c["refused:storage_full"]}
            if c["refused:storage_full"]
            else {},
            **self._logs(),
        )

    def _logs(self) -> LogStats:
        """What the home keys' logs here come to (Settings.home_log)."""
        logs = self.logs
        if logs is None:
            return {}
        led = [k for k, leader in logs.leaders.items() if leader.leading]
        return {
            "logs_led": len(led),
            "logs_in_minority": sum(map(logs.in_minority, led)),
            "log_entries": sum(log.last for log in logs.logs.values()),
        }

    def _homes(self) -> tuple[int, int, int]:
        """In one pass over the subscriptions held here (Stats is scraped every few
        seconds, and a node may hold many): alerts their mailboxes dropped as full, those
        held as a replica of another home, and the alerts waiting in those served here."""
        ctx = self.ctx
        serves = ctx.serving()
        full = replicas = waiting = 0
        for s in ctx.subscriptions.values():
            full += s.box.dropped  # not s.mailbox: a replica's copies stay kept
            if s.key and not serves(s.key):
                replicas += 1
            else:
                first, _, nxt = s.span()  # not folding a home's table either
                waiting += nxt - first
        return full, replicas, waiting

    def state_digest(self) -> int:
        """A fingerprint of what this node holds, not of when: its index and home records
        as reconciliation digests them, its subscriptions' mailboxes, the batches it holds
        and its neighbours. A call that changes nothing leaves it as it was."""
        ctx = self.ctx
        t = ctx.chord.table
        whole = ctx.store.reconciliation.digests(ctx.me.id, ctx.me.id)  # lo == hi: the whole circle
        subs = list(ctx.subscriptions.values())
        firsts, nexts, _ = numbers(subs, ctx.store.intake.copied)  # not folding a replica's copies
        boxes = sorted(zip((s.id for s in subs), firsts.tolist(), nexts.tolist()))
        held = sorted(ctx.store.batches.held)
        parts = (whole, boxes, held, len(ctx.index), t.predecessor, t.successors)
        return mmh3.hash64(repr(parts).encode(), signed=False)[0]
