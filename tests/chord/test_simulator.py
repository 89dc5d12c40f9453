"""The simulator shell: ring construction, churn and key ownership, against the oracle."""

import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chord.proto import chord_pb2 as pb
from chord.protocol.calls import PeerUnreachable
from chord.protocol.ids import hash_id, spread_ids
from chord.protocol.node import JoinError
from chord.protocol.routing import NodeRef
from chord.protocol.store import SortedKeyStore
from chord.simulation.oracle import RingOracle, ring_problems, zave_problems
from chord.simulation.simulator import Simulator

addr = Simulator.address


def built_by_joins(n, seed=0, r=8):
    sim = Simulator(r=r, seed=seed)
    sim.build_by_joins([addr(i) for i in range(n)])
    return sim


def assert_lookups_correct(sim, per_node=10, seed=0, verify=False):
    rng = random.Random(seed)
    oracle = sim.oracle()
    for a in sim.nodes:
        for _ in range(per_node):
            key = rng.getrandbits(64)
            owner, _ = sim.lookup(a, key, verify)
            assert owner == oracle.owner(key), (a, key)


@pytest.mark.parametrize("r", [8, 2])
def test_joins_reach_the_instant_build_tables(r):
    joined = built_by_joins(64, seed=3, r=r)
    instant = Simulator(r=r)
    instant.build_instant([addr(i) for i in range(64)])
    assert joined.problems() == []
    assert set(joined.nodes) == set(instant.nodes)
    for a in joined.nodes:
        assert joined.nodes[a].table == instant.nodes[a].table


@pytest.mark.parametrize("n", [1, 2, 3, 9])
def test_small_rings_converge(n):
    sim = built_by_joins(n, seed=n)
    assert sim.problems() == []
    assert_lookups_correct(sim)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 12])
def test_evenly_spaced_ids_converge_to_their_oracle_tables(n):
    """Evenly spaced ids (`ring up`'s) put finger starts exactly on node ids: a lookup of
    a start then finds the start's own node, whose range ahead is empty, not the circle."""
    sim = Simulator(seed=n)
    ids = spread_ids(n, seed=40_000 + n)
    sim.join(addr(0), node_id=ids[0])
    for i in range(1, n):
        sim.join(addr(i), via=addr(0), node_id=ids[i])
    for _ in range(40):
        sim.round()
    assert sim.problems() == []
    assert_lookups_correct(sim)


def test_thousand_node_ring_builds_instantly_and_routes():
    sim = Simulator(seed=1)
    sim.build_instant([addr(i) for i in range(1000)])
    assert sim.problems() == []
    assert_lookups_correct(sim, per_node=1)


def test_checks_catch_a_broken_ring():
    sim = Simulator()
    sim.build_instant([addr(i) for i in range(16)])
    nodes = sorted(sim.nodes.values(), key=lambda n: n.me.id)
    nodes[3].table.successors = [nodes[5].me] + nodes[3].table.successors[1:]  # skips one
    assert any(
        "successor ring holds 15 of 16" in p for p in zave_problems([n.table for n in nodes])
    )
    nodes[3].table.successors = list(reversed(nodes[3].table.successors))
    assert any("out of ring order" in p for p in sim.problems())
    sim2 = Simulator()
    sim2.build_instant([addr(i) for i in range(16)])
    victim = next(iter(sim2.nodes.values()))
    victim.table.fingers[40] = victim.me
    assert sim2.problems() == [f"{victim.me}: 1 of 64 fingers wrong"]


def test_graceful_leaves_reconverge():
    sim = built_by_joins(64, seed=5)
    rng = random.Random(5)
    for a in rng.sample(sorted(sim.nodes), 16):
        sim.leave(a)
    sim.converge(50)
    assert len(sim.nodes) == 48
    assert_lookups_correct(sim)


def test_failures_reconverge_including_adjacent_ones():
    sim = built_by_joins(64, seed=6)
    ordered = sorted(sim.nodes.values(), key=lambda n: n.me.id)
    dead = [n.me.address for n in ordered[10:15]]  # five neighbours in a row, fewer than r
    dead += [n.me.address for n in random.Random(6).sample(ordered[20:], 8)]
    for a in dead:
        sim.fail(a)
    # verified lookups route around the dead before maintenance has noticed anything
    assert_lookups_correct(sim, per_node=3, verify=True)
    sim.converge(50)
    assert_lookups_correct(sim)


@pytest.mark.parametrize("how", ["leave", "fail"])
def test_a_node_back_at_its_address_before_the_ring_forgot_it_joins_not_alone(how):
    """Fingers elsewhere still name the node that left (or failed): its join must not find
    itself as its own successor (it would think itself alone, a ring apart)."""
    sim = Simulator(seed=4)
    sim.build_instant([f"n{i}" for i in range(12)])
    getattr(sim, how)("n5")
    node = sim.join("n5")  # at once: no round has passed
    assert not node.table.alone() and node.settled
    sim.converge()
    assert sim.problems() == []


def test_keys_move_with_ownership_on_join_and_leave():
    sim = built_by_joins(16, seed=7)
    rng = random.Random(7)
    keys = {rng.getrandbits(64): f"v{i}".encode() for i in range(2000)}
    oracle = sim.oracle()
    for k, v in keys.items():
        sim.nodes[oracle.owner(k).address].store.put(k, v)

    def assert_keys_at_owners():
        oracle = sim.oracle()
        held = {}
        for node in sim.nodes.values():
            for k in node.store.keys():
                assert oracle.owner(k) == node.me, f"{k:x} held by {node.me}"
                held[k] = node.store.get(k)
        assert held == {k: [v] for k, v in keys.items()}

    for i in range(16, 40):
        sim.join(addr(i))
        sim.round()
    sim.converge(50)
    assert_keys_at_owners()
    for a in rng.sample(sorted(sim.nodes), 12):
        sim.leave(a)
    sim.converge(50)
    assert_keys_at_owners()


class CopyingStore(SortedKeyStore):
    """A store that hands over copies and keeps its own (a replicating store's way)."""

    copies = True

    def take_range(self, lo, hi):
        items = super().take_range(lo, hi)
        self.put_items(items)
        return items


def test_a_copying_store_hands_a_settled_predecessor_only_what_a_leaver_left():
    sim = built_by_joins(6, seed=3)
    for node in sim.nodes.values():
        node.store = CopyingStore()
    sim.rounds(3)
    s = next(iter(sim.nodes.values()))
    p = s.table.predecessor
    assert p.address in sim.nodes and sim.nodes[p.address].settled
    sent = lambda: sim.ledger.snapshot()["Notify.reply"].bytes  # noqa: E731
    before = sent()
    sim.rounds(3)
    assert sent() == before  # settled and unchanged: nothing handed again
    ghost = pb.NodeInfo(id=(p.id + 1) % (1 << 64), address="ghost")  # left just after p
    s.handle("Leave", pb.LeaveRequest(leaving=ghost, items=[pb.KeyItem(key=p.id, value=b"x")]))
    sim.rounds(2)
    assert sim.nodes[p.address].store.get(p.id) == [b"x"]


def test_region_listener_hears_a_new_predecessor():
    sim = built_by_joins(8, seed=8)
    heard = []
    for node in sim.nodes.values():
        node.region_listeners.append(lambda old, new, me=node.me: heard.append((me, old, new)))
    newcomer = sim.join(addr(99))
    sim.converge(20)
    owner_after = RingOracle([n.me for n in sim.nodes.values()]).successors(newcomer.me, 1)[0]
    assert (owner_after, sim.oracle().predecessor(newcomer.me), newcomer.me) in heard


def test_joining_with_a_taken_id_fails():
    sim = built_by_joins(4)
    taken = next(iter(sim.nodes.values())).me.id
    with pytest.raises(JoinError, match="already taken"):
        sim.join("intruder", node_id=taken)


def test_ledger_counts_every_lookup_message_and_its_bytes():
    sim = Simulator(r=1)
    sim.build_instant([addr(i) for i in range(256)])
    sim.ledger.reset()
    start = addr(0)
    key = hash_id("some key")
    owner, hops = sim.lookup(start, key)
    counts = sim.ledger.snapshot()
    assert hops > 0
    assert counts["FindSuccessor"].messages == hops == counts["FindSuccessor.reply"].messages
    assert set(counts) == {"FindSuccessor", "FindSuccessor.reply"}
    # request bytes: replay the lookup's requests and measure them independently
    request = pb.FindSuccessorRequest(key=key).SerializeToString()
    assert counts["FindSuccessor"].bytes == hops * len(request)


def test_memory_transport_unreachable_and_one_way_send():
    sim = Simulator()
    sim.build_instant([addr(i) for i in range(4)])
    ghost = NodeRef(1, "nowhere")
    with pytest.raises(PeerUnreachable):
        sim.transport.call(ghost, "Ping", pb.Empty())
    sim.ledger.reset()
    target = next(iter(sim.nodes.values())).me
    request = pb.NotifyRequest(node=pb.NodeInfo(id=5, address="x"))
    sim.transport.send(target, "Notify", request)
    assert sim.ledger.snapshot() == {"Notify": sim.ledger.snapshot()["Notify"]}
    assert sim.ledger.total().bytes == request.ByteSize()


def test_ring_problems_empty_for_oracle_tables_of_random_rings():
    rng = random.Random(11)
    for n in (1, 2, 5, 33):
        nodes = [NodeRef(rng.getrandbits(64), f"n{i}") for i in range(n)]
        oracle = RingOracle(nodes)
        assert ring_problems([oracle.table(x, 8) for x in nodes], 8) == []


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 48), st.integers(0, 2**32), st.data())
def test_verified_lookups_route_around_fresh_crashes(n, seed, data):
    """Right after crashes, before any maintenance, every verified lookup finds the live owner,
    as long as fewer than r consecutive nodes died (r = 4 here, so the property bites)."""
    sim = Simulator(r=4, seed=seed)
    sim.build_instant([addr(i) for i in range(n)])
    ordered = sorted(sim.nodes, key=lambda a: sim.nodes[a].me.id)
    dead = data.draw(st.sets(st.sampled_from(ordered), max_size=n - 1))
    runs = "".join("x" if a in dead else "." for a in ordered * 2)
    assume("xxxx" not in runs)
    for a in dead:
        sim.fail(a)
    oracle = sim.oracle()
    rng = random.Random(seed)
    for a in sim.nodes:
        key = rng.getrandbits(64)
        assert sim.lookup(a, key, verify=True)[0] == oracle.owner(key)


def test_instant_lookups_find_what_lookups_find_without_a_message():
    sim = Simulator(seed=4)
    sim.build_instant([addr(i) for i in range(200)])
    rng = random.Random(4)
    asked = [(a, rng.getrandbits(64)) for a in rng.sample(sorted(sim.nodes), 40) for _ in range(5)]
    real = [sim.lookup(a, key, verify=True)[0] for a, key in asked]
    sent = sim.ledger.total().messages
    assert sent > 0
    with sim.instant_lookups():
        assert [sim.lookup(a, key, verify=True)[0] for a, key in asked] == real
        assert sim.ledger.total().messages == sent
        for change in (
            lambda: sim.new_node("newcomer"),
            lambda: sim.leave(addr(0)),
            lambda: sim.fail(addr(1)),
        ):
            with pytest.raises(RuntimeError, match="membership changed"):
                change()
        assert len(sim.nodes) == 200 and addr(0) in sim.nodes and addr(1) in sim.nodes
    assert [sim.lookup(a, key)[0] for a, key in asked[:10]] == real[:10]
    assert sim.ledger.total().messages > sent  # asked the ring again
    sim.fail(addr(1))  # the ring may move again


def test_the_virtual_clock_fires_timers_in_order_set_and_skips_those_of_nodes_gone():
    """A node's app gets a Host whose time is the simulation's: it moves only as timers
    fire, to each one's time; a node that failed runs none of its timers."""
    hosts = {}

    def app(node, host):
        hosts[node.me.address] = host
        return node

    sim = Simulator(seed=1, app=app)
    sim.build_instant([addr(i) for i in range(3)])
    fired = []
    a, b = hosts[addr(0)], hosts[addr(1)]
    assert a.now() == b.now() == 0.0 and a.clock() == b.clock()
    a.later(2.0, lambda: fired.append(("a", a.now())))
    b.later(1.0, lambda: fired.append(("b", b.now())))
    b.later(5.0, lambda: fired.append(("b late", b.now())))
    sim.fail(addr(1))
    assert sim.clock.fire() == 3
    assert fired == [("a", 2.0)]  # b failed: its timers ran nothing
    assert a.now() == 5.0 and a.clock() - a.now() == b.clock() - 5.0
    assert sim.clock.fire() == 0
