"""The simulator shell: the very same ChordNode objects, wired by an in-memory transport.

The ring's maintenance goes in rounds: in each round every live node runs stabilize,
check_predecessor and fix_fingers once, in an order drawn from the seeded generator (the
randomized intervals of a live node, made reproducible). A ring is built by real joins
plus rounds, or instantly from the oracle; both yield the same tables once converged.
What rides on the nodes (the engine) is lent a Host (chord.protocol.host) whose time is a
VirtualClock: it moves only as timers fire, so a seeded simulation repeats exactly.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from chord.protocol.calls import Op
from chord.protocol.host import Host
from chord.protocol.ids import hash_id
from chord.protocol.ledger import Ledger
from chord.protocol.node import ChordNode
from chord.protocol.routing import SUCCESSORS, NodeRef
from chord.protocol.transport import Handler, MemoryTransport, run_sync
from chord.simulation.oracle import RingOracle, ring_problems

# builds an application (the engine) around a ChordNode, with the Host the simulator lends it
AppFactory = Callable[[ChordNode, Host], Handler]

EPOCH = 1_700_000_000.0  # the wall clock's reading when a simulation starts


class VirtualClock:
    """A simulation's time, in seconds from its start. It moves only when timers fire
    (`fire`), to the time each was set for, never back: how long a run takes on this
    machine changes nothing it does."""

    def __init__(self) -> None:
        self.t = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []  # (due, fn), in the order set

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        return EPOCH + self.t

    def later(self, seconds: float, fn: Callable[[], None]) -> None:
        self.timers.append((self.t + seconds, fn))

    def advance(self, seconds: float) -> None:
        """An operation's pause: time moves on; the timers it passes fire at the next `fire`
        (late, as a busy live node's would), not inside the operation."""
        self.t += max(seconds, 0.0)

    def fire(self) -> int:
        """Fire the timers set so far, in the order they were set (a timer they set waits
        for the next call); how many fired."""
        timers, self.timers = self.timers, []
        for due, fn in timers:
            self.t = max(self.t, due)
            fn()
        return len(timers)


class SimulatedNode(ChordNode):
    """A ChordNode whose lookups the simulator may answer from its oracle, without a
    message, while the ring stands still (Simulator.instant_lookups)."""

    owner_of: Callable[[int], NodeRef] | None = None

    def lookup(self, key: int, verify: bool = False) -> Op:
        if self.owner_of is not None:
            return self.owner_of(key), 0
        return (yield from super().lookup(key, verify))


class Simulator:
    def __init__(
        self,
        r: int = SUCCESSORS,
        seed: int = 0,
        ledger: Ledger | None = None,
        app: AppFactory | None = None,
    ) -> None:
        self.r = r
        self.rng = random.Random(seed)
        self.transport = MemoryTransport(ledger)
        self.nodes: dict[str, SimulatedNode] = {}
        self.apps: dict[str, Handler] = {}  # what answers at each address: the app, or the node
        self.make_app = app
        self.clock = VirtualClock()
        self.transport.pause = self.clock.advance
        self.queue: deque[tuple[str, Op]] = deque()
        self._standing = False  # lookups are instant: membership must not change
        self.partitioned = False  # a partition was made: maintenance recontacts lost nodes
        self.lives: dict[str, int] = {}  # address -> how many nodes have had it
        self.skews: dict[str, float] = {}  # address -> s its wall clock is off (step_clock)

    @property
    def ledger(self) -> Ledger:
        return self.transport.ledger

    @staticmethod
    def address(i: int) -> str:
        return f"sim-{i}"

    def new_node(self, address: str, node_id: int | None = None) -> ChordNode:
        if address in self.nodes:
            raise ValueError(f"address {address} already in the ring")
        self._moving()
        ref = NodeRef(hash_id(address) if node_id is None else node_id, address)
        node = SimulatedNode(ref, r=self.r, seed=self.rng.getrandbits(64))
        self.nodes[address] = node
        self.apps[address] = self.make_app(node, self.host(node)) if self.make_app else node
        self.transport.register(self.apps[address])
        return node

    def host(self, node: ChordNode) -> Host:
        """What a node lends its app: the ring's queue and clock. A node that failed or left
        runs nothing more: neither its queued operations nor its timers."""
        address = node.me.address
        ids = random.Random(hash_id(address))
        # each life of an address its own, from no random source the ring draws on
        self.lives[address] = life = self.lives.get(address, 0) + 1

        def later(seconds: float, fn: Callable[[], None]) -> None:
            self.clock.later(seconds, lambda: fn() if self.nodes.get(address) is node else None)

        return Host(
            spawn=lambda op: self.queue.append((address, op)),
            later=later,
            now=self.clock.now,
            clock=lambda: self.clock.wall() + self.skews.get(address, 0.0),
            new_id=lambda: ids.getrandbits(64),
            incarnation=hash_id(f"{address} life {life}") | 1,
        )

    def step_clock(self, address: str, seconds: float) -> None:
        """Step the wall clock this address's nodes read by `seconds` (back when negative),
        as an operator's mistake or a bad NTP server would; their monotonic `now` goes on."""
        self.skews[address] = self.skews.get(address, 0.0) + seconds

    def run(self, node: ChordNode, op: Op) -> Any:
        return run_sync(self.apps[node.me.address], op, self.transport)

    def drain(self) -> int:
        """Run queued background operations, and those they queue, until none is left."""
        ran = 0
        while self.queue:
            address, op = self.queue.popleft()
            if address in self.nodes:  # a node that left or failed runs nothing more
                run_sync(self.apps[address], op, self.transport)
                ran += 1
        return ran

    def live(self) -> list[ChordNode]:
        return list(self.nodes.values())

    # ---- building ---------------------------------------------------------------------

    def build_instant(self, addresses: Iterable[str], ids: Iterable[int] | None = None) -> None:
        """Every table set straight from the oracle: no messages, any size in seconds; the
        nodes' ids hashed from their addresses, or `ids`."""
        addresses = list(addresses)
        for a, node_id in zip(addresses, ids if ids is not None else [None] * len(addresses)):
            self.new_node(a, node_id)
        oracle = RingOracle(n.me for n in self.nodes.values())
        for node in self.nodes.values():
            want = oracle.table(node.me, self.r)
            node.table.predecessor = want.predecessor
            node.table.successors = want.successors
            node.table.fingers = want.fingers
            node.settled = True  # as if its successor had handed it its region
        self._floors_known()

    def _floors_known(self) -> None:
        """Every node's floor as stabilization would have left it: the oldest protocol of
        the ring, found so many successors on (chord.protocol.floor)."""
        ring = sorted(self.nodes.values(), key=lambda n: n.me.id)
        oldest = min(n.floor.speaks for n in ring)
        for i, node in enumerate(ring):
            hops = next(
                h for h in range(len(ring)) if ring[(i + h) % len(ring)].floor.speaks == oldest
            )
            node.floor.version, node.floor.hops, node.floor.known = oldest, hops, True

    def join(self, address: str, via: str | None = None, node_id: int | None = None) -> ChordNode:
        others = [a for a in self.nodes if a != address]
        node = self.new_node(address, node_id)
        if others:
            bootstrap = self.nodes[via if via is not None else self.rng.choice(others)]
            self.run(node, node.join(bootstrap.me))
        return node

    def build_by_joins(
        self, addresses: Iterable[str], rounds_between: int = 1, max_rounds: int = 200
    ) -> int:
        """Join one node at a time through a random member; return rounds to converge."""
        for a in addresses:
            self.join(a)
            self.rounds(rounds_between)
        return self.converge(max_rounds)

    # ---- maintenance ------------------------------------------------------------------

    def round(self) -> None:
        nodes = self.live()
        self.rng.shuffle(nodes)
        for node in nodes:
            if node.me.address in self.nodes:  # a node may leave mid-round in later tests
                self.run(node, node.stabilize())
                self.run(node, node.check_predecessor())
                self.run(node, node.fix_fingers())
                if self.partitioned:  # (else nothing is lost but failed nodes: no messages)
                    self.run(node, node.recontact())

    def rounds(self, k: int) -> None:
        for _ in range(k):
            self.round()

    def problems(self) -> list[str]:
        return ring_problems([n.table for n in self.nodes.values()], self.r)

    def converge(self, max_rounds: int = 200) -> int:
        for i in range(max_rounds + 1):
            if not self.problems():
                return i
            self.round()
        raise RuntimeError(f"ring did not converge in {max_rounds} rounds: {self.problems()[:3]}")

    # ---- churn ------------------------------------------------------------------------

    def cut(self, addresses: Iterable[str]) -> None:
        """A network partition: calls between these nodes and the rest fail from now on,
        each side's processes running on, until `heal`."""
        self._moving()
        self.transport.cut = frozenset(addresses)
        self.partitioned = True

    def heal(self) -> None:
        """The partition's link is back (the rounds after it merge the two rings)."""
        self.transport.cut = frozenset()

    def leave(self, address: str) -> None:
        """The node leaves for good: as a live one, its app hands on first (App.leaving)."""
        self._moving()
        node = self.nodes[address]
        leaving = getattr(self.apps[address], "leaving", None)
        if leaving is not None:
            self.run(node, leaving())
        self.run(node, node.leave())
        self.transport.unregister(address)
        del self.nodes[address]
        del self.apps[address]

    def fail(self, address: str) -> None:
        """Crash: the node vanishes without a word; its keys are lost with it."""
        self._moving()
        self.transport.unregister(address)
        del self.nodes[address]
        del self.apps[address]

    # ---- queries ----------------------------------------------------------------------

    def lookup(self, address: str, key: int, verify: bool = False) -> tuple[NodeRef, int]:
        node = self.nodes[address]
        owner_hops: tuple[NodeRef, int] = self.run(node, node.lookup(key, verify))
        return owner_hops

    def oracle(self) -> RingOracle:
        return RingOracle(n.me for n in self.nodes.values())

    @contextmanager
    def instant_lookups(self) -> Iterator[None]:
        """Lookups answered from the oracle, without messages, while the ring stands still
        (no node joins, leaves or fails meanwhile): on a converged ring, what a lookup would
        find (tests check). For placing many keys whose lookups nothing measures, as
        build_instant sets many tables."""
        owner = self.oracle().owner
        for node in self.nodes.values():
            node.owner_of = owner
        self._standing = True
        try:
            yield
        finally:
            self._standing = False
            for node in self.nodes.values():
                node.owner_of = None

    def _moving(self) -> None:
        if self._standing:
            raise RuntimeError("the ring's membership changed while its lookups were instant")
