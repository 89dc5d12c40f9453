"""One role of an engine node, tested alone: a real Context for a node at a place of a fake
ring, a host whose clock and background work the test drives, the rest of the ring played
by the test, and recording stand-ins for the roles a role hands off to
(cqengine.core.frame.handoffs).

A fake ring is a sorted list of NodeRefs; a node's routing table is what ring truth
(chord.simulation.oracle) says it is once the ring has converged. An operation a role
returns or spawns runs only when the test drives it (chord.protocol.driver.drive) with the
node's `peers`, which record every call and answer it as the test says.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chord.proto import chord_pb2 as chord_pb
from chord.protocol import floor, versions
from chord.protocol.calls import Call, Fanout, Op, PeerUnreachable
from chord.protocol.driver import drive
from chord.protocol.host import Host
from chord.protocol.messages import to_info
from chord.protocol.node import ChordNode
from chord.protocol.routing import SUCCESSORS, NodeRef
from chord.simulation.oracle import RingOracle
from cqengine.core.frame.context import Context
from cqengine.core.resolution.runs import Announced, Heard
from cqengine.core.terms.settings import Settings
from cqengine.proto import cqengine_pb2 as pb

EPOCH = 1_700_000_000.0  # the fake wall clock's reading at time 0


class FakeHost:
    """What a shell lends a node, driven by the test: a clock that moves only when the
    test advances it (firing the timers it passes, each at its time), operations spawned
    kept in order, not run, until the test takes or runs them, and seeded ids."""

    def __init__(self, seed: int = 0, incarnation: int = 1) -> None:
        self.t = 0.0
        self.spawned: list[Op] = []
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._set = 0  # timers set so far: those due together fire in the order set
        ids = random.Random(seed)
        self.host = Host(
            spawn=lambda op: self.spawned.append(op),  # (the list taken is replaced)
            later=self._later,
            now=lambda: self.t,
            clock=lambda: EPOCH + self.t,
            new_id=lambda: ids.getrandbits(64),
            incarnation=incarnation,
        )

    def _later(self, seconds: float, fn: Callable[[], None]) -> None:
        self._set += 1
        heapq.heappush(self._timers, (self.t + seconds, self._set, fn))

    def timers(self) -> list[float]:
        """When each timer set and not yet fired is due, soonest first."""
        return sorted(due for due, _, _ in self._timers)

    def advance(self, seconds: float) -> int:
        """Time moves on by `seconds`: the timers due by then fire, each at its time, in
        order (and those they set, if due by then too); how many fired."""
        end, fired = self.t + seconds, 0
        while self._timers and self._timers[0][0] <= end:
            due, _, fn = heapq.heappop(self._timers)
            self.t = max(self.t, due)
            fn()
            fired += 1
        self.t = end
        return fired

    def take(self) -> list[Op]:
        """The operations spawned since last taken, in order, for the test to run."""
        ops, self.spawned = self.spawned, []
        return ops

    def run_spawned(self, peers: Peers) -> int:
        """Run the operations spawned, and those they spawn, until none is left; how many
        ran."""
        ran = 0
        while self.spawned:
            for op in self.take():
                drive(op, peers)
                ran += 1
        return ran


class Peers:
    """The rest of a fake ring as a test plays it. Every call is recorded; one to a node
    `down` finds it gone (refused), one to a node `silent` finds no answer in time (not
    refused: it may be slow); else the handler the test gave its method (`on`) answers
    it, with a reply or an exception. Requests cross as a transport carries them: a
    handler gets a copy, read back from the wire form. Chord's own FindSuccessor and Ping
    are answered from ring truth (a lookup names the key's owner among the nodes not
    avoided), as a converged ring that has not yet noticed a failure would."""

    def __init__(self, ring: Sequence[NodeRef]) -> None:
        self.oracle = RingOracle(ring)
        self.calls: list[Call] = []
        self.down: set[str] = set()
        self.silent: set[str] = set()
        self.handlers: dict[str, Callable[[Call], Any]] = {
            "FindSuccessor": self._find_successor,
            "Ping": lambda call: chord_pb.Empty(),
        }

    def on(self, method: str, answer: Callable[[Call], Any]) -> None:
        """Answer calls of `method` with `answer(call)`."""
        self.handlers[method] = answer

    def __call__(self, call: Call) -> Any:
        self.calls.append(call)
        address = call.peer.address
        if address in self.down:
            raise PeerUnreachable(call.peer, "UNAVAILABLE")
        if address in self.silent:
            raise PeerUnreachable(call.peer, "DEADLINE_EXCEEDED")
        handler = self.handlers.get(call.method)
        if handler is None:
            raise AssertionError(f"the test gave no answer to {call.method} at {address}")
        request = type(call.request).FromString(call.request.SerializeToString())
        return handler(Call(call.peer, call.method, request))

    def sent(self, method: str, to: str | None = None) -> list[Call]:
        """The calls of a method made so far (to one address, or any)."""
        return [c for c in self.calls if c.method == method and to in (None, c.peer.address)]

    def _find_successor(self, call: Call) -> chord_pb.FindSuccessorReply:
        avoid = set(call.request.avoid)
        owner = RingOracle(n for n in self.oracle.nodes if n.id not in avoid).owner(
            call.request.key
        )
        return chord_pb.FindSuccessorReply(done=True, node=to_info(owner))


def ring_of(n: int, seed: int = 0) -> list[NodeRef]:
    """A fake ring of n nodes at seeded ids, sorted."""
    rng = random.Random(seed)
    ids: set[int] = set()
    while len(ids) < n:
        ids.add(rng.getrandbits(64))
    return ring_at(sorted(ids))


def ring_at(ids: Sequence[int]) -> list[NodeRef]:
    """A fake ring of nodes at these ids (distinct), sorted."""
    return [NodeRef(node_id, f"node-{node_id:016x}") for node_id in sorted(ids)]


def ring_settings(**kw: Any) -> Settings:
    """The ring's settings, the defaults but for `kw`, checked."""
    return Settings(**kw).validate()


@dataclass
class FakeNode:
    """A node of a fake ring as a role's test holds it: a real Context over a ChordNode
    whose table ring truth set, the host it is lent, and the rest of the ring."""

    ctx: Context
    host: FakeHost
    peers: Peers

    @property
    def me(self) -> NodeRef:
        return self.ctx.me

    def run(self, op: Op) -> Any:
        """Drive an operation to its end over the fake ring; its result."""
        return drive(op, self.peers)

    def run_spawned(self) -> int:
        return self.host.run_spawned(self.peers)

    def owner(self, key: int) -> NodeRef:
        """The key's owner, as ring truth has it."""
        return self.peers.oracle.owner(key)


def node_at(
    ring: Sequence[NodeRef],
    me: NodeRef,
    settings: Settings | None = None,
    r: int = SUCCESSORS,
    peers: Peers | None = None,
    seed: int = 0,
) -> FakeNode:
    """The node `me` of the fake ring, its table as ring truth has it once the ring has
    converged (settled: it holds its region; its ring's protocol floor known), with a real
    Context of these settings (ring_settings() by default)."""
    chord = ChordNode(me, r=r)
    want = RingOracle(ring).table(me, r)
    t = chord.table
    t.predecessor, t.successors, t.fingers = want.predecessor, want.successors, want.fingers
    chord.settled = True
    if t.alone():
        chord.floor.alone()
    else:
        chord.floor.heard(versions.PROTOCOL, 0, floor.limit(me, t.successors))
    host = FakeHost(seed=seed ^ me.id)
    ctx = Context(chord, settings if settings is not None else ring_settings(), host.host)
    return FakeNode(ctx, host, peers if peers is not None else Peers(ring))


# ---- recording stand-ins for the hand-offs ------------------------------------------------


def nothing() -> Op:
    """An operation that makes no call."""
    return
    yield


class RecordingHearer:
    """A Hearer (the QN as the announcer hands it what stopped here) that keeps what it
    heard and resolves nothing."""

    def __init__(self) -> None:
        self.got: list[Heard] = []

    def heard(self, h: Heard) -> Op:
        self.got.append(h)
        return nothing()


@dataclass(frozen=True)
class Announcement:
    """A batch the DN handed its announcer (Announcing.announce's arguments)."""

    dn: NodeRef
    docs: list[Announced]
    hops: int
    batch: int
    share: int
    owner: bool


class RecordingAnnouncer:
    """Announcing (the announcer as the DN hands it a batch) that keeps each batch it is
    handed, as it is handed it, and announces nothing."""

    def __init__(self) -> None:
        self.batches: list[Announcement] = []

    def announce(
        self,
        dn: NodeRef,
        docs: list[Announced],
        hops: int,
        batch: int = 0,
        share: int = 0,
        owner: bool = False,
    ) -> Op:
        self.batches.append(Announcement(dn, docs, hops, batch, share, owner))
        return nothing()


class RecordingCopier:
    """A Copier (replication: the one way records reach my replicas) that keeps each copy
    it is asked for and sends it as replication does, to every replica at once (one
    Fanout of Replicate calls to `to`): a test that answers those calls sees what holds
    while a copy is on its way."""

    def __init__(self, to: Sequence[NodeRef] = ()) -> None:
        self.to = list(to)
        self.copies: list[pb.Records] = []

    def copy(self, records: pb.Records) -> Op:
        self.copies.append(records)
        return self._sent(records)

    def _sent(self, records: pb.Records) -> Op:
        if not self.to:
            return []
        replies = yield Fanout(tuple(Call(peer, "Replicate", records) for peer in self.to))
        return [p.address for p, r in zip(self.to, replies) if not isinstance(r, Exception)]
