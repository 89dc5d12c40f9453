"""What the tests of the home's log share: a ring on it in the simulator read as live
subscribers read, and a log's entries and mailboxes as tests write and compare them."""

from __future__ import annotations

from collections import defaultdict

from cqengine.core.homelog.derive import Derived
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze
from support.workloads import make_settings, workload

LIMIT_BYTES = 8  # small: mailboxes overflow often (a document here weighs 2 or 3 bytes)
SUBS = list(range(1, 7))
DOCNOS = [f"d{i}" for i in range(12)]  # few: documents come again


def entry(kind, message) -> pb.LogEntry:
    return pb.LogEntry(epoch=1, kind=kind, data=message.SerializeToString())


def acknowledging(derived: Derived, sub_id: int, share: float) -> int | None:
    """The first number a subscriber names as it acknowledges `share` (0 to 1) of its
    subscription's waiting alerts, as the leader's mailbox holds them (None: it is not
    subscribed)."""
    sub = derived.subscriptions.get(sub_id)
    if sub is None:
        return None
    box = sub.mailbox
    return box.first + round(share * (box.next - box.first))


def state(derived: Derived) -> dict:
    """Everything that decides a number, by subscription."""
    return {
        s: (b.first, b.next, list(b.queue), sorted(b.seen), list(b.acked))
        for s, b in ((s, sub.mailbox) for s, sub in sorted(derived.subscriptions.items()))
    }


class Subscribers:
    """Every subscriber's stream, read as a live one is: at the node that serves its home
    key and leads its log, from the first number not acknowledged, then acknowledged.
    Every number read is remembered with its document, repeats included."""

    def __init__(self, sim: EngineSimulator) -> None:
        self.sim = sim
        self.numbers: dict[int, dict[int, str]] = defaultdict(dict)
        self.shown: list[tuple[int, str]] = []  # every alert shown, repeats included

    def read(self) -> None:
        sim = self.sim
        sim.reconcile_round()  # the logs' leaders are those the ring gives now
        for e in sim.engines.values():
            logs, acks = e.home.logs, []
            for sub in list(e.subscriptions.values()):
                leader = logs.leaders.get(sub.key)
                if not (e.serves(sub.key) and leader is not None and leader.leading):
                    continue
                box = sub.mailbox
                for n, (docno, _, _) in enumerate(box.alerts(box.first, box.next), box.first):
                    named = self.numbers[sub.id].setdefault(n, docno)
                    assert named == docno, f"number {n} of {sub.id:x}: {named} and {docno}"
                    self.shown.append((sub.id, docno))
                acks.append((sub, box.next))
            acknowledged = e.home.acknowledge(acks)
            if acknowledged is not None:
                sim.ring.run(sim.ring.nodes[e.me.address], acknowledged)
        sim.settle()

    def check_numbers(self) -> None:
        """Each subscription's numbers run 0, 1, 2, ... without a gap."""
        for sub_id, numbers in self.numbers.items():
            assert sorted(numbers) == list(range(len(numbers))), f"{sub_id:x}: {sorted(numbers)}"


def ring(members: int, nodes: int = 9, seed: int = 4):
    """A ring on the home log whose DNs count their reports, as live ones do, with the
    workload's queries subscribed through every node."""
    wl = workload(2)
    sim = EngineSimulator(
        nodes, make_settings(wl, replicas=members, seed=seed, home_log=True), seed=seed
    )
    sim.hold(True)
    vias = sorted(sim.engines)
    replies = [sim.subscribe(q, via=vias[i % len(vias)]) for i, q in enumerate(wl.queries)]
    subs = {r.subscription_id: analyze(q) for r, q in zip(replies, wl.queries)}
    return wl, sim, subs


def publish(sim: EngineSimulator, docs, via: list[str]) -> None:
    for i, d in enumerate(docs):
        sim.publish(d.docno, d.text, d.title, via=via[i % len(via)])
