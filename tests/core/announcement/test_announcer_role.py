"""The announcer alone (cqengine.core.announcement.announcer), at a node of a fake ring: it
splits a batch's runs by next hop (Algorithms 1-3) and sends each hop one announcement, so
that every id of every document goes exactly one way, to the hop ring truth
(chord.simulation.oracle) says Chord's rule picks, or stays here when it is mine; its runs
keep their neighbours (prev, next, piggybacked ids) as the document has them; the batch's
share is divided, never lost. Over a whole fake ring of announcers, each id reaches its
owner once."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fakes import FakeNode, Peers, RecordingHearer, node_at, ring_at, ring_settings

from chord.protocol.calls import Call
from chord.protocol.ids import MASK, distance
from chord.protocol.routing import NodeRef
from chord.simulation.oracle import RingOracle
from cqengine.core.announcement.announcer import Announcer
from cqengine.core.announcement.filters import Filters
from cqengine.core.basis import limits
from cqengine.core.resolution.runs import Announced, Run, announced
from cqengine.proto import cqengine_pb2 as pb

BATCH = 7  # the batch's name, when its DN counts reports

ring_ids = st.lists(st.integers(0, MASK), min_size=1, max_size=12, unique=True)
documents = st.lists(
    st.lists(st.integers(0, MASK), min_size=1, max_size=24, unique=True), min_size=1, max_size=3
)


def batch_of(docs: list[list[int]]) -> list[Announced]:
    """Documents as their DN announces them: each one run of all its ids."""
    return [Announced(key, max(ids), [Run.whole(sorted(ids))]) for key, ids in enumerate(docs, 1)]


def chord_hop(oracle: RingOracle, me: NodeRef, r: int, y: int) -> NodeRef | None:
    """Algorithm 1 read off ring truth, by brute force: None if the id is mine; its owner
    if my successor list reaches it; else the furthest of my successors and fingers at or
    before it."""
    owner = oracle.owner(y)
    if owner == me:
        return None
    successors = oracle.successors(me, r)
    if owner in successors:
        return owner
    known = (set(successors) | set(oracle.fingers(me))) - {me}
    before = [n for n in known if distance(me.id, n.id) <= distance(me.id, y)]
    return max(before, key=lambda n: distance(me.id, n.id))


def check_run(run: Run, ids: list[int], k: int) -> None:
    """A run is a stretch of the document's ids (ascending, `ids`) with the ids just
    before and after it, and the k after its last in increasing order, as they are."""
    at, n = ids.index(run.ids[0]), len(run.ids)
    assert run.ids == ids[at : at + n]
    assert (run.prev, run.next) == (ids[at - 1], ids[(at + n) % len(ids)])
    assert run.succ == [y for y in ids if y > run.ids[-1]][:k]


class AnnouncerAlone:
    """An announcer at a node of a fake ring, its QN a recording; every hop takes its
    announcement and keeps its share, and the DN takes a share sent back."""

    def __init__(self, ring: list[NodeRef], at: int, r: int, k: int) -> None:
        self.node: FakeNode = node_at(ring, ring[at], ring_settings(piggyback=k), r=r)
        self.hearer = RecordingHearer()
        self.announcer = Announcer(self.node.ctx, self.hearer, Filters(self.node.ctx))
        self.sent: list[tuple[NodeRef, pb.Announcement]] = []
        self.returned: list[int] = []  # shares sent back to the DN in a report of nothing
        peers = self.node.peers
        peers.on("Announce", self._announce)
        peers.on("Matched", lambda call: self.returned.append(call.request.share) or pb.Ack())

    def _announce(self, call: Call) -> pb.AnnounceReply:
        self.sent.append((call.peer, call.request))
        return pb.AnnounceReply()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ring_ids,
    st.data(),
    documents,
    st.sampled_from([1, 2, 8]),
    st.integers(0, 3),
    st.sampled_from([0, limits.WHOLE]),
)
def test_each_id_goes_to_the_one_hop_chord_picks_or_stays_if_mine(ids, data, docs, r, k, share):
    ring = ring_at(ids)
    t = AnnouncerAlone(ring, data.draw(st.integers(0, len(ring) - 1), "where"), r, k)
    me, oracle = t.node.me, t.node.peers.oracle
    batch = batch_of(docs)
    t.node.run(t.announcer.announce(me, batch, 0, BATCH if share else 0, share))
    hops = [hop for hop, _ in t.sent]
    assert len(hops) == len(set(hops)), "a hop sent two announcements of one batch"
    went: Counter[tuple[int, int]] = Counter()  # (document, id): where each went, counted
    for hop, msg in t.sent:
        assert msg.hops == 1 and msg.dn == me.address
        for doc in announced(msg):
            whole = sorted(docs[doc.key - 1])
            assert doc.max_id == whole[-1]
            for run in doc.runs:
                check_run(run, whole, k)
                assert {chord_hop(oracle, me, r, y) for y in run.ids} == {hop}
                went.update((doc.key, y) for y in run.ids)
    kept = t.hearer.got
    assert len(kept) <= 1
    for doc in kept[0].docs if kept else []:
        for run in doc.runs:
            check_run(run, sorted(docs[doc.key - 1]), k)
            assert all(oracle.owner(y) == me for y in run.ids)
            went.update((doc.key, y) for y in run.ids)
    assert went == Counter((key, y) for key, ids in enumerate(docs, 1) for y in ids)
    # the share: a part to each hop, the rest kept, in my report or sent back alone
    if share:
        parts = [msg.share for _, msg in t.sent]
        assert all(part > 0 for part in parts)
        rest = kept[0].share if kept else sum(t.returned)
        assert sum(parts) + rest == share
    else:
        assert not t.returned and all(not msg.share for _, msg in t.sent)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, MASK), min_size=3, max_size=12, unique=True), st.data(), documents)
def test_the_runs_of_a_hop_that_fails_go_another_way_and_its_share_comes_back(ids, data, docs):
    """A hop that does not answer is forgotten and its runs routed again, round it. (Not
    my predecessor: forgotten, it leaves me not knowing my region, where I own only my
    own id, so that its ids are sent on rather than kept.)"""
    ring = ring_at(ids)
    at = data.draw(st.integers(0, len(ring) - 1), "where")
    t = AnnouncerAlone(ring, at, r=2, k=1)
    others = [n for i, n in enumerate(ring) if i not in (at, at - 1 if at else len(ring) - 1)]
    dead = data.draw(st.sampled_from(others), "failed")
    t.node.peers.down.add(dead.address)
    me = t.node.me
    live = RingOracle(n for n in ring if n != dead)
    t.node.run(t.announcer.announce(me, batch_of(docs), 0, BATCH, limits.WHOLE))
    went: Counter[tuple[int, int]] = Counter()
    for hop, msg in t.sent:
        assert hop != dead
        for doc in announced(msg):
            for run in doc.runs:
                check_run(run, sorted(docs[doc.key - 1]), 1)
                # towards the id's owner among the nodes alive, never past it
                assert all(
                    distance(me.id, hop.id) <= distance(me.id, live.owner(y).id) for y in run.ids
                )
                went.update((doc.key, y) for y in run.ids)
    kept = t.hearer.got
    for doc in kept[0].docs if kept else []:
        went.update((doc.key, y) for run in doc.runs for y in run.ids)
    assert went == Counter((key, y) for key, ids in enumerate(docs, 1) for y in ids)
    rest = kept[0].share if kept else sum(t.returned)
    assert sum(msg.share for _, msg in t.sent) + rest == limits.WHOLE


class RingOfAnnouncers:
    """Every node of a fake ring an announcer over its own Context, its QN a recording:
    an announcement to a node is taken by its announcer, and what that sets off runs at
    once, as on a ring where each node answers in turn."""

    def __init__(self, ring: list[NodeRef]) -> None:
        self.peers = Peers(ring)
        self.nodes: dict[str, tuple[FakeNode, Announcer, RecordingHearer]] = {}
        for me in ring:
            node = node_at(ring, me, peers=self.peers)
            hearer = RecordingHearer()
            self.nodes[me.address] = (node, Announcer(node.ctx, hearer, Filters(node.ctx)), hearer)
        self.returned: list[int] = []  # shares back at the DN in reports of nothing
        self.peers.on("Announce", self._announce)
        self.peers.on("Matched", lambda call: self.returned.append(call.request.share) or pb.Ack())

    def _announce(self, call: Call) -> pb.AnnounceReply:
        node, announcer, _ = self.nodes[call.peer.address]
        reply = announcer.on_announce(call.request)
        node.run_spawned()
        return reply


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, MASK), min_size=1, max_size=24, unique=True), st.data(), documents)
def test_over_a_ring_each_id_reaches_its_owner_once_and_the_share_comes_back_whole(ids, data, docs):
    """A node whose ids all stop there and meet no list hands its share back unheard
    (Announcer._idle): the ids under which a list is indexed are heard, each once, at
    their owners."""
    ring = ring_at(ids)
    t = RingOfAnnouncers(ring)
    oracle = t.peers.oracle
    every = {(key, y) for key, doc in enumerate(docs, 1) for y in doc}
    listed = data.draw(st.sets(st.sampled_from(sorted(every))), "ids with a list")
    for _, y in listed:
        node, _, _ = t.nodes[oracle.owner(y).address]
        node.ctx.index.put(y, pb.QueryEntry(subscription_id=1, term_ids=[y], index_id=y))
    dn, announcer, _ = t.nodes[ring[data.draw(st.integers(0, len(ring) - 1), "the DN")].address]
    dn.run(announcer.announce(dn.me, batch_of(docs), 0, BATCH, limits.WHOLE))
    dn.run_spawned()
    heard: Counter[tuple[int, int]] = Counter()
    shares = 0
    for address, (_, _, hearer) in t.nodes.items():
        for h in hearer.got:
            shares += h.share
            for doc in h.docs:
                for run in doc.runs:
                    check_run(run, sorted(docs[doc.key - 1]), 0)
                    assert all(oracle.owner(y).address == address for y in run.ids)
                    heard.update((doc.key, y) for y in run.ids)
    assert max(heard.values(), default=1) == 1, "an id heard twice"
    assert listed <= set(heard)
    assert shares + sum(t.returned) == limits.WHOLE
