"""The engine on the simulator shell: the same EngineNode objects over an in-memory ring.

Every message is counted in the ring's one ledger, so a document's cost is the ledger's
growth while it is published and everything it set off has run.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from chord.ledger import Count, Ledger
from chord.simulator import Simulator
from cqengine.config import Settings
from cqengine.engine import EngineNode, Meter, Unsent, resolve_together, settle_meters, unsent_counts
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


class EngineSimulator:
    def __init__(self, nodes: int, settings: Settings, seed: int = 0, r: int = 8,
                 ledger: Ledger | None = None) -> None:
        settings.validate()
        self.settings = settings
        self.rng = random.Random(seed)
        self.tally: Counter[str] = Counter()  # every node's counters, summed as they grow
        # what every node measured instead of sending, counted in the tally once a document
        # has run its course (not node by node: a measurement pass's QNs count thousands)
        self.unsent: Unsent = {}
        # the shadows every QN measured (a pass's), settled together once a document has run
        # its course: a stack spans many QNs (cqengine.engine.settle_meters), not one each
        self.meters: list[tuple[EngineNode, Meter]] = []
        # the QNs' own resolutions of a document (where they measure no shadows), resolved in
        # step once it has run its course (cqengine.engine.resolve_together)
        self.together: list = []
        self.ring = Simulator(r=r, seed=seed, ledger=ledger,
                              app=lambda chord, spawn: EngineNode(chord, settings, spawn, tally=self.tally,
                                                                  unsent=self.unsent, meters=self.meters,
                                                                  together=self.together))
        self.ring.build_instant([f"node-{i}" for i in range(nodes)])

    @property
    def engines(self) -> dict[str, EngineNode]:
        return self.ring.apps  # type: ignore[return-value]

    def _run(self, address: str, op):
        result = self.ring.run(self.ring.nodes[address], op)
        self.ring.drain()
        while self.together:  # the announcements have run their course: the QNs resolve in step
            pending = self.together[:]
            self.together.clear()
            resolve_together(pending, lambda engine, op: self.ring.run(engine.chord, op))
            self.ring.drain()
        try:
            settle_meters(self.meters)
        finally:
            self.meters.clear()
        for name, n in unsent_counts(self.unsent):
            self.tally[name] += n
        self.unsent.clear()
        return result

    def pick(self) -> str:
        return self.rng.choice(sorted(self.ring.nodes))

    def subscribe(self, text: str, via: str | None = None) -> pb.SubscribeReply:
        address = via or self.pick()
        return self._run(address, self.engines[address].subscribe(text))

    def subscribe_terms(self, terms: list[str], via: str) -> pb.SubscribeReply:
        return self._run(via, self.engines[via].subscribe_terms(terms))

    def unsubscribe(self, reply: pb.SubscribeReply) -> None:
        self._run(reply.home, self.engines[reply.home].unsubscribe(reply.subscription_id, reply.token))

    def publish(self, docno: str, text: str, title: str = "", via: str | None = None) -> DocReport:
        address = via or self.pick()
        return self._report(docno, address, self.engines[address].publish(docno, text.encode("utf-8"), title))

    def publish_terms(self, docno: str, terms: list[str], via: str) -> DocReport:
        return self._report(docno, via, self.engines[via].publish_terms(docno, terms))

    def _report(self, docno: str, address: str, op) -> DocReport:
        """Publish, run everything it sets off, and read its cost off the ledger and tally."""
        before, counts = self.ring.ledger.snapshot(), self.tally.copy()
        reply = self._run(address, op)
        grown = {name: n - counts[name] for name, n in self.tally.items() if n != counts[name]}
        return DocReport(docno=docno, dn=address, terms=reply.terms, candidates=grown.get("candidates", 0),
                         matches=grown.get("matches", 0), alerts=grown.get("alerts_delivered", 0),
                         kinds=ledger_growth(before, self.ring.ledger.snapshot()), counters=grown)

    def gossip_round(self) -> None:
        """Every node gossips its synopsis once (and re-indexes if it changed), in a seeded order."""
        addresses = sorted(self.ring.nodes)
        self.rng.shuffle(addresses)
        for a in addresses:
            self.ring.run(self.ring.nodes[a], self.engines[a].gossip())
        self.ring.drain()

    def alerts(self) -> list[tuple[int, str]]:
        """Every alert delivered so far, taken off the subscribers' streams."""
        return [(a.subscription_id, a.docno) for e in self.engines.values()
                for sub in e.subscriptions.values() for a in sub.mailbox.take()]

    def load(self) -> list[int]:
        """Query-index entries per node."""
        return [len(e.index) for e in self.engines.values()]

