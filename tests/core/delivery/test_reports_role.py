"""The DN and its reports alone (cqengine.core.dn.dn publishing a batch,
cqengine.core.delivery.reports and .delivery after the QNs), at a node of a fake ring whose
other nodes the test plays: it holds a batch's alerts, and its copies on its replicas, until
every report is in, then delivers each alert it was reported once and releases the copies;
it announces a batch once, and again only while reports are missing; while a home cannot be
reached it keeps trying it, and keeps the batch's copies, for its hold."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fakes import FakeNode, RecordingAnnouncer, node_at, ring_of, ring_settings

from chord.protocol.calls import Call
from cqengine.core.basis import limits
from cqengine.core.delivery.reports import Reports
from cqengine.core.dn.dn import DN
from cqengine.core.frame.documents import Document, Documents
from cqengine.core.resolution import matches
from cqengine.core.terms.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

HOLD = 1.0  # s: a live DN's hold, as the test counts it on the fake clock
DOCS = [
    Document("d0", ["kelp", "moss", "fern"]),
    Document("d1", ["reed", "moss"]),
    Document("d2", ["sedg", "kelp", "rush", "tarn"]),
]
HOMES = 3  # the other nodes of the ring that home the subscriptions alerted


class DnAlone:
    """A DN at the first node of a fake ring of 16, its announcer a recording, every other
    node taking copies, releases and alert batches (each batch taken kept by home)."""

    def __init__(self, replicas: int = 2, seed: int = 1) -> None:
        ring = ring_of(16, seed)
        self.node: FakeNode = node_at(ring, ring[0], ring_settings(replicas=replicas))
        ctx, s = self.node.ctx, self.node.ctx.settings
        self.announcer = RecordingAnnouncer()
        synopsis = Synopsis(s.synopsis_k, s.synopsis_y, s.synopsis_hashes)
        documents = Documents(ctx.host.new_id, s)
        self.dn = DN(ctx, documents, synopsis, self.announcer, HOLD)
        self.reports = Reports(ctx, documents, self.announcer, self.dn, HOLD)
        self.dn.reports = self.reports  # (as the node makes them: cqengine.core.node)
        # the homes: spread round the ring, past the DN's successor list
        self.homes = [ring[5], ring[9], ring[13]][:HOMES]
        self.taken: list[tuple[str, pb.AlertBatch]] = []
        peers = self.node.peers
        peers.on("Replicate", lambda call: pb.ReplicateReply())
        peers.on("Release", lambda call: pb.Ack())
        peers.on("Deliver", self._deliver)

    def _deliver(self, call: Call) -> pb.DeliverReply:
        """A home takes a batch for a key it owns; another node (a successor asked in the
        home's place) does not serve it: moved."""
        if call.peer.address != self.node.owner(call.request.home_id).address:
            return pb.DeliverReply(moved=True)
        self.taken.append((call.peer.address, call.request))
        return pb.DeliverReply()

    def publish(self) -> int:
        """Publish the batch; its name."""
        replies = self.node.run(self.dn.publish_batch(DOCS))
        assert all(r.accepted for r in replies)
        self.node.run_spawned()  # the announcement: the recording keeps it
        return self.announcer.batches[-1].batch

    def keys(self, batch: int) -> list[int]:
        """The keys the DN gave the batch's documents, as it announced them."""
        announced = next(a for a in self.announcer.batches if a.batch == batch)
        return [d.key for d in announced.docs]

    def report(self, batch: int, share: int, found: list[tuple[int, int, int]]) -> None:
        """A QN's report: its share of the batch, and its matches (document, home,
        subscription)."""
        per_doc: dict[int, list[pb.QueryEntry]] = {}
        for d, h, sub in found:
            home = self.homes[h]
            entry = pb.QueryEntry(subscription_id=sub, home=home.address, home_id=home.id)
            per_doc.setdefault(d, []).append(entry)
        keys = self.keys(batch)
        request = pb.MatchedRequest(doc_keys=[keys[d] for d in per_doc], batch=batch, share=share)
        matches.report(request, list(per_doc.values()), columns=True)
        assert self.reports.on_matched(request) == pb.Ack()

    def holds(self, batch: int) -> bool:
        """Does the DN still hold the batch: its copy, and it counted in flight?"""
        held = batch in self.node.ctx.store.batches.held
        assert held == (self.reports.in_flight() > 0)
        return held

    def delivered(self) -> Counter[tuple[str, int, str]]:
        """Every alert the homes took: (home, subscription, docno), as often as taken."""
        out: Counter[tuple[str, int, str]] = Counter()
        for home, batch in self.taken:
            counts = batch.counts or [len(batch.subscription_ids)]
            subs = iter(batch.subscription_ids)
            for docno, n in zip(batch.docnos, counts):
                out.update((home, next(subs), docno) for _ in range(n))
        return out

    def wanted(self, found: list[tuple[int, int, int]]) -> Counter[tuple[str, int, str]]:
        return Counter((self.homes[h].address, sub, DOCS[d].docno) for d, h, sub in found)


def shares(cuts: list[int]) -> list[int]:
    """limits.WHOLE cut at these places: the shares a batch's reports bring back."""
    at = [0, *sorted(cuts), limits.WHOLE]
    return [b - a for a, b in zip(at, at[1:])]


found_by_one = st.lists(
    st.tuples(st.integers(0, len(DOCS) - 1), st.integers(0, HOMES - 1), st.integers(1, 40)),
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(1, limits.WHOLE - 1), unique=True, max_size=5).flatmap(
        lambda cuts: st.tuples(
            st.permutations(shares(cuts)), st.lists(found_by_one, min_size=len(cuts) + 1)
        )
    )
)
def test_a_batch_is_held_until_its_reports_are_in_then_delivered_once_and_released(reports):
    order, found = reports
    t = DnAlone()
    batch = t.publish()
    assert t.node.peers.sent("Replicate")  # its copy is on a replica before it is announced
    announced = t.announcer.batches
    assert [(a.batch, a.share, a.hops) for a in announced] == [(batch, limits.WHOLE, 0)]
    assert [sorted(d.runs[0].ids) for d in announced[0].docs] == [
        sorted(map(term_id, d.terms)) for d in DOCS
    ]
    for i, share in enumerate(order):
        assert t.holds(batch) and not t.taken, "released or delivered before the last report"
        t.report(batch, share, found[i])
        t.node.run_spawned()
    assert not t.holds(batch)
    assert t.delivered() == sum((t.wanted(f) for f in found[: len(order)]), Counter())
    # one alert batch per home, and the copies released on the replica that took them
    assert len({home for home, _ in t.taken}) == len(t.taken)
    copies = {c.peer.address for c in t.node.peers.sent("Replicate")}
    assert copies <= {c.peer.address for c in t.node.peers.sent("Release")}
    # the hold ends with every report in: the batch is not announced again
    t.node.host.advance(2 * HOLD)
    assert t.node.run_spawned() == 0
    assert len(t.announcer.batches) == 1


def test_a_batch_whose_reports_are_missing_is_announced_again_until_they_come():
    t = DnAlone()
    batch = t.publish()
    half = limits.WHOLE // 2
    t.report(batch, half, [(0, 0, 7)])
    t.node.host.advance(HOLD)  # a QN failed before it reported: the hold ends
    t.node.run_spawned()
    again = t.announcer.batches
    assert [(a.batch, a.share) for a in again] == [(batch, limits.WHOLE)] * 2
    assert [d.key for d in again[1].docs] == t.keys(batch)
    assert t.node.ctx.counters["batches_announced_again"] == 1
    # what came is delivered at once; the batch's copy stays until its reports are in
    assert t.delivered() == t.wanted([(0, 0, 7)])
    assert t.holds(batch)
    t.report(batch, limits.WHOLE - 1, [(1, 1, 8)])
    t.report(batch, 1, [])
    t.node.run_spawned()
    assert not t.holds(batch)
    assert t.delivered() == t.wanted([(0, 0, 7), (1, 1, 8)])
    t.node.host.advance(2 * HOLD)
    assert t.node.run_spawned() == 0 and len(t.announcer.batches) == 2


def test_a_dn_gives_up_on_missing_reports_after_announcing_again_so_often():
    t = DnAlone()
    batch = t.publish()
    for _ in range(limits.ANNOUNCE_AGAIN + 3):
        t.node.host.advance(HOLD)
        t.node.run_spawned()
    assert len(t.announcer.batches) == 1 + limits.ANNOUNCE_AGAIN
    assert t.node.ctx.counters["dropped:reports_missing"] == len(DOCS)
    assert not t.holds(batch)


def test_without_replicas_a_batch_is_announced_once_whatever_reports_are_missing():
    """No replica holds the failed QN's queries: announcing again would find nothing."""
    t = DnAlone(replicas=1)
    batch = t.publish()
    assert not t.node.peers.sent("Replicate")
    t.report(batch, 5, [(2, 2, 9)])
    t.node.host.advance(HOLD)
    t.node.run_spawned()
    assert len(t.announcer.batches) == 1
    assert t.delivered() == t.wanted([(2, 2, 9)])
    assert t.reports.in_flight() == 0 and "dropped:reports_missing" not in t.node.ctx.counters


def until_no_timer_is_left(t: DnAlone, most: int = 12) -> None:
    """Let the timers (the hold's, the retries') fire one after another, running what
    each sets off, until none is left."""
    for _ in range(most):
        due = t.node.host.timers()
        if not due:
            return
        t.node.host.advance(due[0] - t.node.host.t)
        t.node.run_spawned()
    raise AssertionError(f"timers still set after {most} rounds")


def gathered(t: DnAlone, found: list[tuple[int, int, int]]) -> int:
    """Publish, and report the whole share with these matches: the alerts go out."""
    batch = t.publish()
    t.report(batch, limits.WHOLE, found)
    t.node.run_spawned()
    return batch


def test_a_home_that_cannot_be_reached_is_tried_again_and_the_batch_kept_meanwhile():
    t = DnAlone()
    home = t.homes[1].address
    t.node.peers.down.add(home)  # restarting
    found = [(0, 1, 3), (2, 1, 4), (1, 0, 5)]
    batch = gathered(t, found)
    # the other home took its alerts; this one's wait, and so does the batch's copy
    assert t.delivered() == t.wanted([(1, 0, 5)])
    assert t.holds(batch) and not t.node.peers.sent("Release")
    assert t.node.ctx.counters["alerts_retried"] == 2
    assert len(t.reports.delivery.retrying) == 1
    t.node.peers.down.clear()  # back
    until_no_timer_is_left(t)
    assert len(t.node.peers.sent("Deliver", to=home)) == 2  # once more, taken
    assert t.delivered() == t.wanted(found)
    assert not t.holds(batch) and not t.reports.delivery.retrying
    assert "dropped:home_unreachable" not in t.node.ctx.counters


def test_a_home_gone_for_the_whole_hold_loses_its_alerts_counted_and_the_batch_goes():
    t = DnAlone()
    home = t.homes[2].address
    t.node.peers.down.add(home)
    found = [(0, 2, 3), (1, 2, 4), (1, 1, 6)]
    batch = gathered(t, found)
    until_no_timer_is_left(t)
    # tried again after waits doubling from RETRY_FIRST (0.25, 0.25, 0.5 s) while they
    # fit in the hold, then given up
    assert len(t.node.peers.sent("Deliver", to=home)) == 1 + 3
    assert t.node.host.t == HOLD
    assert t.node.ctx.counters["dropped:home_unreachable"] == 2
    assert t.delivered() == t.wanted([(1, 1, 6)])
    assert not t.holds(batch) and t.node.peers.sent("Release")


def test_a_home_found_at_the_node_that_serves_its_key_now_is_delivered_there():
    """Replicated, the home's successor serves its key once the home is gone: the DN
    finds it by a lookup, and sends the home's later batches there at once."""
    t = DnAlone()
    home = t.homes[0]
    t.node.peers.down.add(home.address)
    replica = t.node.owner(home.id + 1).address  # the home's successor
    peers = t.node.peers

    def served_by_the_replica(call: Call) -> pb.DeliverReply:
        if call.peer.address != replica or not call.request.owner:
            return pb.DeliverReply(moved=True)
        assert call.request.home == home.address
        t.taken.append((home.address, call.request))
        return pb.DeliverReply()

    peers.on("Deliver", served_by_the_replica)
    batch = gathered(t, [(0, 0, 11)])
    assert t.delivered() == t.wanted([(0, 0, 11)])
    assert not t.holds(batch) and not t.reports.delivery.retrying
    assert t.reports.delivery.homes_at[home.id] == replica
    before = len(peers.sent("Deliver"))
    gathered(t, [(1, 0, 12)])
    assert [c.peer.address for c in peers.sent("Deliver")[before:]] == [replica]
