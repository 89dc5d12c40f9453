"""Keys move with ownership: as nodes join and leave a simulated ring, every query's
entries move to the key's new owner, and no query or alert is lost."""

from __future__ import annotations

import random

from support.oracle import assert_exact
from support.ring_contents import assert_index_consistent
from support.workloads import make_settings, workload

from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.text.analysis import analyze, term_id


def test_joins_and_leaves_keep_every_query_and_its_alerts():
    wl = workload(3)
    s = make_settings(wl, strategy="ri", resolution="td", piggyback=1, seed=12)
    sim = EngineSimulator(16, s, seed=12)
    homes_used = ["node-0", "node-5", "node-11"]
    replies = [sim.subscribe(q, via=homes_used[i % 3]) for i, q in enumerate(wl.queries)]
    subs = {r.subscription_id: analyze(q) for r, q in zip(replies, wl.queries)}
    homes = {r.subscription_id: r.home for r in replies}
    assert_index_consistent(sim, homes)
    loads_before = sorted(sim.load())

    for i in range(6):
        sim.ring.join(f"node-new-{i}")
    sim.ring.converge()
    assert len(sim.engines) == 22
    assert_index_consistent(sim, homes)
    assert any(len(sim.engines[f"node-new-{i}"].index) for i in range(6))  # keys did move
    assert sorted(sim.load()) != loads_before

    third = len(wl.docs) // 3
    batches = [wl.docs[:third], wl.docs[third : 2 * third], wl.docs[2 * third :]]
    for d in batches[0]:
        sim.publish(d.docno, d.text, d.title, via=sim.pick())
    assert_exact(sim.alerts(), wl.oracle(subs, [d.docno for d in batches[0]]))

    # graceful leaves of nodes that are home to no subscription (two of them new)
    rng = random.Random(1)
    leaving = rng.sample(
        [a for a in sorted(sim.engines) if a not in homes_used and "new" not in a], 3
    )
    leaving += ["node-new-0", "node-new-3"]
    for a in leaving:
        held = len(sim.engines[a].index)
        total = sum(sim.load())
        sim.ring.leave(a)
        assert sum(sim.load()) == total  # handed over, not lost
        assert held == 0 or total == len(homes)
    sim.ring.converge()
    assert sim.ring.problems() == []
    assert_index_consistent(sim, homes)
    for d in batches[1]:
        sim.publish(d.docno, d.text, d.title)
    assert_exact(sim.alerts(), wl.oracle(subs, [d.docno for d in batches[1]]))

    # unsubscribing still finds the entries wherever they moved
    for r in replies[::4]:
        sim.unsubscribe(r)
        del homes[r.subscription_id]
        del subs[r.subscription_id]
    assert_index_consistent(sim, homes)
    for d in batches[2]:
        sim.publish(d.docno, d.text, d.title)
    assert_exact(sim.alerts(), wl.oracle(subs, [d.docno for d in batches[2]]))


def test_a_leave_racing_a_join_loses_no_query():
    sim = EngineSimulator(4, Settings(strategy="mhi"), seed=0)
    reply = sim.subscribe("flood", via="node-0")
    oracle = sim.ring.oracle()
    x = oracle.owner(term_id("flood"))  # holds the query's entry
    assert x.address != reply.home
    y = oracle.nodes[(oracle.ids.index(x.id) + 1) % len(oracle.ids)]  # x's successor
    middle = (x.id + ((y.id - x.id) % 2**64) // 2) % 2**64
    sim.ring.join("node-new", via=y.address, node_id=middle)  # between x and y; no round yet
    sim.ring.leave(x.address)  # graceful: x hands its keys to y
    sim.ring.converge()
    sim.publish("DOC-1", "The flood broke the levee.")
    assert sum(sim.load()) == 1
    assert sim.alerts() == [(reply.subscription_id, "DOC-1")]
