"""Next-hop grouping (the paper's Algorithm 1) and key hand-over ranges, as properties."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.protocol.ids import BITS, SPACE, distance, in_open_closed
from chord.protocol.node import ChordNode
from chord.protocol.routing import NodeRef, RoutingTable
from chord.protocol.store import SortedKeyStore
from chord.simulation.oracle import RingOracle

ids = st.integers(min_value=0, max_value=SPACE - 1)
rings = st.sets(ids, min_size=1, max_size=64).map(
    lambda s: [NodeRef(i, f"n{k}") for k, i in enumerate(sorted(s))]
)


def tables(nodes, r=8):
    oracle = RingOracle(nodes)
    return oracle, {n: oracle.table(n, r) for n in nodes}


@settings(max_examples=150, deadline=None)
@given(rings, st.lists(ids, min_size=1, max_size=20), st.data(), st.sampled_from([1, 2, 8]))
def test_following_next_hops_reaches_the_owner(nodes, keys, data, r):
    oracle, by_node = tables(nodes, r)
    for key in keys:
        at = data.draw(st.sampled_from(nodes))
        for _ in range(len(nodes) + 1):
            hop = by_node[at].next_hop(key)
            if hop is None:
                break
            # every hop moves strictly closer to the key, without passing it
            assert distance(hop.id, key) < distance(at.id, key) or hop == oracle.owner(key)
            at = hop
        assert at == oracle.owner(key)


def scrambled_table(nodes, me, data):
    """A table as churn may leave it: any predecessor, successors in any order, holes."""
    t = RoutingTable(me, r=8)
    t.predecessor = data.draw(st.one_of(st.none(), st.sampled_from(nodes)))
    t.successors = data.draw(st.lists(st.sampled_from(nodes), max_size=8)) or [me]
    t.fingers = [data.draw(st.one_of(st.none(), st.sampled_from(nodes))) for _ in range(BITS)]
    return t


@settings(max_examples=200, deadline=None)
@given(rings, st.data(), st.booleans())
def test_precomputed_rules_answer_as_the_rules(nodes, data, scrambled):
    """The precomputed router and lookup step equal Algorithm 1 and ChordNode._step
    everywhere, at and beside every node id, for converged tables and for tables in any
    state churn may leave them in."""
    _, by_node = tables(nodes)
    me = data.draw(st.sampled_from(nodes))
    node = ChordNode(me)
    node.table = t = scrambled_table(nodes, me, data) if scrambled else by_node[me]
    keys = data.draw(st.lists(ids, max_size=30))
    keys += [(n.id + d) % SPACE for n in nodes for d in (-1, 0, 1)]

    def hop(key):
        h = t.next_hop(key)
        return None if h == me else h

    for key in keys:
        assert t.router()(key) == hop(key)
        assert node.step(key) == node._step(key)
    places, hops = t.routes(np.array(keys, dtype=np.uint64))  # every key at once
    assert [hops[i] for i in places.tolist()] == [hop(key) for key in keys]
    assert len(set(hops)) == len(hops)  # a hop once: a run cut only where its hop changes
    t.fingers = list(reversed(t.fingers))  # a changed table is routed afresh
    assert all(t.router()(key) == hop(key) for key in keys)
    assert all(node.step(key) == node._step(key) for key in keys)
    places, hops = t.routes(np.array(keys, dtype=np.uint64))
    assert [hops[i] for i in places.tolist()] == [hop(key) for key in keys]


@settings(max_examples=150, deadline=None)
@given(rings, st.lists(ids, max_size=60), st.data())
def test_group_by_next_hop_partitions_ids(nodes, keys, data):
    oracle, by_node = tables(nodes)
    me = data.draw(st.sampled_from(nodes))
    local, groups = by_node[me].group_by_next_hop(keys)
    assert sorted(local + [k for g in groups.values() for k in g]) == sorted(keys)
    assert all(oracle.owner(k) == me for k in local)
    assert all(oracle.owner(k) != me for g in groups.values() for k in g)
    neighbours = set(by_node[me].neighbors())
    for hop, group in groups.items():
        assert hop in neighbours
        assert all(by_node[me].next_hop(k) == hop for k in group)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ids, st.binary(max_size=3)), max_size=40), ids, ids)
def test_take_range_removes_exactly_the_interval(items, lo, hi):
    store = SortedKeyStore()
    store.put_items(items)
    taken = store.take_range(lo, hi)
    inside = [(k, v) for k, v in items if in_open_closed(k, lo, hi)]
    assert sorted(taken) == sorted(inside)
    assert len(store) == len(items) - len(inside)
    assert all(not in_open_closed(k, lo, hi) for k in store.keys())
    assert store.keys() == sorted(store.keys())
