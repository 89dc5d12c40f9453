"""No wall clock decides what is kept or taken over (cqengine.core.basis.ages, Host.incarnation):
tombstones and a DN's held batches across a wall clock stepped on one node."""

from __future__ import annotations

from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_all, workload

from cqengine.core.basis.limits import TOMBSTONE_TTL
from cqengine.core.frame.documents import Document
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze

KEY = 1 << 60
STEP = 15 * 60.0  # the clock step of issue 57's benchmark


class Clocks:
    """A node's two clocks, set by hand: `mono` never goes back, `wall` is stepped."""

    def __init__(self, mono: float, wall: float) -> None:
        self.mono, self.wall = mono, wall

    def store(self) -> RecordStore:
        return RecordStore(InvertedIndex(), {}, 3, now=lambda: self.mono, clock=lambda: self.wall)

    def tick(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


def entry(sub: int = 7) -> pb.QueryEntry:
    return pb.QueryEntry(subscription_id=sub, version=0, index_id=KEY, home="h")


def tombstoned(store: RecordStore) -> bool:
    return (KEY, 7) in store.entries.tombstones and not store.index.holds(KEY, 7)


def sent(store: RecordStore) -> pb.Records:
    return pb.Records(entries=list(store.entries.entry_records(0, 0)))


def test_a_tombstone_sent_to_a_node_whose_clock_is_ahead_is_kept_and_beats_a_stale_copy():
    """A receiver 15 minutes ahead read the sender's stamp as older than a tombstone lives,
    dropped it, and a copy that missed the deletion brought the entry back."""
    a, b, stale = Clocks(50.0, 1e9), Clocks(7000.0, 1e9 + STEP), Clocks(3.0, 1e9)
    sa, sb, ss = a.store(), b.store(), stale.store()
    for s in (sa, sb, ss):
        s.entries.put_entry(KEY, entry())
    assert sa.entries.delete_entry(KEY, 7, 0)
    sb.merge(sent(sa))
    assert tombstoned(sb)
    sb.merge(sent(ss))  # the deleted entry, from the copy that missed the deletion
    assert tombstoned(sb)


def test_a_tombstone_is_collected_by_its_age_whatever_the_wall_clock_does():
    """Stepped back an hour, then two forward: collected after TOMBSTONE_TTL on the node's
    monotonic clock, the time it spent at the nodes before counted."""
    a, b = Clocks(50.0, 1e9), Clocks(7000.0, 1e9)
    sa, sb = a.store(), b.store()
    sa.entries.put_entry(KEY, entry())
    sa.entries.delete_entry(KEY, 7, 0)
    a.tick(100.0)  # 100 s at its maker before it is sent
    sb.merge(sent(sa))
    b.wall -= 3600.0
    b.tick(TOMBSTONE_TTL - 101.0)
    sb.expire()
    assert tombstoned(sb)
    b.wall += 7200.0
    sb.expire()
    assert tombstoned(sb)
    b.tick(2.0)
    sb.expire()
    assert not sb.entries.tombstones


def test_a_tombstone_from_a_node_that_predates_ages_is_kept_its_whole_life():
    """An older node sends only its stamp, which my clock cannot judge: taken as new."""
    b = Clocks(10.0, 1e9 + STEP)
    sb = b.store()
    old = pb.EntryRecord(key=KEY, entry=pb.QueryEntry(subscription_id=7), deleted=1e9 - 3 * STEP)
    sb.merge(pb.Records(entries=[old]))
    b.tick(TOMBSTONE_TTL - 1.0)
    sb.expire()
    assert tombstoned(sb)
    b.tick(2.0)
    sb.expire()
    assert not sb.entries.tombstones


def test_a_ring_with_one_clock_a_quarter_hour_ahead_keeps_every_tombstone_on_every_copy():
    """Unsubscribed queries leave tombstones on the owner and every replica of their
    entries' keys, the stepped node included, and alert nobody."""
    wl = workload(1)
    sim = EngineSimulator(12, make_settings(wl, replicas=3, seed=3), seed=3)
    ahead = sorted(sim.engines)[4]
    sim.ring.step_clock(ahead, STEP)
    replies = {}
    for q in wl.queries:
        reply = sim.subscribe(q)
        replies[reply.subscription_id] = reply
    gone = sorted(replies)[::2]
    for sub_id in gone:
        sim.unsubscribe(replies[sub_id])
    sim.settle()
    tombs = set().union(*(e.store.entries.tombstones for e in sim.engines.values()))
    on_ahead = {t for t in tombs if ahead in owners(sim, t[0])}
    assert on_ahead and on_ahead <= set(sim.engines[ahead].store.entries.tombstones)
    assert {s for _, s in tombs} >= set(gone)  # single-alternative queries: slot = id
    subs = {i: analyze(r.query) for i, r in replies.items() if i not in gone}
    for d in wl.docs:
        sim.publish(d.docno, d.text, d.title)
    assert_exact(sim.alerts(), wl.oracle(subs))


def owners(sim: EngineSimulator, key: int) -> set[str]:
    """The key's owner and its next two successors (R = 3), as the true ring has them."""
    oracle = sim.ring.oracle()
    at = oracle.ids.index(oracle.owner(key).id)
    return {oracle.nodes[(at + i) % len(oracle.ids)].address for i in range(3)}


def test_a_dn_restarted_with_its_clock_set_back_still_announces_its_earlier_batch():
    """Its previous life ran a quarter hour ahead; its copy, handed back, looked made in
    this life (after its start by the wall clock), so resolved, and went unannounced."""
    wl = workload(1)
    sim = EngineSimulator(12, make_settings(wl, replicas=3, seed=3), seed=3)
    sim.hold(True)
    subs = subscribe_all(sim, wl)
    address = sorted(sim.engines)[2]
    sim.ring.step_clock(address, STEP)
    docs = [Document(d.docno, analyze(d.text), d.title) for d in wl.docs]
    sim.ring.run(sim.ring.nodes[address], sim.engines[address].dn.publish_batch(docs))
    node = sim.engines[address]
    sim.ring.queue.clear()  # stopped before announcing: what it had in memory is gone
    node.reports.gathering.clear()
    node.dn.own.clear()
    sim.ring.clock.timers.clear()
    sim.ring.step_clock(address, -STEP)  # the clock put right while it was down
    node.dn.incarnation ^= 1 << 40  # and a new life
    assert [h.key for h in node.store.batches.held.values()] == [node.me.id]
    sim.ring.run(sim.ring.nodes[address], node.dn.take_over())
    sim.settle()
    assert node.counters["documents_taken_over"] == len(docs)
    assert_exact(sim.alerts(), wl.oracle(subs))
