"""The ring's floor (chord.protocol.floor): the oldest protocol any member speaks reaches every
node, and a feature of a newer protocol is used only while no older node is a member,
switching on again some rounds after the last one left, never before."""

import pytest

from chord.protocol import floor, versions
from chord.protocol.floor import Floor
from chord.protocol.ids import spread_ids
from chord.protocol.routing import NodeRef
from chord.simulation.simulator import Simulator

NODES = 24


def upgraded_ring() -> Simulator:
    sim = Simulator(r=8, seed=5)
    sim.build_by_joins([Simulator.address(i) for i in range(NODES)])
    sim.converge()
    return sim


def floors(sim: Simulator) -> set[int]:
    return {n.floor.version for n in sim.live()}


def test_a_ring_of_one_release_has_its_protocol_for_floor():
    sim = upgraded_ring()
    sim.rounds(2)
    assert floors(sim) == {versions.PROTOCOL}


@pytest.mark.parametrize("gone", ["fail", "leave"])
def test_an_older_member_holds_every_node_back_until_it_is_gone(gone, monkeypatch):
    monkeypatch.setitem(versions.FEATURES, "columns", versions.PROTOCOL)
    sim = upgraded_ring()
    old = sim.nodes[Simulator.address(7)]
    old.floor = Floor(1)  # a node of the release before
    rounds = 0
    while floors(sim) != {1}:
        sim.round()
        rounds += 1
        assert rounds <= NODES, "the older node's protocol did not reach every node"
    assert not any(n.uses("columns") for n in sim.live())
    getattr(sim, gone)(old.me.address)
    sim.converge()
    rounds = 0
    while floors(sim) != {versions.PROTOCOL}:
        sim.round()
        rounds += 1
        assert rounds <= max(floor.limit(n.me, n.table.successors) for n in sim.live()) + 2
    assert rounds > NODES  # the older node's floor went round until it came too far
    assert all(n.uses("columns") for n in sim.live())


def test_the_older_nodes_floor_is_dropped_only_once_it_came_further_than_the_ring_is_long():
    """A floor goes round the ring while its node is a member; held back at its node, it
    is kept at every other node for as long as the ring stands."""
    sim = upgraded_ring()
    old = sim.nodes[Simulator.address(7)]
    old.floor = Floor(1)
    sim.rounds(max(floor.limit(n.me, n.table.successors) for n in sim.live()) + NODES)
    assert floors(sim) == {1}
    assert max(n.floor.hops for n in sim.live()) < NODES


def test_the_hop_limit_is_a_wide_margin_over_the_rings_size():
    """From the successor list's spread: four times the size, and more."""
    for n in (8, 100, 1000, 100_000):
        ids = spread_ids(n, seed=1)
        me = NodeRef(ids[0], "me")
        succ = [NodeRef(i, f"s{i}") for i in ids[1:9]]
        assert 4 * n <= floor.limit(me, succ) <= 4 * n + floor.SLACK + 4
    assert floor.limit(NodeRef(1, "me"), [NodeRef(1, "me")]) == floor.SLACK  # alone
