"""Replication: every record a node owns copied to its next R-1 successors, and kept in
agreement with them (the records themselves, and how they merge: cqengine.core.state.records).

A change the owner makes (an entry placed, a subscription's record, alerts numbered, a
tombstone) is copied to its replica set before it is acknowledged or shown. A replica that
missed copies is brought up to date by reconciliation: the owner of a range sends digests
of its records by bucket, the replica answers with the summaries of its records where they
differ (cqengine.core.state.summaries), the owner asks for those records it lacks and sends back
what the replica lacks (of a mailbox, the alerts missing). Reconciliation runs on a timer
and at once when the node's region or replica set changes. Records no owner counts on this
node for any more are collected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import repeat

from chord.protocol.calls import Call, Fanout, Op, PeerUnreachable
from chord.protocol.routing import NodeRef
from cqengine.core.alerts.mailboxes import home_record
from cqengine.core.basis import limits
from cqengine.core.frame import checks
from cqengine.core.frame.context import Context
from cqengine.core.frame.documents import Documents
from cqengine.core.frame.handoffs import OwnBatches
from cqengine.core.state import summaries
from cqengine.core.state.ranges import in_range
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.home.replication")


class Replication:
    def __init__(
        self,
        ctx: Context,
        documents: Documents,
        dn: OwnBatches,
    ) -> None:
        """`dn`: the DN, whose batches not through yet keep their copies, and which takes
        over the batches of DNs whose key is mine now."""
        self.ctx, self.documents, self.dn = ctx, documents, dn
        self.confirmed: dict[tuple[int, int], float] = {}  # a range its owner reconciled: when
        self.in_sync: dict[NodeRef, bool] = {}  # replica -> did the last reconciliation agree
        self.replicas_were: list[NodeRef] = []  # my replica set when I last looked
        self.reconciling = False
        self.started = ctx.host.now()
        self.region_listeners: list[Callable[[], None]] = []  # told my region changed
        ctx.chord.region_listeners.append(self._region_changed)
        ctx.chord.successor_listeners.append(self._successors_changed)

    def copy(self, records: pb.Records) -> Op:
        """Records I changed, to every node of my replica set at once (a replica that does
        not answer is repaired by reconciliation); where each was copied. A replica that lacks
        alerts before those sent (or the subscription) is sent what it lacks."""
        ctx = self.ctx
        peers = ctx.replica_set()
        replies = yield Fanout(tuple(Call(peer, "Replicate", records) for peer in peers))
        done = []
        for peer, reply in zip(peers, replies):
            try:
                if isinstance(reply, PeerUnreachable):
                    raise reply
                for sub_id, since in zip(reply.behind, reply.since):
                    sub = ctx.subscriptions.get(sub_id)
                    if sub is not None:
                        whole = home_record(sub, since or None)
                        yield Call(peer, "Replicate", pb.Records(homes=[whole]))
                done.append(peer.address)
            except PeerUnreachable:
                self.in_sync[peer] = False
        return done

    def copies(self) -> int:
        """Copies of my range the last reconciliation found whole: mine and each replica's
        that agreed with it."""
        return 1 + sum(self.in_sync.get(p, False) for p in self.ctx.replica_set())

    # ---- at a replica --------------------------------------------------------------------

    def on_replicate(self, records: pb.Records) -> pb.ReplicateReply:
        ctx = self.ctx
        reply = pb.ReplicateReply()
        for r in records.entries:
            ctx.store.entries.put_entry(r.key, r.entry, ctx.store.ages.made(r))
        for h in records.homes:
            got = ctx.store.homes.put_home(h, ctx.serves(h.key))
            lacks_record = not h.deleted and h.subscription_id not in ctx.subscriptions
            if lacks_record and h.subscription_id not in ctx.store.homes.gone:
                reply.behind.append(h.subscription_id)
                reply.since.append(0)
            elif got is not True and got is not False:
                reply.behind.append(h.subscription_id)
                reply.since.append(got)
        for batch in records.alerts:
            for sub_id, since in ctx.store.intake.put_alerts(batch, ctx.serves):
                reply.behind.append(sub_id)
                reply.since.append(since)
        for sub_id in ctx.store.intake.put_acknowledged(records.acknowledged):
            reply.behind.append(sub_id)
            reply.since.append(0)
        region = ctx.region()
        for b in records.batches:
            if ctx.store.batches.hold(b):
                for d in b.documents:
                    self.documents.keep(d)
                if b.key != ctx.me.id and region is not None and in_range(b.key, *region):
                    ctx.host.spawn(self.dn.take_over())  # its DN has left me its key already
        return reply

    def on_reconcile(self, req: pb.ReconcileRequest) -> pb.ReconcileReply:
        ctx = self.ctx
        if req.want_homes or req.want_entry_keys:  # the second round: the records it lacks
            return pb.ReconcileReply(records=ctx.store.reconciliation.wanted(req))
        self.confirmed[(req.lo, req.hi)] = ctx.host.now()  # its owner counts on me for it
        # copies that came after the owner's request was made may be of batches it has not
        # counted yet: only those older than a few periods go
        before = ctx.store.now() - limits.STALE_AFTER * ctx.settings.reconcile_period
        stale = ctx.store.batches.release_stale(req.lo, req.hi, set(req.batches), before)
        ctx.count("stale_copies_released", stale)
        return ctx.store.reconciliation.differing(req)

    def on_repair(self, records: pb.Records) -> pb.Ack:
        self.ctx.count("repairs", self.ctx.store.merge(records, self.ctx.serves))
        return pb.Ack()

    def on_release(self, req: pb.ReleaseRequest) -> pb.Ack:
        self.ctx.store.batches.release(req.batch)
        return pb.Ack()

    # ---- at the owner --------------------------------------------------------------------

    def reconcile(self) -> Op:
        """Reconcile my range with each of my replicas: my digests, their summaries where
        they differ, their records I lack, mine they lack. Then collect what nobody counts
        on me for."""
        ctx = self.ctx
        self._collect()
        region = ctx.region()
        if not ctx.replicated or region is None or ctx.chord.table.alone() or self.reconciling:
            return
        self.reconciling = True
        try:
            yield from self._reconcile(*region)
        finally:
            self.reconciling = False

    def _reconcile(self, lo: int, hi: int) -> Op:
        ctx = self.ctx
        replicas = ctx.replica_set()
        for peer in replicas:
            try:
                self.in_sync[peer] = yield from self._with(peer, lo, hi)
            except PeerUnreachable:
                self.in_sync[peer] = False
        self.in_sync = {p: ok for p, ok in self.in_sync.items() if p in replicas}

    def _with(self, peer: NodeRef, lo: int, hi: int) -> Op:
        """Reconcile (lo, hi] with one replica; whether it answered as a replica should.
        Its summaries are compared with mine as my request was made of them: what I did
        since (alerts numbered, acknowledged) is on its way to it, not missing there, and
        under load that is most of what differs by the time it answers."""
        ctx = self.ctx
        summarized = ctx.store.reconciliation.summaries(lo, hi)
        settled = ctx.store.homes.settled()
        entries, homes = ctx.store.reconciliation.digests(lo, hi, summarized)
        request = pb.ReconcileRequest(
            lo=lo, hi=hi, entries=entries, homes=homes, batches=list(self.dn.own)
        )
        reply = yield Call(peer, "Reconcile", request)
        if not self._sound(peer, reply):
            return False
        if not (reply.entry_buckets or reply.home_buckets):
            return True
        # a replica of an earlier version sends its records in the buckets that differ
        changed = ctx.store.merge(reply.records, ctx.serves)
        plan = ctx.store.reconciliation.plan(request, reply, summarized, settled)
        wants = list(zip(plan.want_entries, repeat(None))) + [(None, h) for h in plan.want_homes]
        for at in range(0, len(wants), limits.MAX_BATCH_QUERIES):
            ask = pb.ReconcileRequest(lo=lo, hi=hi)
            for entry, home in wants[at : at + limits.MAX_BATCH_QUERIES]:
                if entry is not None:
                    ask.want_entry_keys.append(entry[0])
                    ask.want_entry_subs.append(entry[1])
                elif home is not None:  # (one of the two is named)
                    ask.want_homes.append(home)
            got = yield Call(peer, "Reconcile", ask)
            if not self._sound(peer, got):
                return False
            changed += ctx.store.merge(got.records, ctx.serves)
        if wants:  # what it lacks of mine of those, now that I hold what it had
            plan = plan.with_wanted(ctx.store.reconciliation.plan(request, reply))
        lacked = ctx.store.reconciliation.repairs(plan)
        if lacked.entries or lacked.homes:
            yield Call(peer, "Repair", lacked)
        ctx.count("repairs", changed + len(lacked.entries) + len(lacked.homes))
        return True

    def _sound(self, peer: NodeRef, reply: pb.ReconcileReply) -> bool:
        """A reply is checked as a request is: a refused one changes nothing."""
        why = checks.records_problem(self.ctx.settings, reply.records)
        why = why or summaries.problem(reply.summaries)
        if why is not None:
            self.ctx.count("messages_refused")
            log.warning("a Reconcile reply from %s refused: %s", peer.address, why)
        return why is None

    def _collect(self) -> None:
        """Collect old tombstones, and the records no owner has counted on me for lately
        (I am no longer among the R-1 successors of their owner)."""
        ctx = self.ctx
        ctx.store.expire()
        now = ctx.host.now()
        horizon = max(limits.GC_AFTER, 10 * ctx.settings.reconcile_period)
        self.confirmed = {r: t for r, t in self.confirmed.items() if now - t <= horizon}
        region = ctx.region()
        if region is None or ctx.chord.table.alone() or now - self.started < horizon:
            return
        ctx.count("collected", ctx.store.drop_outside([region, *self.confirmed]))

    def _region_changed(self, old: NodeRef | None, new: NodeRef | None) -> None:
        """My predecessor changed: my range with it."""
        ctx = self.ctx
        if not ctx.replicated:
            return
        if new is not None:  # my range is new: batches of DNs gone may be mine to finish,
            ctx.host.spawn(self.dn.take_over())  # and my replicas need to agree on it at once
            ctx.host.spawn(self.reconcile())
        for listener in self.region_listeners:
            listener()

    def _successors_changed(self) -> None:
        """My successors changed: if my replica set did, it reconciles with me at once (a
        replica back from a restart, or a new one, is brought up to date now)."""
        if not self.ctx.replicated:
            return
        replicas = self.ctx.replica_set()
        if replicas != self.replicas_were:
            self.replicas_were = replicas
            self.ctx.host.spawn(self.reconcile())
