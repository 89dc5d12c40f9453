"""The home alone on the home log (cqengine.core.home.home, Settings.home_log), at a node of a
fake ring: its key's log is a real HomeLogs handed to it as the node hands it, and the log's
other members are real HomeLogs at fake nodes of their own, which the home's calls to them
reach. A DN's batch and a subscriber's acknowledgements go into the key's log and change
the mailboxes only once a majority of its members holds them; a home without a majority
holds a batch (the DN keeps it) and refuses acknowledgements, and numbers nothing."""

from __future__ import annotations

import re
from collections import Counter
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fakes import FakeNode, RecordingCopier, node_at, ring_of, ring_settings

from chord.protocol.calls import Call, Op
from chord.protocol.driver import drive
from cqengine.core.alerts.batches import alert_batch
from cqengine.core.alerts.mailboxes import Subscription, home_record, token_hash
from cqengine.core.basis.errors import MINORITY, EngineError
from cqengine.core.home.home import Home
from cqengine.core.home.homes import HomeLogs
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

SUBS = [11, 12, 13]
DOCNOS = [f"d{i}" for i in range(6)]
LOG_CALLS = {"LogPromise": "on_promise", "LogAppend": "on_append", "LogFetch": "on_fetch"}

State = dict[int, tuple[int, list[str]]]  # by subscription: its first number, docnos waiting


class HomeOnLog:
    """A home on the home log at the third node of a fake ring of 6, leading the log of a
    key of its own with SUBS subscribed in it; the log's other members, the next two
    nodes, each a HomeLogs of its own. What the home's mailboxes held each time a member
    was sent appends is noted (`while_sent`)."""

    def __init__(self) -> None:
        ring = ring_of(6, seed=3)
        s = ring_settings(replicas=3, home_log=True)
        self.node: FakeNode = node_at(ring, ring[2], s)
        ctx = self.node.ctx
        # as the node makes them: what their committed entries number is the home's
        self.logs = HomeLogs(ctx, lambda runs, fresh, at: self.home.applied(runs, fresh, at))
        self.copier = RecordingCopier(to=ctx.replica_set())
        self.home = Home(ctx, self.copier, self.logs)
        self.alerted: list[int] = []
        self.home.alert_listeners.append(self.alerted.extend)
        self.members = {
            n.address: HomeLogs(node_at(ring, n, s).ctx, self._member_numbered) for n in ring[3:5]
        }
        self.while_sent: list[State] = []
        self.watching = False  # (not while the subscriptions are made)
        for method in LOG_CALLS:
            self.node.peers.on(method, partial(self._member, method))
        self.key = self.run(self.logs.own_key())
        assert self.logs.members(self.key) == [ring[2].address, ring[3].address, ring[4].address]
        subscribed = [
            Subscription(sub, token_hash("t"), ["kelp"], term_id("kelp"), "kelp", key=self.key)
            for sub in SUBS
        ]
        entries = [
            pb.LogEntry(kind=pb.LOG_SUBSCRIBE, data=home_record(sub).SerializeToString())
            for sub in subscribed
        ]
        self.run(self.logs.append(self.key, entries))
        self.watching = True

    def _member(self, method: str, call: Call):
        if method == "LogAppend" and self.watching:
            self.while_sent.append(self.state())
        return getattr(self.members[call.peer.address], LOG_CALLS[method])(call.request)

    @staticmethod
    def _member_numbered(runs, fresh, accepted) -> None:
        raise AssertionError("a member that does not lead its key's log numbered alerts")

    def run(self, op: Op):
        """Drive an operation to its end over the fake ring, the clock moving as it
        pauses (acknowledgements linger for a round to ride with)."""
        return drive(op, self.node.peers, self.node.host.advance)

    def down(self, *members: int) -> None:
        """These members (0, 1: the home's first and second successors) refuse
        connections from now on; the others answer."""
        addresses = list(self.members)
        self.node.peers.down = {addresses[i] for i in members}

    def deliver(self, docs: list[tuple[str, list[int]]], key: int | None = None) -> pb.DeliverReply:
        """A DN's alert batch of these documents (docno, subscriptions) for the home's key
        (or another); the home's reply."""
        batch = alert_batch([((docno, "", ""), subs) for docno, subs in docs])
        batch.home_id = self.key if key is None else key
        return self.run(self.home.on_deliver(batch))

    def acknowledge(self, sub_id: int, next_seq: int) -> None:
        sub = self.node.ctx.subscriptions[sub_id]
        self.run(self.home.acknowledge([(sub, next_seq)]))

    def state(self) -> State:
        """Each subscription's mailbox at the home, as a stream reads it."""
        out = {}
        for sub_id in SUBS:
            sub = self.node.ctx.subscriptions[sub_id]
            first, _, nxt = sub.span()
            out[sub_id] = (first, [docno for docno, _, _ in sub.alerts(first, nxt)])
        return out

    def held_by_members(self, kind: pb.LogKind) -> dict[str, int]:
        """How many entries of a kind each member's copy of the key's log holds."""
        held = {}
        for address, logs in self.members.items():
            copy = logs.logs.get(self.key)
            entries = [] if copy is None else [copy.entry(p) for p in range(1, copy.last + 1)]
            held[address] = sum(e.kind == kind for e in entries)
        return held


class Mailboxes:
    """The oracle: the home's rule over the batches and acknowledgements a majority took,
    in the order they were appended, written plainly. Each subscription's alerts are its
    documents in the order they first came, numbered 0, 1, 2, ...; an acknowledgement
    moves its first number on. What was appended without a majority waits in the
    leader's copy and is taken with the next round a majority answers."""

    def __init__(self) -> None:
        self.docs: dict[int, list[str]] = {sub: [] for sub in SUBS}
        self.first = {sub: 0 for sub in SUBS}
        self.waiting: list[tuple] = []

    def appended(self, event: tuple, majority: bool) -> None:
        self.waiting.append(event)
        if not majority:
            return
        for kind, *args in self.waiting:
            if kind == "deliver":
                for docno, subs in args[0]:
                    for sub in subs:
                        if docno not in self.docs[sub]:
                            self.docs[sub].append(docno)
            else:
                sub, first = args
                self.first[sub] = max(self.first[sub], first)
        self.waiting = []

    def state(self) -> State:
        return {sub: (self.first[sub], self.docs[sub][self.first[sub] :]) for sub in SUBS}

    def numbered(self) -> Counter:
        return Counter({sub: len(docs) for sub, docs in self.docs.items() if docs})


batch = st.lists(
    st.tuples(st.sampled_from(DOCNOS), st.lists(st.sampled_from(SUBS), max_size=3)),
    min_size=1,
    max_size=3,
    unique_by=lambda doc: doc[0],
)
down = st.sets(st.sampled_from([0, 1]))  # the members that refuse connections
step = st.one_of(
    st.tuples(st.just("deliver"), down, batch),
    st.tuples(st.just("ack"), down, st.tuples(st.sampled_from(SUBS), st.floats(0, 1))),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=10))
def test_the_mailboxes_are_what_a_majority_of_the_log_holds_and_change_only_once_it_does(steps):
    """Batches and acknowledgements come while members of the key's log refuse
    connections (none, one or both of the home's two). With a majority they are numbered
    or taken; without, a batch is held and an acknowledgement refused, and both wait in
    the home's copy of the log for the next round a majority answers. At every moment the
    home's mailboxes are what the oracle makes of what a majority took, and while appends
    are on their way to the members they have not changed."""
    t, oracle = HomeOnLog(), Mailboxes()
    for kind, refusing, arg in steps:
        t.down(*refusing)
        majority = len(refusing) < 2
        before = t.state()
        t.while_sent.clear()
        if kind == "deliver":
            reply = t.deliver(arg)
            assert reply == (pb.DeliverReply() if majority else pb.DeliverReply(held=True))
            oracle.appended(("deliver", arg), majority)
        else:
            sub, share = arg
            first, docs = before[sub]
            upto = first + round(share * len(docs))
            if upto > first:  # (no entry of an acknowledgement of nothing new)
                if majority:
                    t.acknowledge(sub, upto)
                else:
                    with pytest.raises(EngineError, match=re.escape(MINORITY)):
                        t.acknowledge(sub, upto)
                oracle.appended(("ack", sub, upto), majority)
        assert all(seen == before for seen in t.while_sent)
        assert t.state() == oracle.state()
        assert Counter(t.alerted) == oracle.numbered()
    assert t.copier.copies == []  # nothing is copied alert by alert: the log is the copy


def test_a_batch_is_numbered_once_a_majority_of_the_log_holds_it():
    t = HomeOnLog()
    assert t.deliver([("d1", [11, 12])]) == pb.DeliverReply()
    assert t.while_sent and all(seen[11] == (0, []) for seen in t.while_sent)
    assert t.state()[11] == (0, ["d1"]) and t.state()[12] == (0, ["d1"])
    assert sorted(t.alerted) == [11, 12]
    assert set(t.held_by_members(pb.LOG_DELIVER).values()) == {1}  # the log is the copy


def test_a_home_without_a_majority_holds_the_batch_and_numbers_nothing():
    """Both other members refuse connections: the DN is told the batch is held, and keeps
    it to try again; the home shows nothing another leader could number otherwise. Once a
    member answers, the batch held is committed with the next, and the DN's batch sent
    again finds its documents numbered already: each is numbered once."""
    t = HomeOnLog()
    t.down(0, 1)
    assert t.deliver([("d1", [11]), ("d2", [12])]) == pb.DeliverReply(held=True)
    assert t.node.ctx.counters["alerts_held"] == 2
    assert t.state() == {sub: (0, []) for sub in SUBS} and not t.alerted
    assert set(t.held_by_members(pb.LOG_DELIVER).values()) == {0}
    t.down(1)
    assert t.deliver([("d1", [11]), ("d2", [12])]) == pb.DeliverReply()
    assert t.state()[11] == (0, ["d1"]) and t.state()[12] == (0, ["d2"])
    assert sorted(t.alerted) == [11, 12]
    assert t.node.ctx.counters["alerts_repeated"] == 2


def test_acknowledgements_go_through_the_log():
    """An acknowledgement is the log's entry: the mailbox's first number moves on only
    once a majority holds it, and without a majority the subscriber is refused (an
    acknowledgement a failure could undo would show its alerts again)."""
    t = HomeOnLog()
    t.deliver([("d1", [11]), ("d2", [11]), ("d3", [11])])
    t.down(0, 1)
    with pytest.raises(EngineError, match=re.escape(MINORITY)):
        t.acknowledge(11, 1)
    assert t.state()[11] == (0, ["d1", "d2", "d3"])
    t.down(0)
    t.while_sent.clear()
    t.acknowledge(11, 2)
    assert t.while_sent and all(seen[11] == (0, ["d1", "d2", "d3"]) for seen in t.while_sent)
    assert t.state()[11] == (2, ["d3"])
    held = t.held_by_members(pb.LOG_ACKS)
    assert held[list(t.members)[1]] == 2 and held[list(t.members)[0]] == 0


def test_a_batch_for_a_key_the_home_does_not_serve_is_moved():
    t = HomeOnLog()
    ring = sorted(t.node.peers.oracle.nodes)
    other = ring[0].id  # the first node's own id: a key it serves
    assert t.node.owner(other) != t.node.me
    assert t.deliver([("d1", [11])], key=other) == pb.DeliverReply(moved=True)
    assert not t.alerted and not t.while_sent
