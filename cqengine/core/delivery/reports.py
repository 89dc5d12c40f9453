"""The DN's reports: what the QNs a batch of mine reached report back, turned into alerts
for their homes (paper section 5; the DN's second half, after the announcement and the
QNs: cqengine.core.dn.dn publishes and announces).

A live DN holds a batch's alerts until every node the batch reached has reported: the
batch's share, divided down its announcement tree, comes back whole. A report missing
when the hold ends (a QN failed) makes the DN announce the batch again: the failed node's
queries are on its replicas, and homes take each alert once. Then, or at once with no
hold (the paper's protocol), the alerts go to their homes, one alert batch per home node
(cqengine.core.delivery.delivery).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from cqengine.core.basis import limits
from cqengine.core.delivery.delivery import Alerts, Delivery
from cqengine.core.frame.context import Context
from cqengine.core.frame.documents import Documents
from cqengine.core.frame.handoffs import Announcing, Releasing
from cqengine.core.resolution import matches
from cqengine.core.resolution.runs import Announced
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.delivery.reports")


@dataclass
class Gathering:
    """A batch of mine whose reports are still coming: the share of the batch they brought
    back (all of it: every node the batch reached has reported), and their alerts so far;
    the batch as announced, and how many times it was announced again."""

    batch: list[Announced]
    again: int = 0
    got: int = 0
    alerts: Alerts = field(default_factory=dict)


class Reports:
    def __init__(
        self,
        ctx: Context,
        documents: Documents,
        announcer: Announcing,
        dn: Releasing,
        hold: float,
    ) -> None:
        """`hold`: seconds at most I hold the matches reported for a batch of mine while
        reports are still to come, and try a home I cannot reach (0: each report's alerts
        at once, the paper's protocol). `dn`: told when a batch of mine is through."""
        self.ctx, self.documents, self.announcer = ctx, documents, announcer
        self.delivery = Delivery(ctx, hold, dn)
        self.gathering: dict[int, Gathering] = {}  # my batches whose reports are still coming

    @property
    def hold(self) -> float:
        return self.delivery.hold

    @hold.setter
    def hold(self, seconds: float) -> None:
        self.delivery.hold = seconds

    def expect(self, name: int, batch: list[Announced], again: int = 0) -> None:
        """My batch `name` goes out now: its reports are counted, for the hold at most."""
        self.gathering[name] = Gathering(batch, again)
        self.ctx.host.later(self.hold, lambda: self._hold_over(name))

    def _hold_over(self, name: int) -> None:
        """The hold of my batch is over. If reports are missing (a node it reached failed
        before it reported), replicated, I announce it again: the queries of the failed
        node are on its replicas, and homes take each alert once. Else, or after
        ANNOUNCE_AGAIN times (nodes failing one after another under it), I deliver what
        came, and count its documents as delivered with reports missing."""
        ctx = self.ctx
        g = self.gathering.get(name)
        if g is None:
            return
        if g.got >= limits.WHOLE or g.again >= limits.ANNOUNCE_AGAIN or not ctx.replicated:
            if g.got < limits.WHOLE and ctx.replicated:
                ctx.count("dropped:reports_missing", len(g.batch))
            self._deliver_gathered(name)
            return
        del self.gathering[name]
        if g.alerts:
            ctx.host.spawn(self.delivery.deliver(g.alerts))
        ctx.count("batches_announced_again")
        log.warning(
            "batch %016x: reports missing after %.0fs; announcing it again", name, self.hold
        )
        self.expect(name, g.batch, again=g.again + 1)
        ctx.host.spawn(self.announcer.announce(ctx.me, g.batch, 0, name, limits.WHOLE))

    def on_matched(self, req: pb.MatchedRequest) -> pb.Ack:
        """Alerts for the matches a QN reports: at once, or, for a batch of mine whose
        reports I count, when every node it reached has reported."""
        ctx = self.ctx
        docs = [self.documents.get(key) for key in req.doc_keys]
        by_home: Alerts = {}
        lost = 0
        for d, home, subs in matches.runs(req):
            doc = docs[d]
            if doc is None:
                lost += len(subs)  # no longer held here: nothing to alert with
                continue
            per_doc = by_home.setdefault(home, {})
            per_doc.setdefault(doc.key, (doc, []))[1].extend(subs)
        if lost:
            ctx.count("dropped:document_gone", lost)
        gathering = self.gathering.get(req.batch) if req.share else None
        if gathering is None:  # not counted, or given up on: at once
            if by_home:
                ctx.host.spawn(self.delivery.deliver(by_home))
            return pb.Ack()
        for home, per_doc in by_home.items():
            waiting = gathering.alerts.setdefault(home, {})
            for key, (doc, subs) in per_doc.items():
                waiting.setdefault(key, (doc, []))[1].extend(subs)
        gathering.got += req.share
        if gathering.got >= limits.WHOLE:
            self._deliver_gathered(req.batch)
        return pb.Ack()

    def _deliver_gathered(self, batch: int, through: bool = True) -> None:
        """Every report of a batch is in, or the hold is over (a QN failed or is slow):
        deliver what was gathered; reports that come later are delivered as they come.
        Not `through` (I am stopping): the copies stay, for my successor to finish it."""
        gathering = self.gathering.pop(batch, None)
        if gathering is not None:
            mine = batch if through else None
            self.ctx.host.spawn(self.delivery.deliver(gathering.alerts, mine))

    def flush(self) -> None:
        """Deliver at once what is held (the node stops): no report's matches stay behind,
        and alerts waiting to be tried again get one last try."""
        for batch in list(self.gathering):
            self._deliver_gathered(batch, through=False)
        self.delivery.flush()

    def in_flight(self) -> int:
        """My batches not through yet: their reports still coming, or their alerts still
        going to homes (retries waiting included)."""
        return len(self.gathering.keys() | self.delivery.unsent.keys()) + self.delivery.waiting()
