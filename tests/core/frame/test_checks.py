"""Receivers check every message (cqengine.core.frame.checks, chord.protocol.checks), and
no message a correct node sends is refused: whole simulated rings, every strategy and
resolution, replicated with failures and churn or the paper's protocol, gossip and
re-indexing, piggybacking and batches of many documents, run with every message checked
(support.busy_rings): none is refused, and the alerts are still the brute-force matcher's.
Nor is any of the genuine requests captured from such rings, which the tests of each message
family break (tests/core/frame/test_malformed_*.py, tests/chord/test_malformed_messages.py).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.busy_rings import (
    LOG_MEMBERS,
    K,
    R,
    analyzed,
    busy_ring,
    refused,
    replicated_ring,
    ring_settings,
)
from support.oracle import assert_exact
from support.workloads import RESOLUTIONS, SHAPES, STRATEGIES, subscribe_all, workload

from chord.protocol import checks as chord_checks
from cqengine.core.frame import checks
from cqengine.core.node import ENGINE_SERVICE
from cqengine.evaluation.measuring.sim import EngineSimulator


@pytest.mark.parametrize("replicas", [1, R])
@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=4, deadline=None, derandomize=True)
@given(
    nodes=st.integers(8, 40),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    batch=st.sampled_from([2, 5, 12]),
    piggyback=st.sampled_from([0, 1, 3]),
)
@example(nodes=16, corpus_seed=1, seed=3, batch=5, piggyback=K)
def test_no_message_of_a_correct_ring_is_refused(
    strategy, resolution, replicas, nodes, corpus_seed, seed, batch, piggyback
):
    sim, got, want = busy_ring(
        strategy, resolution, replicas, seed, nodes, corpus_seed, batch, piggyback
    )
    assert refused(sim) == 0
    assert len(want) >= 40  # not vacuous
    assert_exact(got, want)
    kinds = set(sim.ring.ledger.snapshot())
    expected = {"Index", "Unindex", "Announce", "TermDialogue", "Matched", "Deliver"}
    expected |= {"GetBloom"} if resolution == "bf" else set()
    expected |= {"Gossip"} if strategy == "sap-mhi" else set()
    expected |= {"Replicate", "Reconcile", "Release"} if replicas > 1 else set()
    assert expected <= kinds, expected - kinds  # every kind was sent, and checked


@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=2, deadline=None, derandomize=True)
@given(nodes=st.integers(8, 40), seed=st.integers(0, 2**16), batch=st.sampled_from([2, 12]))
def test_no_message_of_a_ring_on_the_home_log_is_refused(strategy, nodes, seed, batch):
    """The same life on the home log (cqengine.core.homelog): homes' logs started, taken
    over by their successors as nodes leave, join and fail, every alert the matcher's."""
    sim, got, want = busy_ring(
        strategy, "td", LOG_MEMBERS, seed, nodes, 1, batch, piggyback=1, home_log=True
    )
    assert refused(sim) == 0
    assert len(want) >= 40  # not vacuous
    assert_exact(got, want)
    kinds = set(sim.ring.ledger.snapshot())
    assert {"LogPromise", "LogAppend", "Deliver"} <= kinds
    assert "Replicate" in kinds  # the index's entries are still copied


@pytest.mark.parametrize("replicas", [1, R])
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=2, deadline=None, derandomize=True)
@given(
    nodes=st.integers(8, 40),
    seed=st.integers(0, 2**16),
    batch=st.sampled_from([1, 5, 12]),
    lease=st.sampled_from([0.5, 30.0]),
)
def test_a_busy_ring_with_aggregate_filters_alerts_exactly(
    strategy, replicas, nodes, seed, batch, lease
):
    """The same life with filters (cqengine.core.announcement.filters): batches split over hops,
    filters gone stale as nodes leave, join and fail and gossip re-indexes."""
    sim, got, want = busy_ring(strategy, "td", replicas, seed, nodes, 1, batch, filter_lease=lease)
    assert refused(sim) == 0
    assert_exact(got, want)


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_ring_of_one_or_two_nodes_refuses_nothing(nodes):
    """A node alone sends itself every message (checked all the same)."""
    wl = workload(0)
    s = ring_settings(wl, "sap-mhi", "bf", 1, 1)
    sim = EngineSimulator(nodes, s, seed=1)
    subs = subscribe_all(sim, wl)
    docs = analyzed(wl, s)
    sim.publish_batch(docs[:12], via=sorted(sim.engines)[0])
    sim.gossip_round()
    sim.publish_batch(docs[12:], via=sorted(sim.engines)[-1])
    assert refused(sim) == 0
    assert_exact(sim.alerts(), wl.oracle(subs))


def dn_fails_before_announcing(strategy: str, resolution: str, seed: int):
    """Its successor takes the batch over, and announces it as its DN."""
    wl, s, sim, subs = replicated_ring(strategy, resolution, seed)
    dn = sorted(sim.engines)[2]
    sim.ring.run(sim.ring.nodes[dn], sim.engines[dn].dn.publish_batch(analyzed(wl, s)))
    sim.fail([dn])
    return sim, sim.alerts(), wl.oracle(subs)


def qn_fails_before_reporting(strategy: str, resolution: str, seed: int):
    """Its DN announces the batch again when its hold ends."""
    wl, s, sim, subs = replicated_ring(strategy, resolution, seed)
    dn = sorted(sim.engines)[3]
    sim.ring.run(sim.ring.nodes[dn], sim.engines[dn].dn.publish_batch(analyzed(wl, s)))
    sim.ring.drain()  # announced; no QN has resolved yet
    qn = max((n for n, _ in sim.heard if n.me.address != dn), key=lambda n: len(n.index))
    sim.heard = [(n, h) for n, h in sim.heard if n is not qn]
    sim.fail([qn.me.address])
    sim.settle()
    return sim, sim.alerts(), wl.oracle(subs)


def published_right_after_a_failure(strategy: str, resolution: str, seed: int):
    """Before maintenance notices: announcements reach the failed node's successor, which
    takes its keys, and alerts for the homes it served go to the successor (told the
    home is gone: AlertBatch.owner and home)."""
    wl, s, sim, subs = replicated_ring(strategy, resolution, seed)
    busiest = max(sim.engines, key=lambda a: len(sim.engines[a].subscriptions))
    sim.fail([busiest], converge=False)
    docs = analyzed(wl, s)
    for i in range(0, len(docs), 4):
        sim.publish_batch(docs[i : i + 4], via=sim.pick())
    sim.fail([])  # and then it does: the successor serves the home's subscriptions
    return sim, sim.alerts(), wl.oracle(subs)


FAILURES = (dn_fails_before_announcing, qn_fails_before_reporting, published_right_after_a_failure)


@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: f.__name__)
def test_no_message_is_refused_while_nodes_fail_mid_batch(failure, strategy, resolution):
    sim, got, want = failure(strategy, resolution, seed=5)
    assert refused(sim) == 0
    assert_exact(got, want)


def test_every_engine_method_that_takes_input_has_a_check():
    methods = {m.name for m in ENGINE_SERVICE.methods}
    assert set(checks.CHECKS) == methods - {"GetConfig"}


def test_every_kind_was_captured_and_passes_as_sent(captured):
    samples = captured.samples
    assert set(samples) == set(checks.CHECKS) | set(chord_checks.CHECKS)
    for method, got in samples.items():
        sim = captured.ring(method)
        for address, request in got:
            node = sim.engines.get(address, None)
            if node is None:
                continue  # it left or failed since
            assert checks.invalid(node.settings, method, request) is None, (method, request)
            assert chord_checks.invalid(node.chord, method, request) is None
