"""The engine on the simulator shell: the same EngineNode objects over an in-memory ring.

Every message is counted in the ring's one ledger, so a document's cost is the ledger's
growth while it is published and everything it set off has run.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial

from chord.protocol.calls import PeerUnreachable
from chord.protocol.ids import spread_ids
from chord.protocol.ledger import Count, Ledger
from chord.protocol.routing import SUCCESSORS
from chord.simulation.oracle import ring_problems
from chord.simulation.simulator import Simulator
from cqengine.core.basis.errors import EngineError
from cqengine.core.frame.documents import Document
from cqengine.core.node import EngineNode
from cqengine.core.qn.qn import Resolution
from cqengine.core.resolution.runs import Heard
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.tally import Tally
from cqengine.proto import cqengine_pb2 as pb

ANNOUNCE = ("Announce",)
RESOLUTION = ("TermDialogue", "GetBloom")


@dataclass
class DocReport:
    docno: str
    dn: str
    terms: int
    candidates: int
    matches: int
    alerts: int
    kinds: dict[str, Count] = field(default_factory=dict)  # ledger growth, by kind
    counters: dict[str, int] = field(default_factory=dict)  # every node's counters' growth, by name

    def total(self, methods: Iterable[str]) -> Count:
        """Messages and bytes of these methods, requests and replies together."""
        out = Count()
        for m in methods:
            for kind in (m, m + ".reply"):
                c = self.kinds.get(kind)
                if c:
                    out.messages += c.messages
                    out.bytes += c.bytes
        return out

    @property
    def announcement(self) -> Count:
        return self.total(ANNOUNCE)

    @property
    def resolution(self) -> Count:
        return self.total(RESOLUTION)


def ledger_growth(before: dict[str, Count], after: dict[str, Count]) -> dict[str, Count]:
    out = {}
    for kind, c in after.items():
        b = before.get(kind, Count())
        if c.messages != b.messages:
            out[kind] = Count(c.messages - b.messages, c.bytes - b.bytes)
    return out


SETTLE_HOLD = 1.0  # a simulated DN's hold: its timer fires once everything has settled


class EngineSimulator:
    """A ring of `nodes` engine nodes over an in-memory transport, on a virtual clock
    (chord.simulation.simulator.VirtualClock). Every node tells the one observer (a Tally unless
    given: every node's counters summed as they grow) what happens; a document's QNs
    resolve it together once its announcement has run its course
    (cqengine.core.qn.qn.Resolution)."""

    def __init__(
        self,
        nodes: int,
        settings: Settings,
        seed: int = 0,
        r: int = SUCCESSORS,
        ledger: Ledger | None = None,
        observer: Tally | None = None,
        balanced: bool = False,
    ) -> None:
        """`balanced`: the nodes' ids evenly spaced (chord.protocol.ids.spread_ids, as `ring up
        --balanced-ids` gives them), not hashed from their addresses."""
        settings.validate()
        self.settings = settings
        self.rng = random.Random(seed)
        self.observer = observer if observer is not None else Tally()
        self.heard: list[tuple[EngineNode, Heard]] = []  # what the QNs heard, to resolve together
        self.held_out = 0
        self.ring = Simulator(
            r=r,
            seed=seed,
            ledger=ledger,
            app=lambda chord, host: EngineNode(
                chord,
                settings,
                replace(host, new_id=self._ids(settings, chord.me.id)),
                observer=self.observer,
                gather=lambda node, h: self.heard.append((node, h)),
            ),
        )
        self.ring.build_instant(
            [f"node-{i}" for i in range(nodes)], spread_ids(nodes, seed) if balanced else None
        )
        for e in self.engines.values():  # the tables were set, not grown: the DNs look once
            e.dn.successors_changed()

    @staticmethod
    def _ids(settings: Settings, node_id: int) -> Callable[[], int]:
        """A node's subscription ids and document keys: seeded per node and ring, so that
        runs repeat."""
        return partial(random.Random(settings.seed ^ node_id).getrandbits, 64)

    @property
    def engines(self) -> dict[str, EngineNode]:
        return self.ring.apps  # type: ignore[return-value]

    @property
    def tally(self) -> Counter[str]:
        return self.observer.tally

    def observe(self, observer: Tally) -> None:
        """Have every node tell this observer from now on."""
        self.observer = observer
        for engine in self.engines.values():
            engine.ctx.observer = observer

    def _run(self, address: str, op):
        """Run an operation at a node, and everything it sets off."""
        result = self.ring.run(self.ring.nodes[address], op)
        self.settle()
        return result

    def hold(self, on: bool) -> None:
        """Have the DNs count their batches' reports and deliver each batch's alerts once,
        one alert batch per home node, as live DNs do (on), or deliver each report's at
        once, the paper's protocol (off, the default). Everything settles before a publish
        returns, so a batch still held then lacks a report: its hold runs out there
        (counted in `held_out`)."""
        for e in self.engines.values():
            e.reports.hold = SETTLE_HOLD if on else 0.0

    def settle(self) -> None:
        """Run everything queued, the QNs' resolutions included, to the end; then, if timers
        were set (the DNs' holds, retries), fire them and settle again."""
        self.ring.drain()
        while self.heard:  # the announcements have run their course: the QNs resolve together
            heard = self.heard[:]
            self.heard.clear()
            self.resolve(heard)
            self.ring.drain()
        if self.ring.clock.timers:  # every report is in: a batch still held lacks one
            self.held_out += sum(len(e.reports.gathering) for e in self.engines.values())
            self.ring.clock.fire()
            self.settle()
            return
        self.observer.settle()

    def resolve(self, heard: list[tuple[EngineNode, Heard]]) -> None:
        """Resolve what these QNs heard together (cqengine.core.qn.qn.Resolution): each round's
        requests made one by one, each from its QN over the ring; then each QN reports."""
        resolution = Resolution([(node.qn, h) for node, h in heard])
        while asks := resolution.asks():
            for ask in asks:
                node = self.ring.nodes[ask.qn.ctx.me.address]
                try:
                    reply = self.ring.run(node, ask.qn.ask(ask.heard, ask.rpc, ask.request))
                except PeerUnreachable as e:
                    resolution.answer(ask, None, str(e))
                else:
                    resolution.answer(ask, reply)
        for (node, h), matched in zip(heard, resolution.matched()):
            self.ring.run(self.ring.nodes[node.me.address], node.qn.resolved(h, matched))

    def pick(self) -> str:
        return self.rng.choice(sorted(self.ring.nodes))

    def subscribe(self, text: str, via: str | None = None) -> pb.SubscribeReply:
        address = via or self.pick()
        return self._run(address, self.engines[address].placement.subscribe(text))

    def subscribe_many(
        self, texts: list[str], via: str | None = None
    ) -> list[pb.SubscribeReply | EngineError]:
        """Subscribe a batch of queries through one node: per query its reply, or why it
        was refused."""
        address = via or self.pick()
        return self._run(address, self.engines[address].placement.subscribe_many(texts))

    def subscribe_terms(self, terms: list[str], via: str) -> pb.SubscribeReply:
        return self._run(via, self.engines[via].placement.subscribe_terms(terms))

    def unsubscribe(self, reply: pb.SubscribeReply) -> None:
        self._run(
            reply.home,
            self.engines[reply.home].placement.unsubscribe(reply.subscription_id, reply.token),
        )

    def publish(self, docno: str, text: str, title: str = "", via: str | None = None) -> DocReport:
        address = via or self.pick()
        op = self.engines[address].dn.publish(docno, text.encode("utf-8"), title)
        return self._report([docno], address, lambda: [self.ring.run(self.ring.nodes[address], op)])

    def publish_terms(self, docno: str, terms: list[str], via: str) -> DocReport:
        op = self.engines[via].dn.publish_terms(docno, terms)
        return self._report([docno], via, lambda: [self.ring.run(self.ring.nodes[via], op)])

    def publish_batch(self, docs: list[Document], via: str) -> DocReport:
        """Publish documents (analyzed) through one node as one batch; the report is the
        batch's (refused documents count no terms)."""
        op = self.engines[via].dn.publish_batch(docs)
        return self._report(
            [d.docno for d in docs], via, lambda: self.ring.run(self.ring.nodes[via], op)
        )

    def _report(self, docnos: list[str], address: str, publish: Callable[[], list]) -> DocReport:
        """Publish, run everything it sets off, and read its cost off the ledger and tally."""
        before, counts = self.ring.ledger.snapshot(), self.tally.copy()
        replies = publish()
        self.settle()
        grown = {name: n - counts[name] for name, n in self.tally.items() if n != counts[name]}
        return DocReport(
            docno=" ".join(docnos),
            dn=address,
            terms=sum(getattr(r, "terms", 0) for r in replies),
            candidates=grown.get("candidates", 0),
            matches=grown.get("matches", 0),
            alerts=grown.get("alerts_delivered", 0),
            kinds=ledger_growth(before, self.ring.ledger.snapshot()),
            counters=grown,
        )

    def gossip_round(self) -> None:
        """Every node gossips its synopsis once (and re-indexes if it changed), in a seeded
        order."""
        addresses = sorted(self.ring.nodes)
        self.rng.shuffle(addresses)
        for a in addresses:
            self.ring.run(self.ring.nodes[a], self.engines[a].gossip.gossip())
        self.settle()

    def alerts(self) -> list[tuple[int, str]]:
        """Every alert delivered so far, taken off the subscribers' streams (at the node that
        serves each subscription: its home, or the replica that took over)."""
        out = []
        for e in self.engines.values():
            acks = []
            for sub in list(e.subscriptions.values()):
                if not sub.key:
                    out += [(sub.id, docno) for docno, _, _ in sub.mailbox.take()]
                elif e.serves(sub.key):  # acknowledged, as a stream would: at the replicas too
                    box = sub.mailbox
                    out += [(sub.id, docno) for docno, _, _ in box.alerts(box.first, box.shown)]
                    acks.append((sub, box.shown))
            acknowledged = e.home.acknowledge(acks)  # all at once, as a client does
            if acknowledged is not None:  # on the home log: appended to the logs
                self._run(e.me.address, acknowledged)
        self.settle()
        return out

    def reconcile_round(self) -> None:
        """Every node reconciles its range with its replicas once, in a seeded order (and,
        on the home log, keeps the logs it leads: Homelogs.maintain)."""
        addresses = sorted(self.ring.nodes)
        self.rng.shuffle(addresses)
        for a in addresses:
            engine = self.engines[a]
            self.ring.run(self.ring.nodes[a], engine.replication.reconcile())
            if engine.home.logs is not None:
                self.ring.run(self.ring.nodes[a], engine.home.logs.maintain())
        self.settle()

    def fail(self, addresses: Iterable[str], converge: bool = True) -> int:
        """These nodes crash at once; then (`converge`) rounds of the ring's maintenance, and
        whatever they set off (replicas take over what the failed nodes held), until the
        ring is correct again; how many rounds that took."""
        for a in addresses:
            self.ring.fail(a)
        return self._converge(self.ring.problems) if converge else 0

    def cut(self, addresses: Iterable[str]) -> int:
        """A network partition: these nodes cut off from the rest; then rounds of the ring's
        maintenance, and whatever they set off, until each side is a correct ring of its
        own (each took over what it lost of the other); how many rounds that took."""
        apart = set(addresses)
        self.ring.cut(apart)
        return self._converge(
            lambda: self._problems(apart) + self._problems(set(self.ring.nodes) - apart)
        )

    def _problems(self, side: set[str]) -> list[str]:
        """What is wrong with the ring these nodes make on their own."""
        tables = [node.table for a, node in self.ring.nodes.items() if a in side]
        return ring_problems(tables, self.ring.r)

    def heal_later(self, seconds: float) -> None:
        """The partition's link comes back this many (virtual) seconds from now, whatever
        runs meanwhile (DNs trying held batches again, say); `heal` merges the rings."""
        self.ring.clock.later(seconds, self.ring.heal)

    def heal(self) -> int:
        """The partition heals: rounds of maintenance until the two rings are one again."""
        self.ring.heal()
        return self._converge(self.ring.problems)

    def _converge(self, problems: Callable[[], list[str]]) -> int:
        rounds = 0
        while problems():
            if rounds == 200:
                raise RuntimeError(f"the ring did not converge: {problems()[:3]}")
            self.ring.round()
            self.settle()
            rounds += 1
        return rounds

    def load(self) -> list[int]:
        """Query-index entries per node."""
        return [len(e.index) for e in self.engines.values()]
