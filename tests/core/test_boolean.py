"""Queries in the query language on the simulator: alerts equal the matcher's reading of
each query's tree (cqengine.evaluation.matcher.holds), for every strategy and both ways
of resolving, each alert once; every alternative's entry placed, and gone again with an
unsubscribe."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import SHAPES, boolean_oracle, boolean_queries, make_settings, workload

from cqengine.core.errors import EngineError
from cqengine.evaluation.sim import EngineSimulator

STRATEGIES = ("ri", "oi", "mhi", "sap-mhi")


def entries(sim: EngineSimulator) -> list:
    return [e for eng in sim.engines.values() for k in eng.index.keys() for e in eng.index.get(k)]


def subscribe(sim: EngineSimulator, queries: list[str]) -> dict[int, tuple[str, object]]:
    out = {}
    for q in queries:
        reply = sim.subscribe(q)
        out[reply.subscription_id] = (q, reply)
    return out


@pytest.mark.parametrize("resolution", ("td", "bf"))
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(
    nodes=st.integers(1, 32),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    depth=st.sampled_from([0, 2]),
    bloom_bits=st.sampled_from([64, 1024]),
)
def test_boolean_alerts_equal_the_matcher(
    strategy, resolution, nodes, corpus_seed, seed, depth, bloom_bits
):
    wl = workload(corpus_seed)
    settings = make_settings(
        wl, strategy=strategy, resolution=resolution, piggyback=depth, bloom_bits=bloom_bits
    )
    sim = EngineSimulator(nodes, settings, seed=seed)
    subs = subscribe(sim, boolean_queries(wl, seed))
    want = boolean_oracle(wl, {s: q for s, (q, _) in subs.items()})
    assert len(want) >= 30  # not vacuous
    for reply in (r for _, r in subs.values()):
        assert len(reply.alternatives) >= 1
        assert all(a.index_term in reply.terms for a in reply.alternatives)
    # every alternative placed, once
    assert len(entries(sim)) == sum(len(r.alternatives) for _, r in subs.values())
    for d in wl.docs:
        sim.publish(d.docno, d.text, d.title)
    assert_exact(sim.alerts(), want)
    for _, reply in subs.values():
        sim.unsubscribe(reply)
    assert entries(sim) == []


def test_negations_and_phrases_are_asked_and_counted():
    wl = workload(1)
    sim = EngineSimulator(8, make_settings(wl, strategy="mhi"), seed=3)
    subscribe(sim, boolean_queries(wl, 5))
    for d in wl.docs:
        sim.publish(d.docno, d.text, d.title)
    tally = sim.tally
    assert tally["asked:phrases"] > 0 and tally["asked:negated"] > 0


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ('"levee held', 1),
        ("(levee OR storm", 1),
        ("levee OR", 9),
        ("-levee", 1),
        ("levee OR -storm", 1),
        ("the OR and", 1),
    ],
)
def test_bad_queries_are_refused_with_where(query, where):
    wl = workload(0)
    sim = EngineSimulator(4, make_settings(wl), seed=1)
    with pytest.raises(EngineError) as e:
        sim.subscribe(query)
    assert e.value.code == "INVALID_ARGUMENT"
    assert f"at character {where}" in str(e.value)
    assert entries(sim) == []
