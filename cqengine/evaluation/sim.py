"""The engine on the simulator shell: the same EngineNode objects over an in-memory ring.

Every message is counted in the ring's one ledger, so a document's cost is the ledger's
growth while it is published and everything it set off has run.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterable

from chord.ledger import Count, Ledger
from chord.node import Call, Op, PeerUnreachable
from chord.simulator import Simulator
from cqengine.core.engine import Document, EngineNode, Heard, resolve_together
from cqengine.core.settings import Settings
from cqengine.evaluation.tally import Tally
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


def _one(call: Call) -> Op:
    """An operation of one call, returning its reply."""
    return (yield call)


def ledger_growth(before: dict[str, Count], after: dict[str, Count]) -> dict[str, Count]:
    out = {}
    for kind, c in after.items():
        b = before.get(kind, Count())
        if c.messages != b.messages:
            out[kind] = Count(c.messages - b.messages, c.bytes - b.bytes)
    return out


SETTLE_HOLD = 1.0  # a simulated DN's hold: its timer fires once everything has settled


class EngineSimulator:
    """A ring of `nodes` engine nodes over an in-memory transport. Every node tells the
    one observer (a Tally unless given: every node's counters summed as they grow) what
    happens; a document's QNs resolve it together once its announcement has run its
    course (cqengine.core.engine.resolve_together)."""

    def __init__(
        self,
        nodes: int,
        settings: Settings,
        seed: int = 0,
        r: int = 8,
        ledger: Ledger | None = None,
        observer: Tally | None = None,
    ) -> None:
        settings.validate()
        self.settings = settings
        self.rng = random.Random(seed)
        self.observer = observer if observer is not None else Tally()
        self.heard: list[tuple[EngineNode, Heard]] = []  # what the QNs heard, to resolve together
        self.timers: list[Callable[[], None]] = []  # the DNs' holds (see hold)
        self.held_out = 0
        self.ring = Simulator(
            r=r,
            seed=seed,
            ledger=ledger,
            app=lambda chord, spawn: EngineNode(
                chord,
                settings,
                spawn,
                observer=self.observer,
                gather=lambda node, h: self.heard.append((node, h)),
                ids=partial(random.Random(settings.seed ^ chord.me.id).getrandbits, 64),
            ),
        )
        self.ring.build_instant([f"node-{i}" for i in range(nodes)])

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
            engine.observer = observer

    def _run(self, address: str, op):
        """Run an operation at a node, and everything it sets off."""
        result = self.ring.run(self.ring.nodes[address], op)
        self._settle()
        return result

    def hold(self, on: bool) -> None:
        """Have the DNs count their batches' reports and deliver each batch's alerts once,
        one alert batch per home node, as live DNs do (on), or deliver each report's at
        once, the paper's protocol (off, the default). Everything settles before a publish
        returns, so a batch still held then lacks a report: its hold runs out there
        (counted in `held_out`)."""
        for e in self.engines.values():
            e.later = (lambda seconds, fn: self.timers.append(fn)) if on else None
            e.hold = SETTLE_HOLD if on else 0.0

    def _settle(self) -> None:
        """Run everything queued, the QNs' resolutions included, to the end."""
        self.ring.drain()
        while self.heard:  # the announcements have run their course: the QNs resolve together
            heard = self.heard[:]
            self.heard.clear()
            self._resolve(heard)
            self.ring.drain()
        if self.timers:  # every report is in: a batch still held lacks one
            self.held_out += sum(len(e.gathering) for e in self.engines.values())
            timers, self.timers = self.timers, []
            for fn in timers:
                fn()
            self._settle()
            return
        self.observer.settle()

    def _resolve(self, heard: list[tuple[EngineNode, Heard]]) -> None:
        """Make every call of the QNs' resolution, each from its node over the ring."""
        together = resolve_together(heard)
        reply, error = None, None
        while True:
            try:
                node, call = together.throw(error) if error is not None else together.send(reply)
            except StopIteration:
                return
            reply, error = None, None
            try:
                reply = self.ring.run(node.chord, _one(call))
            except PeerUnreachable as e:
                error = e

    def pick(self) -> str:
        return self.rng.choice(sorted(self.ring.nodes))

    def subscribe(self, text: str, via: str | None = None) -> pb.SubscribeReply:
        address = via or self.pick()
        return self._run(address, self.engines[address].subscribe(text))

    def subscribe_terms(self, terms: list[str], via: str) -> pb.SubscribeReply:
        return self._run(via, self.engines[via].subscribe_terms(terms))

    def unsubscribe(self, reply: pb.SubscribeReply) -> None:
        self._run(
            reply.home, self.engines[reply.home].unsubscribe(reply.subscription_id, reply.token)
        )

    def publish(self, docno: str, text: str, title: str = "", via: str | None = None) -> DocReport:
        address = via or self.pick()
        op = self.engines[address].publish(docno, text.encode("utf-8"), title)
        return self._report([docno], address, lambda: [self.ring.run(self.ring.nodes[address], op)])

    def publish_terms(self, docno: str, terms: list[str], via: str) -> DocReport:
        op = self.engines[via].publish_terms(docno, terms)
        return self._report([docno], via, lambda: [self.ring.run(self.ring.nodes[via], op)])

    def publish_batch(self, docs: list[Document], via: str) -> DocReport:
        """Publish documents (analyzed) through one node as one batch; the report is the
        batch's (refused documents count no terms)."""
        op = self.engines[via].publish_batch(docs)
        return self._report(
            [d.docno for d in docs], via, lambda: self.ring.run(self.ring.nodes[via], op)
        )

    def _report(self, docnos: list[str], address: str, publish: Callable[[], list]) -> DocReport:
        """Publish, run everything it sets off, and read its cost off the ledger and tally."""
        before, counts = self.ring.ledger.snapshot(), self.tally.copy()
        replies = publish()
        self._settle()
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
            self.ring.run(self.ring.nodes[a], self.engines[a].gossip())
        self._settle()

    def alerts(self) -> list[tuple[int, str]]:
        """Every alert delivered so far, taken off the subscribers' streams (at the node that
        serves each subscription: its home, or the replica that took over)."""
        out = []
        for e in self.engines.values():
            for sub in list(e.subscriptions.values()):
                if not sub.key:
                    out += [(sub.id, docno) for docno, _, _ in sub.mailbox.take()]
                elif e.serves(sub.key):  # acknowledged, as a stream would: at the replicas too
                    box = sub.mailbox
                    out += [(sub.id, docno) for docno, _, _ in box.alerts(box.first, box.shown)]
                    e.acknowledge(sub, box.shown)
        self._settle()
        return out

    def reconcile_round(self) -> None:
        """Every node reconciles its range with its replicas once, in a seeded order."""
        addresses = sorted(self.ring.nodes)
        self.rng.shuffle(addresses)
        for a in addresses:
            self.ring.run(self.ring.nodes[a], self.engines[a].reconcile())
        self._settle()

    def fail(self, addresses: Iterable[str], converge: bool = True) -> int:
        """These nodes crash at once; then (`converge`) rounds of the ring's maintenance, and
        whatever they set off (replicas take over what the failed nodes held), until the
        ring is correct again; how many rounds that took."""
        for a in addresses:
            self.ring.fail(a)
        rounds = 0
        while converge and self.ring.problems():
            if rounds == 200:
                raise RuntimeError(f"the ring did not converge: {self.ring.problems()[:3]}")
            self.ring.round()
            self._settle()
            rounds += 1
        return rounds

    def load(self) -> list[int]:
        """Query-index entries per node."""
        return [len(e.index) for e in self.engines.values()]
