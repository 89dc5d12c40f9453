"""The home's log (cqengine.core.homelog): a member's rules, and a leader's epochs, appends
and commits on a simulated network that drops messages, cuts links, pauses and restarts
nodes, with several nodes trying to lead at once (as a ring's nodes do while it churns).

Whatever happens, what is committed is committed for good and alike everywhere (State
Machine Safety, as Raft names it): two copies hold the same entry at every position both
know committed; an entry known committed is at its position in every later leader's copy;
an epoch has at most one leader. And when the network is whole again, a leader commits."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import partial

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from chord.protocol.calls import Call, Fanout, NotWaited, PeerUnreachable
from chord.protocol.routing import NodeRef
from cqengine.core.homelog.leader import Leader, NoMajority, Superseded, majority
from cqengine.core.homelog.log import EPOCH, Log
from cqengine.proto import cqengine_pb2 as pb

KEY = 7
DELIVER = pb.LOG_DELIVER


def entry(epoch: int, data: bytes = b"") -> pb.LogEntry:
    return pb.LogEntry(epoch=epoch, kind=DELIVER, data=data)


# ---- a member's rules ------------------------------------------------------------------


def test_a_member_promises_only_an_epoch_above_its_promise_or_the_same_candidate_again():
    log = Log(KEY)
    assert log.on_promise(pb.LogPromise(epoch=2, candidate="a")).promised
    assert log.on_promise(pb.LogPromise(epoch=2, candidate="a")).promised  # sent again
    assert not log.on_promise(pb.LogPromise(epoch=2, candidate="b")).promised
    refused = log.on_promise(pb.LogPromise(epoch=1, candidate="c"))
    assert not refused.promised and refused.epoch == 2
    assert log.on_promise(pb.LogPromise(epoch=3, candidate="b")).promised
    probed = log.on_promise(pb.LogPromise(epoch=9, candidate="d", probe=True))
    assert not probed.promised and probed.epoch == 3 and log.promised_to == "b"


def test_a_member_takes_entries_only_after_one_it_holds_and_never_from_a_lower_epoch():
    log = Log(KEY)
    first = pb.LogAppend(epoch=1, prev=0, entries=[entry(1, b"a"), entry(1, b"b")], commit=1)
    assert log.on_append(first).taken and log.last == 2 and log.committed == 1
    # a gap: it holds nothing at 5; the leader is told to send after its committed entries
    gap = log.on_append(pb.LogAppend(epoch=1, prev=5, prev_epoch=1, entries=[entry(1)]))
    assert not gap.taken and gap.last == 1
    # sent again: nothing changes
    assert log.on_append(first).taken and [e.data for e in log.entries] == [b"a", b"b"]
    # a later epoch's leader replaces what was never committed
    later = pb.LogAppend(epoch=3, prev=1, prev_epoch=1, entries=[entry(3, b"c")], commit=2)
    assert log.on_append(later).taken
    assert [(e.epoch, e.data) for e in log.entries] == [(1, b"a"), (3, b"c")]
    assert log.committed == 2 and log.promised == 3
    # the earlier leader is fenced: refused, told the epoch that replaced it
    stale = log.on_append(pb.LogAppend(epoch=1, prev=2, prev_epoch=1, entries=[entry(1)]))
    assert not stale.taken and stale.epoch == 3
    assert log.on_promise(pb.LogPromise(epoch=3, candidate="x")).config_epoch == 0


def test_majority_of_a_member_set():
    assert majority(["a", "b"], ["a", "b", "c"]) and not majority(["a"], ["a", "b", "c"])
    assert not majority(["a", "b"], ["a", "b", "c", "d"]) and majority(["x"], [])


# ---- a simulated network ----------------------------------------------------------------


@dataclass
class Node:
    address: str
    log: Log
    leader: Leader
    paused: bool = False


@dataclass
class Net:
    """Nodes that answer one another's calls unless a link is cut, one of them is paused,
    or the request or its reply is lost."""

    rng: random.Random
    nodes: dict[str, Node] = field(default_factory=dict)
    cut: set[frozenset[str]] = field(default_factory=set)
    loss: float = 0.0
    committed: dict[int, pb.LogEntry] = field(default_factory=dict)  # every commit seen
    # a call resumed without its reply (a live fanout's, once enough answered) reaches its
    # node later, after calls made since: so often, and those on their way
    late: float = 0.0
    on_way: list[tuple[str, Call]] = field(default_factory=list)
    # the node that made the log's key (at random, for its first subscription) may begin
    # it, until its process dies: then nothing of it was kept, or its copy says what was
    maker: str = ""

    def add(self, address: str) -> Node:
        log = Log(KEY)
        node = self.nodes[address] = Node(address, log, self._leader(address, log))
        return node

    def _leader(self, address: str, log: Log) -> Leader:
        return Leader(log, address, lambda a: NodeRef(0, a))

    def restart(self, address: str) -> None:
        """The process dies and starts again: its log (on disk) stays, its leading goes."""
        node = self.nodes[address]
        node.leader = self._leader(address, node.log)
        if address == self.maker:
            self.maker = ""

    def reaches(self, src: str, dst: str) -> bool:
        return (
            frozenset((src, dst)) not in self.cut
            and not self.nodes[src].paused
            and not self.nodes[dst].paused
        )

    def call(self, src: str, call: Call, late=None):
        """`late`: a fanout's, told the reply of a call it did not wait for."""
        dst = call.peer.address
        if not self.reaches(src, dst) or self.rng.random() < self.loss:
            return PeerUnreachable(call.peer, "UNAVAILABLE")
        if self.rng.random() < self.late:
            self.on_way.append((src, call, late))
            return NotWaited(call.peer)  # as chord.protocol.driver's fanout
        return self.handle(call)

    def arrive(self) -> None:
        """A call on its way reaches its node (any of them: they pass one another), if it
        still can; its reply reaches the fanout's `late`, unless it is lost."""
        src, call, late = self.on_way.pop(self.rng.randrange(len(self.on_way)))
        reply = PeerUnreachable(call.peer, "UNAVAILABLE")
        if self.reaches(src, call.peer.address):
            reply = self.handle(call)
            if self.rng.random() < self.loss or not self.reaches(src, call.peer.address):
                reply = PeerUnreachable(call.peer, "reply lost")
        if late is not None:
            late(reply)

    def handle(self, call: Call):
        log = self.nodes[call.peer.address].log
        handler = {
            "LogPromise": log.on_promise,
            "LogAppend": log.on_append,
            "LogFetch": log.on_fetch,
        }
        reply = handler[call.method](call.request)
        if self.rng.random() < self.loss:  # taken, but the reply is lost
            return PeerUnreachable(call.peer, "DEADLINE_EXCEEDED")
        return reply

    def check(self) -> None:
        """Safety, after every step (of an entry folded into a checkpoint, its epoch)."""
        logs = [n.log for n in self.nodes.values()]
        for log in logs:
            for position in range(log.base + 1, log.committed + 1):
                seen = self.committed.setdefault(position, log.entry(position))
                assert log.entry(position) == seen, f"position {position} committed twice"
        for log in logs:  # a committed entry is in every copy that holds that far alike
            for position, e in self.committed.items():
                if log.committed >= position and position > log.base:
                    assert log.entry(position) == e
                elif position == log.base:
                    assert log.checkpoint.epoch == e.epoch
        leaders = [n.leader for n in self.nodes.values() if n.leader.leading]
        epochs = [leader.epoch for leader in leaders]
        assert len(epochs) == len(set(epochs)), f"two leaders of one epoch: {epochs}"


class Op:
    """An operation of a node's leader, run a step at a time: a step sends what it yielded
    last (answered by the network then), a later step hands it the answers. Other
    operations' steps come between: an answer reaches its leader when the state it was
    made from may have moved on (its own copy of the log most of all)."""

    def __init__(self, net: Net, address: str, gen, what: str) -> None:
        self.net, self.address, self.gen, self.what = net, address, gen, what
        self.pending = None  # what it yielded last, not yet answered
        self.answers = None  # the answers to it, on their way back
        self.result = None
        self.error: Exception | None = None
        self.done = False
        self._resume(None)

    def _resume(self, value) -> None:
        try:
            if isinstance(value, BaseException):
                self.pending = self.gen.throw(value)
            else:
                self.pending = self.gen.send(value)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
        except (Superseded, NoMajority) as e:
            self.done, self.error = True, e

    def step(self) -> None:
        net, src = self.net, self.address
        if net.nodes[src].paused:
            return  # a paused process does nothing
        if self.answers is not None:
            answers, self.answers = self.answers, None
            self._resume(answers[0])
            return
        y = self.pending
        answers = (
            [net.call(src, c, y.late and partial(y.late, i)) for i, c in enumerate(y.calls)]
            if isinstance(y, Fanout)
            else net.call(src, y),
        )
        if net.rng.random() < 0.2:
            self._resume(answers[0])  # answered at once
        else:
            self.answers = answers


ADDRESSES = ["n0", "n1", "n2", "n3", "n4"]


def members_now(rng: random.Random, leader: str) -> list[str]:
    """The member set a ring would give: the leader and some of the others."""
    others = [a for a in ADDRESSES if a != leader]
    return sorted([leader, *rng.sample(others, rng.choice([2, 4]))])


def run(seed: int, steps: int, loss: float, churn: float, late: float = 0.0) -> Net:
    rng = random.Random(seed)
    net = Net(rng, loss=loss, maker="n0")
    for a in ADDRESSES:
        net.add(a)
    # n0 makes the key and begins its log on a whole network; then anything goes
    first = Op(net, "n0", net.nodes["n0"].leader.start(ADDRESSES[:3], True), "start")
    lossy, net.loss = net.loss, 0.0
    while not first.done:
        first.step()
    net.loss, net.late = lossy, late
    net.check()
    ops: list[Op] = []
    n = 0
    for _ in range(steps):
        roll = rng.random()
        if roll < churn:  # the network changes
            what = rng.choice(["cut", "heal", "pause", "resume", "restart", "whole", "fold"])
            a, b = rng.sample(ADDRESSES, 2)
            log = net.nodes[a].log
            if what == "fold" and log.committed > log.base:  # its committed entries go
                log.compact(pb.LogCheckpoint(position=rng.randint(log.base + 1, log.committed)))
            elif what == "cut":
                net.cut.add(frozenset((a, b)))
            elif what == "heal":
                net.cut.discard(frozenset((a, b)))
            elif what == "pause":
                net.nodes[a].paused = True
            elif what == "resume":
                net.nodes[a].paused = False
            elif what == "restart":
                net.restart(a)
                ops = [o for o in ops if o.address != a]  # its operations died with it
            else:
                net.cut.clear()
                for node in net.nodes.values():
                    node.paused = False
        elif roll < churn + 0.15 or not ops:  # a node comes to think it serves the key
            a = rng.choice(ADDRESSES)
            if any(o.address == a for o in ops):
                continue  # a node runs one operation of a log at a time
            leader = net.nodes[a].leader
            if leader.leading and rng.random() < 0.7:
                n += 1
                ops.append(Op(net, a, leader.append([entry(leader.epoch, b"%d" % n)]), "append"))
            else:
                new = a == net.maker and not net.nodes[a].log.last
                ops.append(Op(net, a, leader.start(members_now(rng, a), new), "start"))
        elif net.on_way and rng.random() < 0.3:
            net.arrive()
        else:  # an operation under way goes one step further
            op = rng.choice(ops)
            op.step()
        ops = [o for o in ops if not o.done]
        net.check()
    return net


@hsettings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32),
    loss=st.sampled_from([0.0, 0.05, 0.2]),
    churn=st.sampled_from([0.02, 0.1, 0.3]),
)
# runs where a candidate's fetch was answered before a later leader wrote to its copy, and
# came back after: without Leader._recover's look at its own promise, the first commits a
# position twice, the second leaves a copy committed past its end (7 runs in 900 fail)
@example(seed=54, loss=0.0, churn=0.1)
@example(seed=86, loss=0.05, churn=0.3)
def test_what_is_committed_stays_committed_alike_whatever_the_network_does(seed, loss, churn):
    net = run(seed, 400, loss, churn)
    assert net.committed  # the run committed something: the property was put to the test


@hsettings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32), late=st.sampled_from([0.1, 0.3]), churn=st.sampled_from([0.02, 0.1])
)
def test_calls_not_waited_for_arriving_late_and_out_of_order_commit_alike(seed, late, churn):
    """A live leader's fanout resumes once a majority answered; the other calls go on, and
    reach their members after calls made since, in any order, or not at all: what is
    committed is still committed for good and alike everywhere."""
    net = run(seed, 400, 0.05, churn, late)
    assert net.committed


@pytest.mark.parametrize("trouble", [None, "lost", "overtaken"])
def test_a_member_never_waited_for_is_sent_what_follows_and_kept_up_to_date(trouble):
    """n2 is the slowest member: a live fanout resumes once n0 and n1 answered, and n2's
    appends go on unwaited, each round. A round sends it only the entries after those on
    their way (not all since it last answered), and their replies, coming late, tell the
    leader how far n2 holds the log. In round 3 one goes wrong: lost (its call fails,
    late: the next round sends it again with what follows), or overtaken by the next
    round's (n2 refuses that one, which follows what it lacks; the refusal, heard late,
    has the leader send it everything from its commit on). Either way n2 is caught up,
    though never waited for."""
    net = Net(random.Random(1), maker="n0")
    for a in ADDRESSES[:3]:
        net.add(a)
    leader = net.nodes["n0"].leader
    finish(Op(net, "n0", leader.start(ADDRESSES[:3], True), "start"))
    sent_to_n2: list[pb.LogAppend] = []
    call = net.call

    def slow_n2(src, c, late=None):
        if c.peer.address != "n2":
            return call(src, c, late)
        sent_to_n2.append(c.request)
        net.on_way.append((src, c, late))
        return NotWaited(c.peer)

    net.call = slow_n2
    held = None
    for i in range(8):
        op = finish(Op(net, "n0", leader.append([entry(leader.epoch, b"%d" % i)]), "append"))
        assert op.error is None  # n0 and n1: a majority
        if i == 3 and trouble == "lost":
            src, c, late = net.on_way.pop()
            late(PeerUnreachable(c.peer, "UNAVAILABLE"))  # it never reached n2
        if i == 3 and trouble == "overtaken":
            held = net.on_way.pop()
        while net.on_way:
            net.arrive()
        if i == 4 and held is not None:
            net.on_way.append(held)  # round 3's arrives after round 4's
            net.arrive()
    sizes = [len(r.entries) for r in sent_to_n2]
    if trouble is None:
        assert sizes == [1] * 8  # each round what follows: nothing sent twice
    elif trouble == "lost":
        assert sizes == [1, 1, 1, 1, 2, 1, 1, 1]  # the lost one again, with what follows
    else:
        # round 4's refused (heard late): round 5 sends from where n2 matches
        assert sizes[:5] == [1] * 5 and sizes[5] > 1 and sizes[6:] == [1, 1]
    n0, n2 = net.nodes["n0"].log, net.nodes["n2"].log
    assert n2.last == n0.last
    assert [n2.entry(p) for p in range(1, n0.last + 1)] == [
        n0.entry(p) for p in range(1, n0.last + 1)
    ]
    net.check()


@pytest.mark.parametrize("seed", range(8))
def test_a_leader_commits_once_the_network_is_whole(seed):
    """After any history of cuts, pauses, restarts and rival leaders, a node that serves
    the key alone, on a whole network, starts an epoch and commits (retrying as a ring's
    node does: after a rival's higher epoch, with a higher one)."""
    net = run(seed, 300, 0.1, 0.3)
    net.cut.clear()
    net.loss = 0.0
    for node in net.nodes.values():
        node.paused = False
    address = ADDRESSES[seed % len(ADDRESSES)]
    node = net.nodes[address]
    members = sorted(ADDRESSES[:3] if address in ADDRESSES[:3] else [address, *ADDRESSES[:2]])
    for _ in range(6):  # a change left half-way is carried through first: start again
        op = Op(net, address, node.leader.start(members), "start")
        while not op.done:
            op.step()
        net.check()
        if op.error is None and node.leader.members == members:
            break
    assert op.error is None and node.leader.members == members, op.error
    op = Op(net, address, node.leader.append([entry(node.leader.epoch, b"last")]), "append")
    while not op.done:
        op.step()
    net.check()
    assert op.error is None and node.log.committed == node.log.last
    assert node.log.entry(node.log.last).data == b"last"
    # what was committed before is still there, at its place (or folded into a checkpoint)
    for position, e in net.committed.items():
        if position > node.log.base:
            assert node.log.entry(position) == e
    assert node.log.entry(node.log.last - 1).kind == EPOCH  # the epoch began right before


def finish(op: Op) -> Op:
    while not op.done:
        op.step()
    return op


def test_a_paused_leader_is_fenced_and_a_cut_minority_commits_nothing():
    """n0 leads epoch 1 of {n0, n1, n2}. Cut off from the others, it appends: nothing is
    committed (the minority holds). n1 takes over with epoch 2, and its entries are
    committed. Back, n0 is refused (fenced), and its uncommitted entry is replaced by the
    majority's log when it follows again."""
    net = Net(random.Random(0), maker="n0")
    for a in ADDRESSES[:3]:
        net.add(a)
    members = ADDRESSES[:3]
    n0, n1 = net.nodes["n0"], net.nodes["n1"]
    assert finish(Op(net, "n0", n0.leader.start(members, True), "start")).error is None
    net.cut |= {frozenset(("n0", "n1")), frozenset(("n0", "n2"))}
    held = finish(Op(net, "n0", n0.leader.append([entry(1, b"minority")]), "append"))
    assert isinstance(held.error, NoMajority) and n0.log.committed == 1 and n0.log.last == 2
    assert finish(Op(net, "n1", n1.leader.start(members), "start")).error is None
    assert n1.leader.epoch == 2
    taken = finish(Op(net, "n1", n1.leader.append([entry(2, b"majority")]), "append"))
    assert taken.error is None and n1.log.committed == 3
    net.cut.clear()
    fenced = finish(Op(net, "n0", n0.leader.append([entry(1, b"late")]), "append"))
    assert isinstance(fenced.error, Superseded) and fenced.error.epoch == 2
    assert not n0.leader.leading
    # n1's next append brings n0 into line: its uncommitted entries are gone
    assert finish(Op(net, "n1", n1.leader.append([entry(2, b"next")]), "append")).error is None
    assert [e.data for e in n0.log.entries] == [e.data for e in n1.log.entries]
    assert b"minority" not in [e.data for e in n0.log.entries]
    net.check()


def test_a_candidate_whose_copy_follows_a_later_leader_meanwhile_replaces_none_of_it():
    """A candidate asks for promises, then fetches the entries it lacks from the member
    furthest on. While the fetch is on its way, its own copy takes a later epoch's
    entries from that epoch's leader, and learns them committed. The fetch's answer must
    not replace them: the candidate is superseded, and its copy keeps every entry it knows
    committed (replaced, a live node's copy once knew a position committed past its end:
    an IndexError, then alerts shown twice, in the namespace test under load)."""
    a, b, c = Log(KEY), Log(KEY), Log(KEY)
    config = pb.LogEntry(epoch=1, kind=EPOCH, members=["a", "b", "c"])
    for copy in (a, b, c):  # epoch 1: its entry, committed everywhere
        copy.on_append(pb.LogAppend(epoch=1, prev=0, entries=[config], commit=1))
    b.on_append(pb.LogAppend(epoch=1, prev=1, prev_epoch=1, entries=[entry(1, b"y")], commit=1))
    leader = Leader(a, "a", lambda address: NodeRef(0, address))
    start = leader.start(["a", "b", "c"])
    asked = next(start)  # the promises of b and c
    assert isinstance(asked, Fanout)
    request = asked.calls[0].request
    fetch = start.send(
        [{"b": b, "c": c}[call.peer.address].on_promise(request) for call in asked.calls]
    )
    assert isinstance(fetch, Call) and fetch.peer.address == "b"  # b's log is furthest on
    answer = b.on_fetch(fetch.request)
    # meanwhile a later leader (epoch 5) appends to a, and a learns it committed
    later = [entry(5, b"p"), entry(5, b"q"), entry(5, b"r")]
    assert a.on_append(pb.LogAppend(epoch=5, prev=1, prev_epoch=1, entries=later, commit=4)).taken
    with pytest.raises(Superseded):
        start.send(answer)
    assert a.committed == 4 and a.last == 4
    assert [e.data for e in a.entries] == [b"", b"p", b"q", b"r"]
