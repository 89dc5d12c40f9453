"""The engine node: the protocol's roles on one ring node, behind one handler table.

`EngineNode` rides on a ChordNode. It holds the roles of the protocol, each in its own
module, over one Context (cqengine.core.frame.context): the documents it holds as a DN and answers
for, the placement of subscriptions, the DN of its batches, the announcer that passes
batches down the ring, the QN that resolves what stopped here, the home of its
subscriptions, replication, gossip, stats. A request of the Engine service is checked
(cqengine.core.frame.checks) and handed to its role; whatever needs more messages is an
operation (a generator of Calls) run by the shell that hosts the node: a live node
(cqengine.live.service) or the simulator (cqengine.evaluation.measuring.sim), which lend it a Host.

A document's path through these roles, step by step: docs/architecture.md (a test holds
it to the code).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chord.protocol import versions
from chord.protocol.calls import Op, Refused, StatusError
from chord.protocol.host import Host
from chord.protocol.ledger import Ledger
from chord.protocol.node import ChordNode
from chord.protocol.routing import NodeRef
from cqengine.core.alerts.mailboxes import Subscription
from cqengine.core.announcement.announcer import Announcer
from cqengine.core.announcement.filters import Filters
from cqengine.core.basis.errors import FULL, EngineError
from cqengine.core.delivery.reports import Reports
from cqengine.core.dn.dn import DN
from cqengine.core.frame import checks
from cqengine.core.frame.context import Context
from cqengine.core.frame.documents import Documents
from cqengine.core.frame.observer import Observer
from cqengine.core.home.departures import Departures
from cqengine.core.home.home import Home
from cqengine.core.home.homes import HomeLogs
from cqengine.core.home.replication import Replication
from cqengine.core.home.stats import Stats
from cqengine.core.placement.gossip import Gossip
from cqengine.core.placement.placement import Placement
from cqengine.core.qn.qn import QN
from cqengine.core.resolution.runs import Heard
from cqengine.core.state.journal import Journal
from cqengine.core.terms.settings import Settings
from cqengine.core.terms.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb

# the engine's methods that change what a node keeps (its journal): refused while it can
# keep nothing. The others (announcements, resolution, reports, reads, gossip) run on:
# what a report sets off reaches its homes by calls of these
WRITES = frozenset(
    {
        *("Index", "Unindex", "Deliver", "Replicate", "Repair", "Release"),
        *("LogPromise", "LogAppend", "LogLeave"),
    }
)

ENGINE_SERVICE = pb.DESCRIPTOR.services_by_name["Engine"]


class EngineNode:
    services = [ENGINE_SERVICE]
    # every attribute a node has: setting another (a role's, say) fails instead of doing nothing
    __slots__ = (
        "ctx", "chord", "settings", "index", "subscriptions", "store", "counters", "synopsis",
        "documents", "qn", "filters", "announcer", "dn", "reports", "replication", "logs",
        "departures", "home", "placement",
        "gossip", "statistics", "handlers", "ring",
    )  # fmt: skip

    def __init__(
        self,
        chord: ChordNode,
        settings: Settings,
        host: Host,
        hold: float = 0.0,
        observer: Observer | None = None,
        journal: Journal | None = None,
        gather: Callable[[EngineNode, Heard], None] | None = None,
        stamped: bool = False,
    ) -> None:
        """`hold`: seconds at most a DN holds the matches reported for a batch of its own
        while reports are still to come, and tries a home it cannot reach (0: each
        report's alerts at once, the paper's protocol). `journal`: told every change of
        what must outlive the process (cqengine.core.state.journal; None: nothing is kept).
        `gather`: where a shell that hosts many QNs (the simulator) collects what they
        heard, to resolve it together (cqengine.core.qn.qn.Resolution). `stamped`: my alert
        batches carry when their documents were accepted (Delivery.stamped: a live node's)."""
        ctx = self.ctx = Context(chord, settings, host, observer)
        self.chord, self.settings = chord, settings
        self.ring = 0  # the ring's id, which a live shell sets (EngineConfig.ring; 0: none)
        self.index, self.subscriptions = ctx.index, ctx.subscriptions
        self.store, self.counters = ctx.store, ctx.counters
        chord.store = ctx.store  # what the node holds follows key ownership
        chord.items_problem = lambda items: checks.items_problem(settings, items)
        s = settings
        self.synopsis = Synopsis(s.synopsis_k, s.synopsis_y, s.synopsis_hashes)
        self.documents = Documents(lambda: ctx.host.new_id(), settings)  # the host as it is now
        self.qn = QN(ctx, None if gather is None else (lambda h: gather(self, h)))
        self.filters = Filters(ctx)
        self.announcer = Announcer(ctx, self.qn, self.filters)
        self.dn = DN(ctx, self.documents, self.synopsis, self.announcer, hold)
        self.reports = Reports(ctx, self.documents, self.announcer, self.dn, hold)
        self.dn.reports = self.reports  # (they release the DN's copies: made after it)
        self.reports.delivery.stamped = stamped
        self.replication = Replication(ctx, self.documents, self.dn)
        # the home keys' logs (Settings.home_log), and the members leaving them: what their
        # committed entries number is the home's (made next: it appends to them)
        self.logs = (
            HomeLogs(ctx, lambda runs, fresh, accepted: self.home.applied(runs, fresh, accepted))
            if settings.home_log
            else None
        )
        self.departures = None if self.logs is None else Departures(self.logs)
        self.home = Home(ctx, self.replication, self.logs)
        self.placement = Placement(ctx, self.synopsis, self.replication, self.filters, self.logs)
        self.gossip = Gossip(ctx, self.synopsis, self.placement, self.replication)
        self.statistics = Stats(
            ctx,
            self.synopsis,
            self.replication.copies,
            self.reports.in_flight,
            self.home.latency,
            self.logs,
        )
        ctx.journal = journal
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "GetConfig": self._config,
            "Index": self.placement.on_index,
            "Unindex": self.placement.on_unindex,
            "Announce": self.announcer.on_announce,
            "GetBloom": self.documents.on_get_bloom,
            "TermDialogue": self.documents.on_term_dialogue,
            "Matched": self.reports.on_matched,
            "Deliver": self.home.on_deliver,
            "Gossip": self.gossip.on_gossip,
            "Replicate": self.replication.on_replicate,
            "Reconcile": self.replication.on_reconcile,
            "Repair": self.replication.on_repair,
            "Release": self.replication.on_release,
            "Uptime": self.dn.on_uptime,
        }
        logs, departures = self.logs, self.departures
        if logs is not None and departures is not None:
            self.handlers.update(
                LogPromise=logs.on_promise,
                LogAppend=logs.on_append,
                LogFetch=logs.on_fetch,
                LogLeave=departures.on_leave,
            )

    @property
    def me(self) -> NodeRef:
        return self.chord.me

    def handle(self, method: str, request: Any) -> Any:
        """A request's reply, or an operation whose result is the reply; one refused by
        the checks raises Refused, changes nothing, and is counted. One that would change
        what the node keeps, while its journal can keep nothing (`writable`), is refused
        before it changes anything."""
        handler = self.handlers.get(method)
        if handler is None:
            return self.chord.handle(method, request)
        why = checks.invalid(self.settings, method, request)
        if why is not None:
            self.ctx.count("messages_refused")
            raise Refused(f"{method}: {why}")
        if method in WRITES:
            self.writable()
        return handler(request)

    def writable(self) -> None:
        """EngineError RESOURCE_EXHAUSTED if my journal can keep nothing now (my data
        directory's disk is full, say): a call that would change what I keep is refused
        before it changes anything, not taken into memory and lost. The caller tries again
        (a DN holds its batch: cqengine.core.delivery.delivery), or another node."""
        why = self.ctx.storage_full()
        if why:
            self.ctx.count("refused:storage_full")
            raise EngineError("RESOURCE_EXHAUSTED", f"{FULL} on {self.me.address}: {why}")

    def serves(self, key: int) -> bool:
        return self.ctx.serves(key)

    def _config(self, request: pb.ConfigRequest) -> pb.EngineConfig:
        """What a joining node takes: the ring's settings, and its id; and what it checks:
        which protocols I speak and talk to."""
        config = self.settings.to_pb()
        config.ring = self.ring
        config.protocol, config.oldest_protocol = versions.PROTOCOL, versions.OLDEST
        config.software = versions.software()
        return config

    def stats(self, ledger: Ledger, digests: bool = True) -> pb.StatsReply:
        return self.statistics.reply(ledger, digests)

    def periodic(self) -> list[tuple[Callable[[], Op], float]]:
        """Operations a live node runs on a timer, with their periods."""
        s, logs = self.settings, self.logs
        return (
            [(self.gossip.gossip, s.gossip_period)] * s.gossiped
            + [(self.replication.reconcile, s.reconcile_period)] * self.ctx.replicated
            + ([(logs.maintain, s.reconcile_period)] if logs is not None else [])
        )

    def flush(self) -> None:
        """The node stops: it takes on no new work, and delivers at once what it holds."""
        self.ctx.stopping = True
        self.reports.flush()
        if self.logs is not None:
            self.ctx.host.spawn(self.logs.hand_over())

    def leaving(self) -> Op:
        """The node leaves the ring for good: first no log keeps it as a member (those it
        leads go to its successors, the others' leaders drop it), while it still answers
        (Departures.step_down)."""
        if self.departures is not None:
            yield from self.departures.step_down()

    def durable(self, method: str = "") -> None:
        """Commit what the journal was told (a shell calls this once per batch of changes:
        after each request it handled, `method`, and each operation it ran, ""). If it
        cannot (the data directory full), the changes wait in the journal for a later
        commit; the request is refused only if it may have changed what I keep: a Ping or
        an announcement is not answered with another call's full disk (its caller would
        take me for failed, and the ring would fall apart around a node that only cannot
        write)."""
        if self.ctx.journal is None:
            return
        try:
            self.ctx.journal.commit()
        except StatusError:
            if not method or method in WRITES:
                raise

    def restore(
        self,
        subscriptions: Sequence[Subscription],
        entries: Sequence[tuple[int, pb.QueryEntry]],
        tombstones: Sequence[tuple[int, int, int, float]] = (),
        gone: Sequence[tuple[int, int, float]] = (),
    ) -> None:
        """Take back what a journal kept (a restarted node, before it rejoins the ring): the
        subscriptions homed (or replicated) here with their mailboxes, the entries held here
        and the tombstones ((key, subscription, version, when); unsubscribed: (subscription,
        home key, when)). Keys no longer mine pass on as on any join."""
        ctx, store = self.ctx, self.store
        journal, ctx.journal = ctx.journal, None  # it holds these already
        try:
            for sub in subscriptions:
                self.subscriptions[sub.id] = sub
            for key, entry in entries:
                self.index.replace(key, entry)
            for key, sub_id, version, when in tombstones:
                store.entries.tombstones[(key, sub_id)] = (version, store.ages.unstamp(when))
            for sub_id, key, when in gone:
                store.homes.gone[sub_id] = (key, store.ages.unstamp(when))
        finally:
            ctx.journal = journal
