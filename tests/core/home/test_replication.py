"""Replication (cqengine.core.home.replication) in the simulator: every record on its owner and
the owner's next R-1 successors; merging and reconciliation converge whatever the order;
and when fewer than R consecutive nodes fail, the replicas take over their entries, their
subscriptions with their mailboxes and the documents of their unfinished batches, so
every alert is the matcher's, once, numbered without a gap."""

from __future__ import annotations

import random
from collections import defaultdict, deque

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact, consecutive
from support.records import reconcile
from support.workloads import make_settings, subscribe_all, workload

from chord.protocol.calls import PeerUnreachable
from chord.protocol.transport import REPLY
from cqengine.core.alerts.batches import alert_batch, numbered_alerts, numbered_batch
from cqengine.core.alerts.mailboxes import Mailbox, cost, home_record
from cqengine.core.basis import limits
from cqengine.core.basis.limits import EARLY_ALERTS, SEEN_KEPT, TOMBSTONE_TTL
from cqengine.core.frame.documents import Document
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze

R = 3


def replicated(wl, nodes: int = 12, seed: int = 3, **kw) -> EngineSimulator:
    return EngineSimulator(nodes, make_settings(wl, replicas=R, seed=seed, **kw), seed=seed)


def owners(sim: EngineSimulator, key: int) -> set[str]:
    """The key's owner and its next R-1 successors, as the true ring has them."""
    oracle = sim.ring.oracle()
    at = oracle.ids.index(oracle.owner(key).id)
    return {oracle.nodes[(at + i) % len(oracle.ids)].address for i in range(R)}


def entry_holders(sim: EngineSimulator) -> dict[tuple[int, int], set[str]]:
    out = defaultdict(set)
    for a, e in sim.engines.items():
        for key in e.index.keys():
            for entry in e.index.get(key):
                out[(key, entry.subscription_id)].add(a)
    return out


def home_holders(sim: EngineSimulator) -> dict[int, set[str]]:
    out = defaultdict(set)
    for a, e in sim.engines.items():
        for sub in e.subscriptions.values():
            out[sub.id].add(a)
    return out


@pytest.mark.parametrize("strategy", ["ri", "mhi"])
def test_every_entry_and_subscription_lives_on_its_owner_and_r_minus_1_successors(strategy):
    wl = workload(1)
    sim = replicated(wl, strategy=strategy)
    subs = subscribe_all(sim, wl)
    entries = entry_holders(sim)
    assert {sub for _, sub in entries} == set(subs)
    for (key, _), held in entries.items():
        assert held == owners(sim, key)
    homes = home_holders(sim)
    for e in sim.engines.values():
        for sub in e.subscriptions.values():
            assert homes[sub.id] == owners(sim, sub.key)
    for d in wl.docs[:10]:
        sim.publish(d.docno, d.text, d.title)
    for sub_id, held in homes.items():  # every copy of a mailbox holds the same alerts
        boxes = [sim.engines[a].subscriptions[sub_id].mailbox for a in held]
        assert len({(b.first, tuple(b.queue)) for b in boxes}) == 1
    assert_exact(sim.alerts(), wl.oracle(subs, [d.docno for d in wl.docs[:10]]))


def documents(wl) -> list[Document]:
    """The workload's documents analyzed, as a batch is published."""
    return [Document(d.docno, analyze(f"{d.title}\n{d.text}"), d.title) for d in wl.docs]


def published_held(dn_at: int):
    """A replicated ring whose DNs count reports, every query subscribed, and a batch of
    every document published through its dn_at-th node (announced once the ring drains):
    the workload, the simulator, the subscriptions and the DN's address."""
    wl = workload(1)
    sim = replicated(wl)
    sim.hold(True)
    subs = subscribe_all(sim, wl)
    dn = sorted(sim.engines)[dn_at]
    sim.ring.run(sim.ring.nodes[dn], sim.engines[dn].dn.publish_batch(documents(wl)))
    return wl, sim, subs, dn


def fail_busiest_qn(sim: EngineSimulator, dn: str):
    """Of the nodes that heard the batch, the one holding the most queries fails before it
    resolves; the ring's maintenance runs (not the DN's hold) until the ring is correct."""
    qn = max(
        (node for node, _ in sim.heard if node.me.address != dn),
        key=lambda node: len(node.index),
    )
    sim.heard = [(node, h) for node, h in sim.heard if node is not qn]
    sim.ring.fail(qn.me.address)
    while sim.ring.problems():
        sim.ring.round()
    return qn


@pytest.mark.parametrize("resolution", ["td", "bf"])
def test_r_minus_1_consecutive_nodes_failing_lose_no_alert_nor_repeat_one(resolution):
    """Homes with alerts waiting and owners of many entries fail together (R-1 in a row);
    after the ring's maintenance every alert, waiting or later, is the matcher's, once,
    and each subscription's alerts are numbered 0, 1, 2, ... with no gap or repeat."""
    wl = workload(2)
    sim = replicated(wl, resolution=resolution)
    sim.hold(True)  # DNs count their reports, as live ones do, and let go of resolved batches
    vias = sorted(sim.engines)[:4]
    replies = [sim.subscribe(q, via=vias[i % 4]) for i, q in enumerate(wl.queries)]
    subs = {r.subscription_id: analyze(q) for r, q in zip(replies, wl.queries)}
    half = len(wl.docs) // 2
    for d in wl.docs[:half]:  # their alerts wait in the homes' mailboxes
        sim.publish(d.docno, d.text, d.title)
    failed = consecutive(sim, vias[1], R - 1)  # a home and its successor
    oracle = sim.ring.oracle()
    owned = [k for k, _ in entry_holders(sim) if oracle.owner(k).address in failed]
    waiting = [s for s in sim.engines[vias[1]].subscriptions.values() if s.mailbox.queue]
    assert owned and waiting  # the failures take both entries and alerts with them
    survivors = [e for a, e in sim.engines.items() if a not in failed]
    assert any(e.store.intake.copied.alerts for e in survivors)  # kept as columns, then taken over
    sim.fail(failed)
    assert sim.ring.problems() == []
    for d in wl.docs[half:]:
        sim.publish(d.docno, d.text, d.title, via=sim.pick())
    served = {
        sub.id: sub.mailbox
        for e in sim.engines.values()
        for sub in e.subscriptions.values()
        if e.serves(sub.key)
    }
    assert set(served) == set(subs)  # no subscription lost
    for box in served.values():
        assert box.first == 0 and box.shown == box.next  # nothing taken yet, none hidden
    assert_exact(sim.alerts(), wl.oracle(subs))
    assert sum(e.counters["dropped:home_unreachable"] for e in sim.engines.values()) == 0


def test_a_failure_is_followed_by_reconciliation_at_once_not_on_the_next_period():
    """Owners whose replica sets changed reconcile with their new replicas as soon as the
    ring's maintenance shows the change: every record is on its R nodes again without a
    periodic round."""
    wl = workload(1)
    sim = replicated(wl)
    subs = subscribe_all(sim, wl)
    sim.fail([sorted(sim.engines)[4]])
    for (key, _), held in entry_holders(sim).items():
        assert held == owners(sim, key)
    homes = home_holders(sim)
    for e in sim.engines.values():
        for sub in e.subscriptions.values():
            assert homes[sub.id] == owners(sim, sub.key)
    assert set(homes) == set(subs)


def test_a_steady_ring_does_not_hand_regions_over_again_on_every_notify():
    """A settled node that stays its successor's predecessor is not sent its region again
    (its successor keeps copies, not moves): only a new predecessor is."""
    wl = workload(1)
    sim = replicated(wl)
    subscribe_all(sim, wl)
    notify = lambda: sim.ring.ledger.snapshot()["Notify" + REPLY]  # noqa: E731
    sim.ring.rounds(2)
    before = notify()
    sim.ring.rounds(5)
    after = notify()
    assert after.messages > before.messages and after.bytes - before.bytes < 4 * (
        after.messages - before.messages
    )  # empty replies
    newcomer = sim.ring.join("newcomer")  # is handed its region
    sim.fail([])
    assert notify().bytes - after.bytes > 1000 and newcomer.settled


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_node_leaving_and_coming_back_in_turn_while_publishing_loses_nothing(seed):
    """A rolling restart: each node in turn leaves (handing over) and joins again empty at
    its address, documents published between; every alert once, numbered without a gap."""
    wl = workload(2)
    sim = replicated(wl, nodes=8, seed=seed)
    sim.hold(True)
    subs = subscribe_all(sim, wl)
    rng = random.Random(seed)
    order, got = sorted(sim.engines), []
    for i, d in enumerate(wl.docs):
        sim.publish(d.docno, d.text, d.title, via=rng.choice(sorted(sim.engines)))
        if i % 3 == 2 and order:
            a = order.pop(0)
            sim.ring.leave(a)
            sim.ring.join(a)
            sim.fail([])  # maintenance until the ring is correct again
            got += sim.alerts()
    got += sim.alerts()
    assert not order  # every node went and came back
    assert_exact(got, wl.oracle(subs))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_documents_published_right_after_a_failure_lose_nothing(seed):
    """A node fails and, before any maintenance has noticed, documents are published:
    announcements for its keys reach its successor, which finds it gone and takes them
    (it holds the copies), as it takes the alerts of the subscriptions it was home to."""
    wl = workload(2)
    sim = replicated(wl, nodes=16, seed=seed)
    subs = subscribe_all(sim, wl)
    busiest = max(sim.engines, key=lambda a: len(sim.engines[a].index))
    assert sim.engines[busiest].subscriptions  # a home too
    sim.fail([busiest], converge=False)
    docs = wl.docs[:10]
    reports = [sim.publish(d.docno, d.text, d.title, via=sim.pick()) for d in docs]
    announced = sum(r.announcement.messages for r in reports)
    assert announced < 20 * len(docs)  # no announcement went round in circles
    assert_exact(sim.alerts(), wl.oracle(subs, [d.docno for d in docs]))


def test_a_dn_failing_before_its_batch_is_announced_is_taken_over_by_its_successor():
    wl = workload(1)
    sim = replicated(wl)
    subs = subscribe_all(sim, wl)
    dn = sorted(sim.engines)[2]
    docs = documents(wl)
    replies = sim.ring.run(sim.ring.nodes[dn], sim.engines[dn].dn.publish_batch(docs))
    assert all(r.accepted for r in replies)  # held by the DN and its successor
    successor = consecutive(sim, dn, 2)[1]
    assert sim.engines[successor].store.held_documents == len(docs)
    sim.fail([dn])  # before anything it announced went out
    assert sim.engines[successor].counters["documents_taken_over"] == len(docs)
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_qn_failing_before_it_reports_makes_its_dn_announce_the_batch_again():
    """A QN takes its part of a batch and fails before resolving it: its report never
    comes. When the DN's hold ends it announces the batch once more; the failed QN's
    replica now holds its queries, and homes take each alert once."""
    wl, sim, subs, dn = published_held(3)
    sim.ring.drain()  # the announcements have travelled; no QN has resolved yet
    in_flight = sim.engines[dn].stats(sim.ring.ledger).batches_in_flight
    qn = fail_busiest_qn(sim, dn)
    assert len(qn.index) > 0
    sim.settle()
    assert sim.engines[dn].counters["batches_announced_again"] == 1
    assert (in_flight, sim.engines[dn].stats(sim.ring.ledger).batches_in_flight) == (1, 0)
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_share_too_small_to_split_is_burnt_so_a_qn_failing_under_it_is_noticed(monkeypatch):
    """A batch's share halves at each hop that passes it on; a routing loop while tables
    are stale exhausts it. A hop then given none would work uncounted, and the shares back
    could make the whole without it. With a whole of 8, shares run out two levels down the
    tree: they are burnt, and the DN announces the batch again when its busiest QN fails."""
    monkeypatch.setattr(limits, "WHOLE", 1 << 3)
    wl, sim, subs, dn = published_held(3)
    sim.ring.drain()
    fail_busiest_qn(sim, dn)
    sim.settle()
    assert sum(e.counters["shares_burnt"] for e in sim.engines.values()) > 0
    assert sim.engines[dn].counters["batches_announced_again"] > 0
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_qns_failing_under_two_announcements_of_a_batch_lose_no_alert():
    """A QN fails under a batch, and the node serving its queries next fails under the
    batch's second announcement: the DN announces it a third time."""
    wl, sim, subs, dn = published_held(3)
    for _ in range(2):
        sim.ring.drain()  # announced; no QN has resolved yet
        fail_busiest_qn(sim, dn)
        sim.ring.drain()
        sim.resolve(sim.heard)  # the others report
        sim.heard = []
        sim.ring.drain()
        sim.ring.clock.fire()  # the DN's hold ends: it announces the batch again
    sim.settle()
    assert sim.engines[dn].counters["batches_announced_again"] == 2
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_dn_failing_while_it_delivers_a_resolved_batch_loses_no_alert():
    """Every report of the batch is in and the DN has begun delivering when it fails: its
    copies were not let go yet, so its successor announces the batch again."""
    wl, sim, subs, dn = published_held(6)
    sim.ring.drain()  # announced
    heard, sim.heard = sim.heard, []
    sim.resolve(heard)  # every report in: the DN's deliveries wait in its queue
    assert not sim.engines[dn].reports.gathering
    queued, sim.ring.queue = list(sim.ring.queue), deque()
    for address, op in queued:  # whatever else it sent got there (a release, say)
        if op.__name__ != "deliver":
            sim.ring.queue.append((address, op))
    sim.ring.drain()
    assert any(op.__name__ == "deliver" for _, op in queued)
    sim.fail([dn])  # before its deliveries
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_delivery_abandoned_while_its_alerts_are_copied_still_shows_them():
    """A DN killed in the middle of a Deliver cancels the home's handler while it copies the
    alerts to the replicas: the alerts must not stay held back, or every later alert of
    their subscriptions would wait behind them for good."""
    wl = workload(1)
    sim = replicated(wl)
    sub_id = next(iter(subscribe_all(sim, wl)))
    home = next(
        e
        for e in sim.engines.values()
        if sub_id in e.subscriptions and e.serves(e.subscriptions[sub_id].key)
    )
    box = home.subscriptions[sub_id].mailbox
    batch = alert_batch([(("D1", "", ""), [sub_id]), (("D2", "", ""), [sub_id])])
    batch.home_id = home.subscriptions[sub_id].key
    op = home.home.on_deliver(batch)
    copies = next(op)  # the copies to the replicas are on their way
    assert {c.method for c in copies.calls} == {"Replicate"} and box.shown == box.next - 2
    op.close()  # and its caller is gone
    assert box.shown == box.next and [d[0] for d in box.alerts(box.first, box.next)] == ["D1", "D2"]


def test_alerts_of_a_subscription_gone_while_they_are_copied_are_not_shown():
    """A subscription unsubscribed (or handed over) while its alerts are copied to the
    replicas: its alerts are not told to the streams; the others' are."""
    wl = workload(1)
    sim = replicated(wl)
    subscribe_all(sim, wl)
    home = next(e for e in sim.engines.values() if len(e.subscriptions) > 1)
    stay, leave = [s for s, sub in home.subscriptions.items() if home.serves(sub.key)][:2]
    batch = alert_batch([(("D1", "", ""), [stay, leave]), (("D2", "", ""), [leave])])
    batch.home_id = home.subscriptions[stay].key
    told = []
    home.home.alert_listeners.append(told.extend)
    op = home.home.on_deliver(batch)
    copies = next(op)  # the copies to the replicas are on their way
    home.subscriptions.pop(leave)  # and it leaves meanwhile
    with pytest.raises(StopIteration):
        op.send([pb.ReplicateReply() for _ in copies.calls])
    assert told == [stay]


def test_a_home_lacking_a_subscription_record_makes_its_dn_try_again():
    """A node serving a home key before the record of one of its subscriptions reached it
    (a leaver's keys still on their way) must not drop that subscription's alerts: it
    takes the others and says the batch moved, so the DN sends it again later."""
    wl = workload(1)
    sim = replicated(wl)
    subs = iter(subscribe_all(sim, wl))
    first = next(subs)
    home = next(
        e
        for e in sim.engines.values()
        if first in e.subscriptions and e.serves(e.subscriptions[first].key)
    )
    key = home.subscriptions[first].key
    other = next(s for s in subs if s in home.subscriptions and home.subscriptions[s].key == key)
    record = home.subscriptions.pop(other)  # not here yet
    batch = alert_batch([(("D1", "", ""), [first, other])])
    batch.home_id = key
    reply = sim.ring.run(sim.ring.nodes[home.me.address], home.home.on_deliver(batch))
    assert reply.moved and home.subscriptions[first].mailbox.next == 1
    home.subscriptions[other] = record  # reconciliation brought it
    reply = sim.ring.run(sim.ring.nodes[home.me.address], home.home.on_deliver(batch))
    assert not reply.moved
    assert [(b.first, b.next) for b in (home.subscriptions[s].mailbox for s in (first, other))] == [
        (0, 1),
        (0, 1),
    ]


def test_acknowledgements_of_many_subscriptions_reach_each_replica_in_one_message():
    """A client acknowledges many subscriptions at once: each replica of the home gets them
    in one Replicate (as columns), and every copy of every mailbox then starts where the
    home's does."""
    wl = workload(1)
    sim = replicated(wl)
    home = sorted(sim.engines)[0]
    subs = {sim.subscribe(q, via=home).subscription_id for q in wl.queries}
    for d in wl.docs[:10]:
        sim.publish(d.docno, d.text, d.title)
    sim.settle()
    e = sim.engines[home]
    acks = [(s, s.mailbox.shown) for s in e.subscriptions.values() if s.mailbox.shown]
    assert len(acks) > 3  # many subscriptions had alerts to acknowledge
    before = sim.ring.ledger.snapshot()["Replicate"].messages
    e.home.acknowledge(acks)
    assert all(s.mailbox.told is not None for s, _ in acks)  # on their way to the replicas
    assert set(e.store.homes.settled()) >= {s.id for s, _ in acks}
    sim.settle()
    assert all(s.mailbox.told is None for s, _ in acks)  # through
    assert not e.store.homes.copying
    assert sim.ring.ledger.snapshot()["Replicate"].messages - before == R - 1
    for sub_id in subs:
        boxes = [
            x.subscriptions[sub_id].mailbox
            for x in sim.engines.values()
            if sub_id in x.subscriptions
        ]
        assert len(boxes) == R and len({(b.first, tuple(b.queue)) for b in boxes}) == 1


@given(
    st.dictionaries(
        st.integers(1, 2**64 - 1),
        st.tuples(st.integers(0, 50), st.lists(st.sampled_from("ABCDEF"), min_size=1, max_size=5)),
        max_size=6,
    )
)
def test_a_homes_copy_of_numbered_alerts_carries_each_document_once_and_every_number(alerts):
    """Each subscription's alerts numbered from some start: the copy a home sends its
    replicas names each document once and gives back every (subscription, number, doc)."""
    kept = [
        (sub_id, start + i, (f"D{d}", f"title {d}", ""))
        for sub_id, (start, docs) in alerts.items()
        for i, d in enumerate(dict.fromkeys(docs))
    ]
    batch = numbered_batch(kept)
    assert len(batch.docnos) == len(set(batch.docnos)) == len({doc for _, _, doc in kept})
    back = numbered_alerts(batch)
    assert sorted((s, q, d) for s, got in back.items() for q, d in got) == sorted(kept)
    assert all(got == sorted(got) for got in back.values())


def test_a_copy_of_a_mailbox_takes_numbered_alerts_or_says_what_it_lacks():
    wl = workload(1)
    sim = replicated(wl)
    subs = subscribe_all(sim, wl)
    sub_id = next(iter(subs))
    e = next(e for e in sim.engines.values() if sub_id in e.subscriptions)
    store = e.store

    def box():  # read again after each copy: a replica folds what it kept when read
        return e.subscriptions[sub_id].mailbox

    start = box().next
    doc = ("X1", "", "")
    assert store.intake.put_alerts(numbered_batch([(sub_id, start, doc)]), lambda key: False) == []
    assert box().next == start + 1 and box().alerts(start, start + 1) == [doc]
    # a copy that passed the one before it: kept, and joined on when that one comes
    later = numbered_batch([(sub_id, start + 2, ("X3", "", ""))])
    assert store.intake.put_alerts(later, lambda key: False) == []
    assert box().next == start + 1
    between = numbered_batch([(sub_id, start + 1, ("X2", "", ""))])
    assert store.intake.put_alerts(between, lambda key: False) == []
    assert box().alerts(start, start + 3) == [doc, ("X2", "", ""), ("X3", "", "")]
    assert not box().early
    # a gap more alerts wait for than a copy keeps: it says what it lacks
    first_missing = box().next
    far = [(sub_id, first_missing + 1 + i, (f"F{i}", "", "")) for i in range(EARLY_ALERTS + 1)]
    assert store.intake.put_alerts(numbered_batch(far), lambda key: False) == [
        (sub_id, first_missing)
    ]
    assert box().next == first_missing and not box().early
    # a subscription whose record has not come yet: the whole record is asked for
    unknown = numbered_batch([(12345, 0, doc)])
    assert store.intake.put_alerts(unknown, lambda key: False) == [(12345, 0)]


def test_an_acknowledgement_overtaking_alerts_on_their_way_is_no_gap():
    """A home's copy of an acknowledgement may reach a replica before alerts numbered
    earlier do (they are copied to one replica after another): the replica moves its
    first alert on and asks for nothing; the alerts join on when they come."""
    wl = workload(1)
    sim = replicated(wl)
    subs = subscribe_all(sim, wl)
    sub_id = next(iter(subs))
    holders = [e for e in sim.engines.values() if sub_id in e.subscriptions]
    home = next(e for e in holders if e.serves(e.subscriptions[sub_id].key))
    replica = next(e for e in holders if e is not home)
    box = home.subscriptions[sub_id].mailbox
    new = [(f"N{i}", "", "") for i in range(3)]
    for doc in new:  # numbered at the home; their copies still on their way
        box.offer(doc)
    box.pop(1)  # and the subscriber acknowledged the first
    ack = home_record(home.subscriptions[sub_id], start=box.next)
    assert replica.store.homes.put_home(ack) is True  # no gap: nothing asked for
    copy = replica.subscriptions[sub_id].mailbox
    assert copy.first == box.first
    assert (
        replica.store.intake.put_alerts(numbered_batch([(sub_id, 0, new[0])]), lambda k: False)
        == []
    )
    late = numbered_batch([(sub_id, i, doc) for i, doc in enumerate(new)][1:])
    assert replica.store.intake.put_alerts(late, lambda k: False) == []
    copy = replica.subscriptions[sub_id].mailbox  # read again: what was kept is folded in
    assert list(copy.queue) == new[1:] and copy.next == box.next


def test_a_mailbox_knows_its_latest_acknowledged_documents_and_no_more():
    box = Mailbox()
    for i in range(3 * SEEN_KEPT):
        assert box.offer((f"D{i}", "", ""))
        box.pop(1)
        assert not box.offer((f"D{i}", "", ""))  # seen: not taken twice
    assert len(box.seen) == SEEN_KEPT and list(box.acked)[-1] == f"D{3 * SEEN_KEPT - 1}"
    assert box.offer(("D0", "", ""))  # long forgotten


@given(
    st.lists(st.tuples(st.integers(1, 400), st.booleans()), min_size=1, max_size=60),
    st.integers(300, 3000),
)
def test_a_mailbox_holds_no_more_bytes_than_its_limit_and_counts_what_it_drops(alerts, limit):
    """Alerts of any size, some acknowledged as they come: the mailbox never holds more
    than `limit` bytes (but always the newest alert), its size is the sum of what it holds,
    and every alert not acknowledged is either held or counted dropped, numbered on."""
    box, acked = Mailbox(), 0
    for i, (size, ack) in enumerate(alerts):
        assert box.offer((f"D{i}", "t" * size, ""), limit)
        assert box.size == sum(cost(d) for d in box.queue)
        assert box.size <= limit or len(box.queue) == 1
        assert box.queue[-1][0] == f"D{i}" and box.next == i + 1
        if ack:
            acked += len(box.queue)
            box.pop(len(box.queue))
    assert acked + box.dropped + len(box.queue) == len(alerts)


def test_a_copy_behind_does_not_push_what_a_mailbox_acknowledged_lately_out_of_its_memory():
    """A whole record from a copy that is behind brings its latest acknowledged, older
    than mine: merged, they pushed my latest out of my memory, and a batch announced again
    seconds later alerted them twice. The latest SEEN_KEPT by number stay; a copy ahead
    brings what I have not seen."""
    box = Mailbox()
    for i in range(2 * SEEN_KEPT):
        assert box.offer((f"D{i}", "", ""))
        box.pop(1)
    box.saw([f"D{i}" for i in range(SEEN_KEPT)], first=SEEN_KEPT)  # behind
    assert not box.offer((f"D{2 * SEEN_KEPT - 1}", "", ""))
    assert len(box.seen) == SEEN_KEPT
    ahead = 2 * SEEN_KEPT + 5
    box.saw([f"D{i}" for i in range(ahead - SEEN_KEPT, ahead)], first=ahead)
    assert not box.offer((f"D{ahead - 1}", "", "")) and len(box.seen) == SEEN_KEPT
    assert box.offer((f"D{SEEN_KEPT}", "", ""))  # the oldest of mine went, as they should


def test_a_dn_back_from_a_restart_finishes_its_own_batches_handed_back_to_it():
    """A DN restarted before it finished a batch gets the batch's copy back with its
    region, and nothing of it in memory: it announces the batch again itself."""
    wl, sim, subs, address = published_held(2)
    node = sim.engines[address]
    sim.ring.queue.clear()  # restarted before announcing: what it had in memory is gone
    node.reports.gathering.clear()
    node.dn.own.clear()
    sim.ring.clock.timers.clear()
    node.dn.incarnation ^= 1 << 40  # a new life: the batch's copy names the one before
    assert [h.key for h in node.store.batches.held.values()] == [node.me.id]  # its copy, back
    sim.ring.run(sim.ring.nodes[address], node.dn.take_over())
    sim.settle()
    assert node.counters["documents_taken_over"] == len(wl.docs)
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_stale_copy_of_a_dns_own_batch_coming_back_to_it_is_released_not_announced():
    """A copy of a batch the DN resolved in this life, whose release missed its holder,
    comes back to the DN with its region (hand-overs keep a copy's age): announcing it
    again would repeat its alerts once homes have forgotten them; it goes instead."""
    wl = workload(1)
    sim = replicated(wl)
    sim.hold(True)
    subs = subscribe_all(sim, wl)
    dn = sim.engines[sorted(sim.engines)[2]]
    docs = documents(wl)
    sim.publish_batch(docs, via=dn.me.address)
    before = sim.alerts()
    stale = pb.HeldBatch(key=dn.me.id, batch=12345, dn=dn.me.address)
    stale.incarnation = dn.dn.incarnation  # made in this life
    for d in docs[:2]:
        stale.documents.add(key=hash(d.docno) & 0xFFFF, docno=d.docno, ids=[1, 2])
    dn.store.merge(pb.Records(batches=[stale]))
    sim.ring.run(sim.ring.nodes[dn.me.address], dn.dn.take_over())
    sim.settle()
    assert not dn.store.batches.held and dn.counters["stale_copies_released"] == 1
    assert dn.counters["documents_taken_over"] == 0
    assert_exact(before + sim.alerts(), wl.oracle(subs))


def test_a_dn_that_resolves_its_batch_releases_its_copy():
    wl = workload(1)
    sim = replicated(wl)
    sim.hold(True)
    subscribe_all(sim, wl)
    dn = sorted(sim.engines)[5]
    docs = [Document(d.docno, analyze(d.text), d.title) for d in wl.docs[:8]]
    sim.publish_batch(docs, via=dn)
    assert sum(e.store.held_documents for e in sim.engines.values()) == 0
    assert not sim.engines[dn].dn.own


def test_a_node_joining_before_a_dns_replicas_is_handed_a_copy_and_released_with_them():
    """A node joins between a DN and its first replica while a batch is out: the replica
    hands it the copies of the keys before it, the batch's among them. When the batch is
    resolved the DN releases its copies where they are now, not only where it put them (a
    stale copy is announced again by whoever comes to own the DN's key)."""
    wl = workload(1)
    sim = replicated(wl)
    sim.hold(True)
    subs = subscribe_all(sim, wl)
    dn = sim.engines[sorted(sim.engines)[5]]
    first = dn.ctx.replica_set()[0]
    sim.ring.run(sim.ring.nodes[dn.me.address], dn.dn.publish_batch(documents(wl)))
    between = (dn.me.id + ((first.id - dn.me.id) % (1 << 64)) // 2) % (1 << 64)
    sim.ring.join("node-new", node_id=between)
    sim.fail([])  # maintenance until the ring is correct
    assert sim.engines["node-new"].me in dn.ctx.replica_set()
    sim.settle()
    assert {a: e.store.held_documents for a, e in sim.engines.items() if e.store.batches.held} == {}
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_batch_whose_home_was_tried_again_releases_its_copies_once_it_took_them():
    """A home busy (or restarting) when its alerts first come takes them on a retry; the
    DN lets its batch's copies go then. (They stayed for good, and a later take-over
    announced the batch again, beyond what homes remember as seen.)"""
    wl = workload(1)
    sim = replicated(wl)
    sim.hold(True)
    subs = subscribe_all(sim, wl)
    home = max(sim.engines.values(), key=lambda e: len(e.subscriptions))
    deliver, refused = home.handlers["Deliver"], []

    def busy_once(batch):
        if not refused:
            refused.append(batch)
            return pb.DeliverReply(moved=True)
        return deliver(batch)

    home.handlers["Deliver"] = busy_once
    dn = next(a for a in sorted(sim.engines) if a != home.me.address)
    sim.publish_batch(documents(wl), via=dn)
    assert refused and sim.engines[dn].counters["alerts_retried"] > 0
    assert sum(e.store.held_documents for e in sim.engines.values()) == 0
    assert not sim.engines[dn].dn.own and not sim.engines[dn].reports.delivery.unsent
    assert_exact(sim.alerts(), wl.oracle(subs))


def test_a_copy_whose_release_missed_its_replica_goes_at_reconciliation():
    """A replica that was away when its DN released a batch keeps a stale copy (which a
    later take-over would announce again, long after its subscribers saw it): the DN's
    reconciliation, naming its unfinished batches, lets it go once it is old enough."""
    wl = workload(1)
    sim = replicated(wl)
    sim.hold(True)
    subscribe_all(sim, wl)
    dn = sim.engines[sorted(sim.engines)[5]]
    replica = sim.engines[dn.ctx.replica_set()[0].address]
    docs = [Document(d.docno, analyze(d.text), d.title) for d in wl.docs[:8]]
    sim.publish_batch(docs[:4], via=dn.me.address)
    missed = pb.HeldBatch(key=dn.me.id, batch=12345, dn=dn.me.address)
    missed.documents.add(key=1, docno="D1", ids=[1, 2])
    replica.store.batches.hold(missed)  # the release of this copy never reached the replica
    fresh = pb.HeldBatch(key=dn.me.id, batch=67890, dn=dn.me.address)
    replica.store.batches.hold(fresh)  # a copy the DN has not counted yet, for all we know
    replica.store.batches.held_since[12345] -= 3600
    sim.reconcile_round()
    assert list(replica.store.batches.held) == [67890]
    assert replica.counters["stale_copies_released"] == 1


def test_a_stale_replica_is_repaired_by_reconciliation_and_then_agrees():
    wl = workload(1)
    sim = replicated(wl)
    subscribe_all(sim, wl)
    gone = sim.subscribe(wl.queries[0])
    sim.unsubscribe(gone)  # tombstones, everywhere
    want = entry_holders(sim)
    victim = max(sim.engines, key=lambda a: len(sim.engines[a].index))
    e = sim.engines[victim]
    lost = [(k, x.subscription_id) for k in e.index.keys() for x in e.index.get(k)][::2]
    for key, sub in lost:  # a replica (or owner) that lost entries and a subscription
        e.index.remove(key, lambda x, sub=sub: x.subscription_id == sub)
    e.store.entries.tombstones.clear()
    homes = home_holders(sim)
    dropped = next(sid for sid, held in homes.items() if victim in held)
    del e.subscriptions[dropped]
    sim.reconcile_round()
    assert entry_holders(sim) == want
    assert home_holders(sim) == homes
    assert sum(x.counters["repairs"] for x in sim.engines.values()) >= len(lost) + 1
    before = sum(x.counters["repairs"] for x in sim.engines.values())
    sim.reconcile_round()  # now every digest agrees: nothing to repair
    assert sum(x.counters["repairs"] for x in sim.engines.values()) == before
    assert all(x.replication.copies() == R for x in sim.engines.values())


# ---- merging converges: a property of the records, whatever the order --------------------

KEYS = st.integers(1, 6).map(lambda k: k * (1 << 60))
ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete"]),
        st.sets(st.integers(0, 2), min_size=1),  # the copies that hear of it (a partition)
        KEYS,
        st.integers(1, 4),  # subscription
        st.integers(0, 3),  # version
    ),
    max_size=40,
)


def stores(n: int) -> list[RecordStore]:
    return [RecordStore(InvertedIndex(), {}, R, now=lambda: 100.0) for _ in range(n)]


def held(store: RecordStore) -> dict[tuple[int, int], tuple[int, bool]]:
    out = {(k, s): (v, True) for (k, s), (v, _) in store.entries.tombstones.items()}
    for key in store.index.keys():
        for e in store.index.get(key):
            out[(key, e.subscription_id)] = (e.version, False)
    return out


@hsettings(max_examples=150, deadline=None)
@given(ops)
def test_any_interleaving_of_puts_tombstones_and_partitions_converges(ops):
    copies = stores(3)
    want: dict[tuple[int, int], tuple[int, bool]] = {}
    for op, where, key, sub, version in ops:
        rank = (version, op == "delete")
        for i in sorted(where):
            entry = pb.QueryEntry(subscription_id=sub, version=version, index_id=key, home="h")
            copies[i].entries.put_entry(key, entry, 1.0 if op == "delete" else None)
        want[(key, sub)] = max(want.get((key, sub), rank), rank)
    for _ in range(2):  # the owner with each replica in turn, twice
        for replica in copies[1:]:
            reconcile(copies[0], replica)
    for c in copies:
        assert held(c) == want
        assert c.reconciliation.digests(0, 0) == copies[0].reconciliation.digests(0, 0)


@hsettings(max_examples=60, deadline=None)
@given(ops, st.permutations(range(3)))
def test_merging_is_order_free(ops, order):
    """Each copy's records merged into a fresh store in any order give the same store."""
    copies = stores(3)
    for op, where, key, sub, version in ops:
        for i in where:
            entry = pb.QueryEntry(subscription_id=sub, version=version, index_id=key, home="h")
            copies[i].entries.put_entry(key, entry, 1.0 if op == "delete" else None)
    records = [pb.Records(entries=list(c.entries.entry_records(0, 0))) for c in copies]
    a, b = stores(2)
    for r in records:
        a.merge(r)
    for i in order:
        b.merge(records[i])
        b.merge(records[i])  # twice: idempotent
    assert held(a) == held(b)


def test_tombstones_are_collected_after_their_time_and_an_old_one_deletes_but_is_not_kept():
    now = [100.0]
    store = RecordStore(InvertedIndex(), {}, R, now=lambda: now[0])
    entry = pb.QueryEntry(subscription_id=7, version=0, index_id=1 << 60, home="h")
    store.entries.put_entry(1 << 60, entry)
    assert store.entries.delete_entry(1 << 60, 7, 0)
    assert held(store) == {(1 << 60, 7): (0, True)}
    now[0] += TOMBSTONE_TTL + 1
    store.expire()
    assert held(store) == {}
    store.entries.put_entry(1 << 61, pb.QueryEntry(subscription_id=8, index_id=1 << 61, home="h"))
    assert store.entries.put_entry(
        1 << 61, pb.QueryEntry(subscription_id=8), now[0] - TOMBSTONE_TTL
    )
    assert held(store) == {}  # the entry went; a tombstone that old is not kept


def test_copies_of_batches_no_owner_counts_on_me_for_are_collected_with_the_rest():
    (store,) = stores(1)
    for name, key in ((1, 50), (2, 500)):
        batch = pb.HeldBatch(key=key, batch=name, dn="dn")
        batch.documents.add(key=name, docno=f"D{name}")
        store.batches.hold(batch)
    assert store.drop_outside([(0, 100)]) == 1
    assert list(store.batches.held) == [1] and store.held_documents == 1


def test_a_copy_handed_over_keeps_its_age_so_a_stale_one_still_goes():
    """A copy whose release missed it moves on with a hand-over (a leave, a Notify): its
    new holder counts its age from when it was first held, not from its arrival, so
    reconciliation still finds it stale (a copy moving every few seconds never was)."""
    now = [100.0]
    old, new = (RecordStore(InvertedIndex(), {}, R, now=lambda: now[0]) for _ in range(2))
    batch = pb.HeldBatch(key=50, batch=1, dn="dn")
    batch.documents.add(key=1, docno="D1")
    old.batches.hold(batch)
    now[0] += 8.0
    new.put_items(old.take_range(0, 100))
    assert new.batches.held_since[1] == 100.0
    now[0] += 4.0  # 12 s since it was made, 4 s at its new holder
    assert new.batches.release_stale(0, 100, live=set(), before=now[0] - 10.0) == 1


def home_and_successor():
    """A replicated ring with every query subscribed: a subscription, the node serving it
    (its home) and the home's successor (which holds its copy)."""
    wl = workload(1)
    sim = replicated(wl)
    sub_id = next(iter(subscribe_all(sim, wl)))
    home = next(
        e
        for e in sim.engines.values()
        if sub_id in e.subscriptions and e.serves(e.subscriptions[sub_id].key)
    )
    return sim, sub_id, home, sim.engines[home.chord.table.successor.address]


def owner_batch(home, sub_id: int, home_address: str) -> pb.AlertBatch:
    """An alert batch for the subscription's home key, sent to a node the DN's lookup
    names its owner (the owner flag), naming the home it knew."""
    batch = alert_batch([(("D1", "", ""), [sub_id])])
    batch.home_id, batch.owner, batch.home = home.subscriptions[sub_id].key, True, home_address
    return batch


def test_a_node_whose_live_predecessor_owns_a_home_key_does_not_take_its_alerts():
    """The DN's lookup (stale) names my node for a home key, and the home it knew refuses
    connections; but my predecessor is alive and the key is on its side (it joined between
    the old home and me): alerts taken here would sit where no stream looks."""
    sim, sub_id, home, succ = home_and_successor()
    assert succ.chord.table.predecessor == home.me and sub_id in succ.subscriptions
    batch = owner_batch(home, sub_id, "gone:1")
    reply = sim.ring.run(sim.ring.nodes[succ.me.address], succ.home.on_deliver(batch))
    assert reply.moved and succ.subscriptions[sub_id].mailbox.next == 0


def test_a_home_back_while_its_successor_checks_on_it_numbers_the_alerts_alone():
    """My predecessor, a home, is gone from my table, and a batch for its key comes to me
    (its DN's lookup says the key is mine). I ask the home: it refuses. Meanwhile it is
    back and has notified me, taking its records from me: it numbers its alerts now, and
    two numberings would clash (one alert lost, another repeated). I answer `moved`."""
    sim, sub_id, home, succ = home_and_successor()
    succ.chord.forget(home.me)
    batch = owner_batch(home, sub_id, home.me.address)
    op = succ.home.on_deliver(batch)
    ping = next(op)
    assert ping.method == "Ping" and ping.peer.address == home.me.address
    succ.chord._set_predecessor(home.me)  # back, it notified me while I waited
    with pytest.raises(StopIteration) as done:
        op.throw(PeerUnreachable(ping.peer, "UNAVAILABLE"))
    assert done.value.value.moved and succ.subscriptions[sub_id].mailbox.next == 0


def test_a_home_refusing_while_still_my_predecessor_is_not_taken_for_gone():
    """A home back from a restart notifies me; my channel to it, still backing off after
    its restart, fails at once. Taking its key for mine then would number its alerts twice.
    Only once my table has dropped it (it really is gone) do I take its alerts."""
    sim, sub_id, home, succ = home_and_successor()
    sim.ring.fail(home.me.address)  # it refuses; my table has not noticed yet
    batch = owner_batch(home, sub_id, home.me.address)
    node = sim.ring.nodes[succ.me.address]
    assert sim.ring.run(node, succ.home.on_deliver(batch)).moved
    assert succ.subscriptions[sub_id].mailbox.next == 0
    sim.ring.run(node, succ.chord.check_predecessor())  # now it is gone from my table
    assert not sim.ring.run(node, succ.home.on_deliver(batch)).moved
    assert succ.subscriptions[sub_id].mailbox.next == 1


def test_a_mailbox_never_read_remembers_no_more_than_it_keeps():
    """Alerts dropped from a full mailbox are remembered as seen as acknowledged ones are,
    among the latest SEEN_KEPT: a subscriber who never reads does not grow its home's
    memory by a docno per document for ever."""
    box = Mailbox(limit=10)
    for i in range(3 * SEEN_KEPT):
        assert box.offer((f"D{i}", "", ""))
    assert len(box.queue) == 10 and box.dropped == 3 * SEEN_KEPT - 10
    assert len(box.seen) <= SEEN_KEPT + 10
    assert not box.offer((f"D{3 * SEEN_KEPT - 11}", "", ""))  # dropped lately: still seen
