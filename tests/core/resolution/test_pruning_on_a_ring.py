"""Pruning seen through a simulated ring: small filters err and the Term Dialogue catches
it; Observations 1 and 2 and piggybacked ids only ever prune, never cost an alert."""

from __future__ import annotations

from functools import partial

import pytest
from support.oracle import assert_exact
from support.ring_contents import index_entries
from support.workloads import make_settings, subscribe_all, workload

from cqengine.core.qn import qn
from cqengine.core.resolution.knowledge import knowledge
from cqengine.core.terms.bloom import BloomFilter
from cqengine.core.terms.queries import signature
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.text.analysis import analyze, term_id


def test_small_bloom_filters_err_and_term_dialogue_catches_it():
    """With 64-bit filters over ~40-term documents nearly every id tests "present": the
    filter prunes little, the dialogue must do the rest, and the alerts stay exact."""
    wl = workload(2)
    # the 64-bit filters really do err on these documents and queries
    fp = 0
    for doc in wl.docs:
        have = {term_id(t) for t in wl.terms[doc.docno]}
        bloom = BloomFilter.of(have, 64, Settings().bloom_hashes)
        fp += sum(
            term_id(t) in bloom for q in wl.queries for t in analyze(q) if term_id(t) not in have
        )
    assert fp >= 50
    out = {}
    for bits in (64, 8192):
        sim = EngineSimulator(
            16, make_settings(wl, strategy="ri", resolution="bf", bloom_bits=bits, seed=4), seed=4
        )
        subs = subscribe_all(sim, wl)
        reports = [sim.publish(d.docno, d.text, d.title) for d in wl.docs]
        assert_exact(sim.alerts(), wl.oracle(subs))
        out[bits] = sum(r.total(["TermDialogue"]).messages for r in reports)
    assert out[64] > out[8192]  # false positives cost dialogue, but never a wrong alert


# ---- observations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy,resolution,nodes",
    [
        ("ri", "td", 1),
        ("mhi", "bf", 2),
        ("mhi", "td", 16),
        ("ri", "bf", 40),
        ("oi", "td", 24),
        ("sap-mhi", "td", 9),
    ],
)
def test_observations_only_prune(strategy, resolution, nodes, monkeypatch):
    wl = workload(1)
    runs = {}
    for obs in (True, False):
        # a ring whose QNs know the document without Observations 1 and 2
        monkeypatch.setattr(qn, "knowledge", partial(knowledge, obs1=obs, obs2=obs))
        s = make_settings(wl, strategy=strategy, resolution=resolution, seed=9)
        sim = EngineSimulator(nodes, s, seed=9)
        subs = subscribe_all(sim, wl)
        reports = [sim.publish(d.docno, d.text, d.title, via=sim.pick()) for d in wl.docs]
        assert_exact(sim.alerts(), wl.oracle(subs))
        runs[obs] = ([r.candidates for r in reports], reports, subs)
    on, off = runs[True][0], runs[False][0]
    assert runs[True][2].keys() == runs[False][2].keys()  # the very same subscriptions
    assert all(a <= b for a, b in zip(on, off)), list(zip(on, off))
    assert sum(on) <= sum(off)
    if nodes == 1:
        # one node's region is the whole circle: Observation 1 knows every id, so only the
        # queries that match are left as candidates
        # (those alike under one key, one candidate: cqengine.core.state.postings.Block)
        want, held = wl.oracle(runs[True][2]), index_entries(sim)
        alike = [
            len({(k, signature(e)) for _, k, e in held if (e.subscription_id, d.docno) in want})
            for d in wl.docs
        ]
        assert on == alike
        assert sum(off) > sum(on)


# ---- piggybacking ---------------------------------------------------------------------------


@pytest.mark.parametrize("nodes,resolution", [(8, "td"), (24, "bf"), (64, "td")])
def test_piggybacking_only_strengthens_pruning_for_mhi(nodes, resolution):
    wl = workload(3)
    cands = {}
    for k in (0, 1, 3, 8):
        s = make_settings(wl, strategy="mhi", resolution=resolution, piggyback=k, seed=5)
        sim = EngineSimulator(nodes, s, seed=5)
        subs = subscribe_all(sim, wl)
        cands[k] = [sim.publish(d.docno, d.text, d.title).candidates for d in wl.docs]
        assert_exact(sim.alerts(), wl.oracle(subs))
    for lo, hi in ((1, 0), (3, 1), (8, 3)):
        assert all(a <= b for a, b in zip(cands[lo], cands[hi])), (lo, hi)
        assert sum(cands[lo]) <= sum(cands[hi])
