"""Departures from the home keys' logs: a node that leaves the ring for good first leaves
every log's member set, as Raft removes a server before it goes, while it still answers
(`step_down`); the nodes it asks start epochs without it (`on_leave`). docs/home-log.md,
"Leaving"."""

from __future__ import annotations

import logging

from chord.protocol.calls import Call, Fanout, Op
from chord.protocol.routing import NodeRef
from cqengine.core.basis import limits
from cqengine.core.home.homes import STARTS, Held, HomeLogs, Moved
from cqengine.core.homelog.leader import NoMajority, Superseded
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.homelog")


class Departures:
    """The members leaving a node's logs: itself, or those that tell it they leave."""

    def __init__(self, logs: HomeLogs) -> None:
        self.logs, self.ctx = logs, logs.ctx

    def on_leave(self, request: pb.LogLeaveRequest) -> Op:
        """A member leaves the ring for good: the logs it names that I lead, or serve and
        do not lead yet (their leader left or stopped serving them: `step_down` asks me
        then), start an epoch of a member set without it, while it still answers
        (its vote may be one of the majority of the set it leaves)."""
        self.logs.left[request.member] = self.ctx.host.now()
        reply = pb.LogLeaveReply()
        why = f"keeps {request.member}, which leaves"
        for key in request.keys:
            leader = yield from self._lead(key, why)
            if leader is not None and request.member not in leader.members:
                reply.moved.append(key)
        return reply

    def _lead(self, key: int, why: str) -> Op:
        """A key I serve, led now in an epoch of the member set it has now (whether I led
        it or not yet: as a client's claim would); the leader, or None if I do not serve it
        or cannot lead it now (logged: `why`)."""
        if not key or not self.ctx.serves(key):
            return None
        try:
            return (yield from self.logs.lead(key))
        except (Held, Moved) as e:
            log.warning("key %016x %s: %s", key, why, e)
            return None

    def step_down(self) -> Op:
        """I leave the ring for good, and no log keeps me as a member (as Raft removes a
        server before it goes), while I still answer: the leader of each log I am a
        member of is asked to start an epoch of a set without me (LogLeave), and each log
        I lead and serve starts one of my next successors. The successor that serves my
        key once I have left is a member of it and holds a copy, and members that leave
        after me take away no vote of a set I was in: a log keeps its majority however
        many of its members leave one after the other, as long as each leaves this way.

        A log I lead but no longer serve (a node joined before me, no member) goes to the
        set that node will have once I am gone, that node among them; a log whose leader
        did not move it (it does not lead it now: it left, or lost the key to a node that
        joined) is asked of the node serving its key and of its other members, and the
        one serving it leads it in a set without me (Departures.on_leave). Else a majority
        of its members could leave while no node leads it, and none ever could again
        (bench_churn saw a key's subscriptions served nowhere for good)."""
        ctx = self.ctx
        if ctx.chord.table.alone():
            return
        self.logs.leaving = True
        me = ctx.me.address
        by_leader: dict[str, list[int]] = {}
        for key, copy in self.logs.logs.items():  # the logs another leads with me a member
            if self.logs.leader_of(key) is not None or copy.promised_to in ("", me):
                continue
            config = copy.config()
            if config is not None and me in config.members:
                by_leader.setdefault(copy.promised_to, []).append(key)
        left_in = {k for keys in by_leader.values() for k in keys}
        left_in -= yield from self._leave(by_leader)
        moving = []  # led here, served by a node that joined before me, no member
        for key in sorted(self.logs.leaders):
            if self.logs.leader_of(key) is None:
                continue
            if not ctx.serves(key):
                moving.append(key)
            else:
                yield from self._lead(key, "keeps me in its log as I leave")
        for key in moving:
            owner = yield from self._server(key)
            if owner is not None:
                yield from self._move(key, owner)
        # the logs no leader moved: to the node that serves each, and to its other members
        # (the node serving it is one, though the ring's lookups may not find it yet)
        by_node: dict[str, list[int]] = {}
        for key in sorted(left_in):
            owner = yield from self._server(key)
            config = self.logs.logs[key].config()
            others = set(config.members if config is not None else ()) - {me}
            for address in sorted(others | ({owner.address} if owner is not None else set())):
                by_node.setdefault(address, []).append(key)
        yield from self._leave(by_node)

    def _server(self, key: int) -> Op:
        """The node that serves a key as I leave (None: I do, as far as the ring knows)."""
        ctx = self.ctx
        owner, _ = yield from ctx.chord.lookup(key, verify=True)
        if owner == ctx.me:  # (tables routing to me do not know yet of the node that
            owner = ctx.chord.table.predecessor  # joined before me: my predecessor)
        return owner if owner != ctx.me else None

    def _move(self, key: int, owner: NodeRef) -> Op:
        """A key I lead but no longer serve, as I leave: its log goes to the set the node
        serving it will have once I am gone (that node and my next successors), so that
        it holds a copy and takes the key over as a member of its log."""
        count, leader = self.ctx.settings.members, self.logs.leaders[key]
        out = self.logs.departed() | {self.ctx.me.address, owner.address}
        others = [s.address for s in self.ctx.chord.table.successors if s.address not in out]
        members = [owner.address, *others[: count - 1]]
        try:
            for _ in range(STARTS):  # (a change not yet through is carried through first)
                yield from leader.start(members)
                if set(leader.members) == set(members):
                    break
        except (Superseded, NoMajority) as e:
            log.warning("key %016x not moved to %s as I leave: %s", key, owner.address, e)
        finally:
            self.logs.apply(key)

    def _leave(self, by_node: dict[str, list[int]]) -> Op:
        """LogLeave to each of these nodes, naming its keys: the keys moved to a set
        without me."""
        me, step = self.ctx.me.address, limits.LOG_LEAVE_KEYS
        calls = tuple(
            Call(
                self.ctx.peer(a), "LogLeave", pb.LogLeaveRequest(member=me, keys=keys[i : i + step])
            )
            for a, keys in sorted(by_node.items())
            for i in range(0, len(keys), step)
        )
        if not calls:
            return set()
        replies = yield Fanout(calls)
        return {k for r in replies if isinstance(r, pb.LogLeaveReply) for k in r.moved}
