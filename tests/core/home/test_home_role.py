"""The home alone (cqengine.core.home.home), at a node of a fake ring whose other nodes the
test plays, its replication a recording: it numbers each subscription's alerts 0, 1, 2, ...
in the order they come, each document once however often a DN sends it, shows none on a
stream before its replicas hold it, and refuses what is not its own to number: a batch for
a home key another node serves, a subscription it does not know."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fakes import FakeNode, RecordingCopier, node_at, ring_of, ring_settings

from chord.protocol.calls import Call
from cqengine.core.alerts.batches import alert_batch, numbered_alerts
from cqengine.core.alerts.mailboxes import Subscription, token_hash
from cqengine.core.home.home import Home
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

SUBS = [11, 12, 13, 14]
DOCNOS = [f"d{i}" for i in range(8)]


class HomeAlone:
    """A home at the third node of a fake ring of 6, serving SUBS under its own id as
    their home key (replicated) or under none (one copy: the paper's), every alert it
    numbers noted as its listeners are told."""

    def __init__(self, replicas: int = 3) -> None:
        ring = ring_of(6, seed=3)
        self.node: FakeNode = node_at(ring, ring[2], ring_settings(replicas=replicas))
        ctx = self.node.ctx
        self.copier = RecordingCopier(to=ctx.replica_set())
        self.home = Home(ctx, self.copier)
        self.key = ctx.me.id if ctx.replicated else 0
        for sub in SUBS:
            subscribe(self.node, sub, self.key)
        self.alerted: list[int] = []
        self.home.alert_listeners.append(self.alerted.extend)
        self.node.peers.on("Replicate", lambda call: pb.ReplicateReply())

    def deliver(self, docs: list[tuple[str, list[int]]], key: int | None = None, **hints):
        """A DN's alert batch of these documents (docno, subscriptions), for this home key
        (the home's, by default); the home's reply, once any copy it makes is through."""
        batch = alert_batch([((docno, "", ""), subs) for docno, subs in docs])
        batch.home_id = self.key if key is None else key
        for name, value in hints.items():
            setattr(batch, name, value)
        reply = self.home.on_deliver(batch)
        return reply if isinstance(reply, pb.DeliverReply) else self.node.run(reply)

    def mailbox(self, sub: int) -> list[str]:
        """The docnos of a subscription's alerts waiting, in the order of their numbers."""
        box = self.node.ctx.subscriptions[sub].mailbox
        return [docno for docno, _, _ in box.alerts(box.first, box.next)]


def subscribe(node: FakeNode, sub: int, key: int) -> None:
    node.ctx.subscriptions[sub] = Subscription(
        sub, token_hash("t"), ["kelp"], term_id("kelp"), "kelp", key=key
    )


batches = st.lists(
    st.lists(
        st.tuples(st.sampled_from(DOCNOS), st.lists(st.sampled_from(SUBS), max_size=4)),
        min_size=1,
        max_size=4,
        unique_by=lambda doc: doc[0],
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.sampled_from([1, 3]), st.data())
def test_alerts_are_numbered_per_subscription_in_order_each_document_once(batches, replicas, data):
    """Batches come, some again, some of documents already alerted; subscribers
    acknowledge between them. Each subscription's alerts are its documents in the order
    they first came, numbered 0, 1, 2, ... with no gap, whatever is acknowledged."""
    t = HomeAlone(replicas)
    want: dict[int, list[str]] = {sub: [] for sub in SUBS}
    offered = 0
    for docs in batches:
        for _ in range(1 + data.draw(st.integers(0, 1), "sent again")):
            assert t.deliver(docs) == pb.DeliverReply()
            for docno, subs in docs:
                for sub in subs:
                    offered += 1
                    if docno not in want[sub]:
                        want[sub].append(docno)
        sub = data.draw(st.sampled_from(SUBS), "acknowledging")
        box = t.node.ctx.subscriptions[sub].mailbox
        upto = data.draw(st.integers(box.first, box.next), "acknowledged below")
        assert t.home.acknowledge([(t.node.ctx.subscriptions[sub], upto)]) is None
        t.node.run_spawned()  # (replicated: the acknowledgement's copy)
    fresh = sum(map(len, want.values()))
    for sub in SUBS:
        box = t.node.ctx.subscriptions[sub].mailbox
        assert box.next == len(want[sub])
        assert t.mailbox(sub) == want[sub][box.first :]
        assert box.shown == box.next  # every copy through: all may be shown
    assert sorted(t.alerted) == sorted(s for s in SUBS for _ in want[s])
    assert t.node.ctx.counters["alerts_delivered"] == fresh
    assert t.node.ctx.counters["alerts_repeated"] == offered - fresh
    if replicas > 1:  # each alert numbered was copied once, under its number
        copied = {}
        for records in t.copier.copies:
            for batch in records.alerts:
                for sub, alerts in numbered_alerts(batch).items():
                    for seq, (docno, _, _) in alerts:
                        assert copied.setdefault((sub, seq), docno) == docno
        assert copied == {(s, n): d for s in SUBS for n, d in enumerate(want[s])}


def test_a_repeated_batch_numbers_nothing_and_copies_nothing():
    t = HomeAlone()
    docs = [("d1", [11, 12]), ("d2", [12])]
    t.deliver(docs)
    assert len(t.copier.copies) == 1
    assert t.deliver(docs) == pb.DeliverReply()  # taken (the DN is done), not again
    assert len(t.copier.copies) == 1
    assert (t.mailbox(11), t.mailbox(12)) == (["d1"], ["d1", "d2"])
    assert t.node.ctx.counters["alerts_repeated"] == 3


def test_new_alerts_are_shown_only_once_every_replica_holds_them():
    t = HomeAlone()
    t.deliver([("d0", [11])])
    seen_during_copy = []

    def replicate(call: Call) -> pb.ReplicateReply:
        box = t.node.ctx.subscriptions[11].mailbox
        seen_during_copy.append((call.peer.address, box.next, box.shown, list(t.alerted)))
        return pb.ReplicateReply()

    t.node.peers.on("Replicate", replicate)
    t.deliver([("d1", [11]), ("d2", [11])])
    replicas = [r.address for r in t.node.ctx.replica_set()]
    # while the copy is on its way, numbers 1 and 2 exist and no stream may send them
    assert seen_during_copy == [(r, 3, 1, [11]) for r in replicas]
    box = t.node.ctx.subscriptions[11].mailbox
    assert (box.next, box.shown, t.alerted) == (3, 3, [11, 11, 11])


def test_a_batch_for_a_home_key_another_node_serves_is_refused_as_moved():
    """A replica holds copies of its predecessor's subscriptions; their alerts are numbered
    by the node that serves their key, never by a copy."""
    t = HomeAlone()
    pred = t.node.ctx.chord.table.predecessor
    subscribe(t.node, 21, pred.id)  # a copy of a subscription homed at my predecessor
    before = t.mailbox(21)
    assert t.deliver([("d3", [21])], key=pred.id) == pb.DeliverReply(moved=True)
    # a DN that names the home and says the ring gave it me: my predecessor is there
    reply = t.deliver([("d3", [21])], key=pred.id, owner=True, home=pred.address)
    assert reply == pb.DeliverReply(moved=True)
    assert t.mailbox(21) == before and not t.alerted and not t.copier.copies
    assert not t.node.peers.sent("Ping")


def a_home_gone_before_me(t: HomeAlone) -> tuple[int, str]:
    """My predecessor failed and I have found it so (it is no longer my predecessor): a
    subscription it served, whose copy I hold, and its address."""
    pred = t.node.ctx.chord.table.predecessor
    subscribe(t.node, 21, pred.id)
    t.node.ctx.chord.forget(pred)
    return pred.id, pred.address


def test_the_alerts_of_a_home_gone_for_sure_are_numbered_by_its_replica():
    t = HomeAlone()
    key, gone = a_home_gone_before_me(t)
    t.node.peers.down.add(gone)  # it refuses connections: nothing listens there
    reply = t.deliver([("d4", [21])], key=key, owner=True, home=gone)
    assert reply == pb.DeliverReply()
    assert t.mailbox(21) == ["d4"] and t.alerted == [21]


def test_the_alerts_of_a_home_only_slow_to_answer_are_not_numbered_twice():
    """A home that does not answer in time may still number its alerts: two numberings of
    one subscription would clash, so its replica takes nothing."""
    t = HomeAlone()
    key, gone = a_home_gone_before_me(t)
    t.node.peers.silent.add(gone)
    reply = t.deliver([("d4", [21])], key=key, owner=True, home=gone)
    assert reply == pb.DeliverReply(moved=True)
    assert t.mailbox(21) == [] and not t.alerted


def test_a_subscription_not_known_here_is_left_for_the_dn_to_try_again():
    """Its record may not have reached me yet: the DN tries the batch again (what was
    taken now it finds seen). One unsubscribed is no reason to."""
    t = HomeAlone()
    reply = t.deliver([("d5", [11, 99])])
    assert reply == pb.DeliverReply(moved=True)
    assert t.mailbox(11) == ["d5"]
    t.node.ctx.store.homes.gone[98] = (t.key, 0.0)  # unsubscribed meanwhile (a tombstone)
    assert t.deliver([("d6", [12, 98])]) == pb.DeliverReply()
    assert t.mailbox(12) == ["d6"]
