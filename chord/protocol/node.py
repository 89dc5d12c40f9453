"""The Chord node as I/O-free protocol code.

Incoming requests are handled by `handle(method, request) -> reply`, which only reads and
updates local state. Operations that talk to other nodes (join, stabilize, fix_fingers,
check_predecessor, leave, lookup) are generators: each yields a `Call` and is resumed with
the reply, or has `PeerUnreachable` thrown into it (their vocabulary: chord.protocol.calls).
A driver (chord.protocol.driver) runs them over a transport: synchronously in the simulator,
with asyncio on a live node. The algorithms therefore exist once, whatever carries the
messages.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from chord.proto import chord_pb2 as pb
from chord.protocol import checks, floor, versions
from chord.protocol.calls import Call, Op, PeerUnreachable, Refused
from chord.protocol.floor import Floor
from chord.protocol.ids import BITS, in_open, in_open_closed
from chord.protocol.messages import items_from_pb, items_to_pb, to_info, to_ref
from chord.protocol.routing import SUCCESSORS, NodeRef, RoutingTable
from chord.protocol.store import KeyStore, SortedKeyStore

log = logging.getLogger("chord.protocol.node")

LOST_KEPT = 16  # unreachable nodes a node remembers, to find again after a partition (recontact)
LOST_TRIES = 60  # unanswered recontacts before a lost node is given up (some 15 min live)
LOST_WAIT = 8  # rounds at most between two recontacts of one node (the wait doubles)


class JoinError(Exception):
    """Joining the ring failed for a reason the operator must fix."""


RegionListener = Callable[[NodeRef | None, NodeRef | None], None]


class ChordNode:
    def __init__(
        self,
        me: NodeRef,
        r: int = SUCCESSORS,
        store: KeyStore | None = None,
        seed: int | None = None,
        protocol: int = versions.PROTOCOL,
    ) -> None:
        """`protocol`: the one I speak (another only in tests of mixed versions)."""
        self.table = RoutingTable(me, r=r)
        self.floor = Floor(protocol)  # the oldest protocol of the ring (chord.protocol.floor)
        self.store: KeyStore = store if store is not None else SortedKeyStore()
        self.rng = random.Random(seed if seed is not None else me.id)
        self.region_listeners: list[RegionListener] = []
        self.received_listeners: list[Callable[[], None]] = []  # told when keys are handed me
        self.successor_listeners: list[Callable[[], None]] = []  # told my successors changed
        # a leaver handed me keys that may be my predecessor's: the next Notify hands them on
        self.leaver_keys = False
        self.refused = (
            0  # messages refused as malformed (chord.protocol.checks): they changed nothing
        )
        # what is wrong with keys handed to me (a Leave's, a Notify reply's), as the app
        # that stores them judges (None: nothing, or no app to judge)
        self.items_problem: Callable[[list[tuple[int, bytes]]], str | None] = lambda items: None
        # handed my region by my successor (a Notify reply) since I joined, or alone: what
        # the ring held for my keys while I was away has come back
        self.settled = False
        # nodes I forgot because they did not answer, the latest LOST_KEPT: after a network
        # partition they may be a ring of their own that only `recontact` finds again
        # each with [recontacts it left unanswered, rounds to wait before the next]
        self.lost: dict[NodeRef, list[int]] = {}
        # told a node is lost (newly: not already), and that a lost node is found again (in
        # my tables, or my ring's again): what was sent while it was apart may not have
        # reached its side
        self.lost_listeners: list[Callable[[NodeRef], None]] = []
        self.found_listeners: list[Callable[[NodeRef], None]] = []
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "FindSuccessor": self._on_find_successor,
            "GetNeighbors": self._on_get_neighbors,
            "Notify": self._on_notify,
            "Ping": lambda req: pb.Empty(),
            "Leave": self._on_leave,
            "GetState": self._on_get_state,
        }

    @property
    def me(self) -> NodeRef:
        return self.table.me

    def uses(self, feature: str) -> bool:
        """Whether every member of the ring, as far as I can tell, speaks the protocol that
        brought this feature (chord.protocol.versions.FEATURES), so that I may use it."""
        return self.floor.uses(versions.FEATURES[feature])

    # ---- incoming requests: local state only ------------------------------------------

    def handle(self, method: str, request: Any) -> Any:
        try:
            handler = self.handlers[method]
        except KeyError:
            raise ValueError(f"no handler for {method}") from None
        why = checks.invalid(self, method, request)
        if why is not None:
            self.refused += 1
            raise Refused(f"{method}: {why}")
        return handler(request)

    def step(self, key: int, avoid: frozenset[int] = frozenset()) -> tuple[bool, NodeRef]:
        """One lookup step: (True, owner) when I can tell, else (False, next node to ask)."""
        if not avoid:
            return self.table.piecewise("step", self._step)(key)
        return self._step(key, avoid)

    def _step(self, key: int, avoid: frozenset[int] = frozenset()) -> tuple[bool, NodeRef]:
        t = self.table
        if t.owns(key):
            return True, t.me
        s = t.successor_covering(key, avoid)
        if s is not None:
            return True, s
        hop = t.next_hop(key, avoid)
        if hop is None or hop == t.me:
            return True, t.me
        return False, hop

    def _on_find_successor(self, req: pb.FindSuccessorRequest) -> pb.FindSuccessorReply:
        done, node = self.step(req.key, frozenset(req.avoid))
        return pb.FindSuccessorReply(done=done, node=to_info(node))

    def _on_get_neighbors(self, req: pb.Empty) -> pb.NeighborsReply:
        t = self.table
        reply = pb.NeighborsReply(successors=[to_info(s) for s in t.successors])
        reply.floor, reply.floor_hops = self.floor.version, self.floor.hops
        if t.predecessor is not None:
            reply.predecessor.CopyFrom(to_info(t.predecessor))
        return reply

    def _on_notify(self, req: pb.NotifyRequest) -> pb.NotifyReply | Op:
        n = to_ref(req.node)
        t = self.table
        if n == t.me:
            return pb.NotifyReply()
        if t.predecessor not in (None, n) and not in_open(n.id, t.predecessor.id, t.me.id):
            # n comes before my predecessor: is that one still there? (n may have found it
            # dead; until check_predecessor does too, its keys would have no owner)
            return self._notified_past(n, req.settled)
        return self._notified(n, req.settled)

    def _notified_past(self, n: NodeRef, settled: bool) -> Op:
        pred = self.table.predecessor
        if pred is None:  # forgotten since the Notify came: n may simply take its place
            return self._notified(n, settled)
        try:
            yield Call(pred, "Ping", pb.Empty())
        except PeerUnreachable:
            if self.table.predecessor == pred:
                self.forget(pred)
        return self._notified(n, settled)

    def _notified(self, n: NodeRef, settled: bool) -> pb.NotifyReply:
        t = self.table
        new = False
        if t.predecessor is None or in_open(n.id, t.predecessor.id, t.me.id):
            new = t.predecessor != n
            self._set_predecessor(n)
        if t.alone():
            t.set_successors([n])
        if t.predecessor != n:
            return pb.NotifyReply()
        if settled and not new and self.store.copies and not self.leaver_keys:
            return pb.NotifyReply()  # it has its region; reconciliation keeps it up to date
        self.leaver_keys = False
        # Everything not in (n, me] belongs to n or further back; n passes on what is not its own.
        return pb.NotifyReply(items=items_to_pb(self.store.take_range(t.me.id, n.id)))

    def _on_leave(self, req: pb.LeaveRequest) -> pb.Empty:
        gone = to_ref(req.leaving)
        t = self.table
        # Keep the leaver's keys even if a newer node now sits between us: the next Notify
        # from that node hands it whatever is not mine, so nothing is lost to the race.
        self.store.put_items(items_from_pb(req.items))
        self.leaver_keys = True
        if t.predecessor == gone:
            pred = to_ref(req.predecessor) if req.HasField("predecessor") else None
            self._set_predecessor(None if pred in (None, gone) else pred)
        if t.successor == gone and req.successors:
            t.set_successors([to_ref(s) for s in req.successors if to_ref(s) != gone])
        self.forget(gone)
        self.lost.pop(gone, None)  # it left: there is no ring of it to find again
        return pb.Empty()

    def _on_get_state(self, req: pb.Empty) -> pb.StateReply:
        t = self.table
        reply = pb.StateReply(
            node=to_info(t.me),
            successors=[to_info(s) for s in t.successors],
            fingers=[to_info(f or t.me) for f in t.fingers],
            keys=len(self.store),
        )
        if t.predecessor is not None:
            reply.predecessor.CopyFrom(to_info(t.predecessor))
        return reply

    def forget(self, dead: NodeRef) -> None:
        """Drop a node found dead from my table (my region listeners hear if it was my
        predecessor)."""
        if self.table.predecessor == dead:
            self._set_predecessor(None)
        self.table.forget(dead)
        if dead != self.me:
            new = self.lost.pop(dead, None) is None
            self.lost[dead] = [0, 0]
            while len(self.lost) > LOST_KEPT:
                del self.lost[next(iter(self.lost))]  # the longest lost
            if new:
                for listener in self.lost_listeners:
                    listener(dead)

    def _set_predecessor(self, pred: NodeRef | None) -> None:
        old = self.table.predecessor
        self.table.predecessor = pred
        if old != pred:
            for listener in self.region_listeners:
                listener(old, pred)

    # ---- operations: generators of Calls ---------------------------------------------

    def lookup(self, key: int, verify: bool = False) -> Op:
        """Iterative lookup; returns (owner, hops), hops counting the nodes asked.

        A dead hop is routed around. With `verify` the answer is pinged too, so a lookup
        made before maintenance has noticed a crash still names a live owner.
        """
        path: list[NodeRef] = []
        avoid: set[int] = set()
        hops = 0
        while True:
            done, node = self.step(key, frozenset(avoid))
            while not done:
                try:
                    request = pb.FindSuccessorRequest(key=key, avoid=sorted(avoid))
                    reply = yield from self._ask(node, "FindSuccessor", request)
                except PeerUnreachable:
                    self._avoid(node, avoid)
                    if not path:
                        break
                    node = path.pop()  # ask the last live node on the path again
                    continue
                hops += 1
                path.append(node)
                done, node = reply.done, to_ref(reply.node)
            if not done:
                continue  # the first hop died: start again from my own table
            if not verify or node == self.me:
                return node, hops
            try:
                yield Call(node, "Ping", pb.Empty())
                return node, hops
            except PeerUnreachable:
                self._avoid(node, avoid)
                path = []

    def _avoid(self, dead: NodeRef, avoid: set[int]) -> None:
        avoid.add(dead.id)
        self.forget(dead)

    def join(self, bootstrap: NodeRef) -> Op:
        """Find my successor through any ring member; stabilize does the rest. Nodes that
        still list me from before (I left, or failed, and come back at my address) are
        asked to route around me: I am not my own successor."""
        request = pb.FindSuccessorRequest(key=self.me.id, avoid=[self.me.id])
        try:
            node = bootstrap
            while True:
                reply = yield from self._ask(node, "FindSuccessor", request)
                done, node = reply.done, to_ref(reply.node)
                if done:
                    break
        except PeerUnreachable as e:
            raise JoinError(f"cannot join through {bootstrap.address}: {e}") from None
        if node.id == self.me.id and node != self.me:
            raise JoinError(f"id {self.me.id:016x} is already taken by {node.address}")
        self._set_predecessor(None)
        self.table.set_successors([node])
        yield from self.stabilize()

    def stabilize(self) -> Op:
        """Check my successor's predecessor, refresh my successor list, notify my successor."""
        t = self.table
        before = list(t.successors)
        while True:
            succ = t.successor
            try:
                nbrs = yield from self._ask(succ, "GetNeighbors", pb.Empty())
                break
            except PeerUnreachable:
                self.forget(succ)
                if t.alone():
                    fallback = self._live_fallback_successor()
                    if fallback is None:
                        return
                    t.set_successors([fallback])
        if nbrs.HasField("predecessor"):
            x = to_ref(nbrs.predecessor)
            if x != t.me and in_open(x.id, t.me.id, succ.id):
                try:
                    nbrs = yield from self._ask(x, "GetNeighbors", pb.Empty())
                    succ = x
                except PeerUnreachable:
                    self.forget(x)
        t.set_successors([succ] + [to_ref(s) for s in nbrs.successors])
        if t.alone():
            self.floor.alone()
        else:
            self.floor.heard(nbrs.floor, nbrs.floor_hops, floor.limit(t.me, t.successors))
        if t.successors != before:
            for listener in self.successor_listeners:
                listener()
        if t.alone():
            return
        try:
            notify = pb.NotifyRequest(node=to_info(t.me), settled=self.settled)
            reply = yield Call(t.successor, "Notify", notify)
        except PeerUnreachable:
            return
        items = items_from_pb(reply.items)
        # my successor gave these keys up: of a bad reply the good ones are kept, the bad
        # ones (each checked alone) refused and counted, none half-read
        good = items if self.items_problem(items) is None else self._good(items, t.successor)
        self.store.put_items(good)
        self.settled = True
        for listener in self.received_listeners if good else ():
            listener()

    def _ask(self, peer: NodeRef, method: str, request: Any) -> Op:
        """A call whose reply I route by, checked (chord.protocol.checks): a malformed one is
        refused, counted, and its peer taken as failed for this call (routed around,
        forgotten)."""
        reply = yield Call(peer, method, request)
        why = checks.invalid_reply(self, method, reply)
        if why is None:
            return reply
        self.refused += 1
        log.warning("%s reply of %s refused: %s", method, peer.address, why)
        raise PeerUnreachable(peer, f"a malformed {method} reply: {why}")

    def _good(self, items: list[tuple[int, bytes]], sender: NodeRef) -> list[tuple[int, bytes]]:
        """The items that pass alone; the others refused, counted and logged."""
        problems = [self.items_problem([item]) for item in items]
        bad = [why for why in problems if why is not None]
        self.refused += len(bad)
        log.warning(
            "%d of %d keys handed over by %s refused: %s",
            len(bad),
            len(items),
            sender.address,
            bad[0],
        )
        return [item for item, why in zip(items, problems) if why is None]

    def _live_fallback_successor(self) -> NodeRef | None:
        """All successors dead: the nearest other node I still know of takes over."""
        t = self.table
        known = t.neighbors() + ([t.predecessor] if t.predecessor else [])
        return known[0] if known else None

    def recontact(self) -> Op:
        """Ask the longest lost node I forgot, that is due, for my successor. Chord's
        maintenance only asks nodes in the tables, so after a network partition each side
        forgets the other, and once the link is back the two rings it made would stay
        apart. The lost node's ring names the first of its nodes after me: if that is
        closer than my successor, the two rings are apart and it becomes my successor
        (stabilize then merges the rings, as it takes in a joining node). The lost node
        is dropped once it is in my tables or names my successor (my ring again): not
        when I adopt its answer, which a stabilize under way may yet undo. Unanswered, it
        waits twice as many rounds as before, and after LOST_TRIES it is given up: a
        node that crashed for good is not asked for ever. A node of another ring (the live
        shell tells by the ring's identity) is given up at once: two rings never merge."""
        t = self.table
        for n in [n for n in self.lost if n in t.successors or n in t.fingers]:
            self._found(n)  # it is in my tables again: my ring knows it
        due = [n for n, (_, wait) in self.lost.items() if wait <= 0]
        for counts in self.lost.values():
            counts[1] -= 1  # a round passes
        if not due:
            return
        lost = due[0]
        self.lost[lost] = self.lost.pop(lost)  # to the back: the others get their turn
        request = pb.FindSuccessorRequest(key=self.me.id, avoid=[self.me.id])
        node = lost
        try:
            for _ in range(BITS):  # hops: a ring still in the making might send me round
                reply = yield from self._ask(node, "FindSuccessor", request)
                node = to_ref(reply.node)
                if reply.done:
                    break
            else:
                return
        except PeerUnreachable as e:
            if e.another_ring:  # no ring of mine to merge with there: never ask it again
                self.lost.pop(lost, None)
                return
            state = self.lost.get(lost)
            if state is not None:
                state[0] += 1
                state[1] = min(2 ** state[0], LOST_WAIT)
                if state[0] >= LOST_TRIES:
                    del self.lost[lost]
            return
        if node == t.successor or node == self.me:
            self._found(lost)
        elif in_open(node.id, t.me.id, t.successor.id) or t.alone():
            t.set_successors([node, *t.successors])
            for listener in self.successor_listeners:
                listener()

    def _found(self, node: NodeRef) -> None:
        if self.lost.pop(node, None) is not None:
            for listener in self.found_listeners:
                listener(node)

    def fix_fingers(self) -> Op:
        """Refresh every finger; one lookup serves all fingers whose start it covers."""
        t = self.table
        i = 0
        while i < BITS:
            start = (t.me.id + (1 << i)) & ((1 << BITS) - 1)
            owner, _ = yield from self.lookup(start)
            t.fingers[i] = owner
            i += 1
            # (start, owner] holds the next starts it also owns; none when the owner's id is
            # the start itself (evenly spaced ids), not the whole circle (lo == hi)
            while (
                i < BITS
                and owner.id != start
                and in_open_closed((t.me.id + (1 << i)) & ((1 << BITS) - 1), start, owner.id)
            ):
                t.fingers[i] = owner
                i += 1

    def check_predecessor(self) -> Op:
        pred = self.table.predecessor
        if pred is None:
            return
        try:
            yield Call(pred, "Ping", pb.Empty())
        except PeerUnreachable:
            if self.table.predecessor == pred:
                self._set_predecessor(None)
            self.forget(pred)

    def leave(self) -> Op:
        """Graceful leave: keys and predecessor to my successor (the next in my list, if it
        does not answer), successors to my predecessor."""
        t = self.table
        if t.alone():
            return
        pred = t.predecessor
        items = self.store.take_range(t.me.id, t.me.id)
        to_succ = pb.LeaveRequest(leaving=to_info(t.me), items=items_to_pb(items))
        if pred is not None:
            to_succ.predecessor.CopyFrom(to_info(pred))
        for succ in list(t.successors):
            try:
                yield Call(succ, "Leave", to_succ)
                break
            except PeerUnreachable as e:
                self.forget(succ)
                failed = e
            except BaseException:  # refused (or cancelled): the keys are still mine
                self.store.put_items(items)
                raise
        else:
            self.store.put_items(items)  # nobody took them; keep them for a retry
            raise failed
        succ = t.successor
        if pred is not None and pred != succ:
            try:
                yield Call(
                    pred,
                    "Leave",
                    pb.LeaveRequest(
                        leaving=to_info(t.me), successors=[to_info(s) for s in t.successors]
                    ),
                )
            except PeerUnreachable:
                pass  # its stabilize will find my successor without me
