"""The whole engine node on the simulator shell, checked against the brute-force matcher.

Every test runs real EngineNodes over an in-memory ring and compares what subscribers
receive with `cqengine.evaluation.setup.matcher.matches` over `document_terms`, or checks a
property the design states (every message is counted, the ring-wide tally is the sum of the
nodes'). Corpora are small and skewed (a small Zipfian vocabulary), so many queries match
and many nearly match: pruning and resolution both have work to do. The tests of one role
seen through such a ring sit in its room's folder (tests/core/<room>/test_*_on_a_ring.py)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.ring_contents import assert_index_consistent
from support.workloads import (
    RESOLUTIONS,
    SHAPES,
    STRATEGIES,
    make_settings,
    subscribe_all,
    workload,
)

from cqengine.core.node import ENGINE_SERVICE
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.text.analysis import analyze, term_id
from cqengine.text.trec import TrecDoc

DEPTHS = (0, 1, 3)
ENGINE_KINDS = ("Announce", "TermDialogue", "GetBloom", "Matched", "Deliver")


def publish_tracked(sim: EngineSimulator, doc: TrecDoc, via=None):
    """Publish; also return, per node, the candidates and matches it had for this document."""

    def counts():
        return {
            a: (e.counters["candidates"], e.counters["matches"]) for a, e in sim.engines.items()
        }

    before = counts()
    report = sim.publish(doc.docno, doc.text, doc.title, via=via)
    per_node = {a: (c - before[a][0], m - before[a][1]) for a, (c, m) in counts().items()}
    return report, per_node


# ---- 1. the central invariant -------------------------------------------------------------


def test_workloads_are_not_vacuous():
    for seed in SHAPES:
        wl = workload(seed)
        subs = {i: analyze(q) for i, q in enumerate(wl.queries)}
        hits = wl.oracle(subs)
        assert len(hits) >= 60, (seed, len(hits))
        matched_docs = {d for _, d in hits}
        assert len(matched_docs) >= len(wl.docs) // 2
        # and plenty of queries match nothing at all, so pruning is exercised
        assert len({q for q, _ in hits}) < len(subs)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=10, deadline=None, derandomize=True)
@given(
    nodes=st.integers(1, 64),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    batch=st.sampled_from([1, 3]),
    bloom_bits=st.sampled_from([64, 256, 1024]),
)
@example(nodes=1, corpus_seed=0, seed=1, batch=1, bloom_bits=64)
@example(nodes=2, corpus_seed=1, seed=2, batch=3, bloom_bits=64)
@example(nodes=64, corpus_seed=3, seed=3, batch=1, bloom_bits=64)
def test_alerts_equal_the_brute_force_matcher(
    strategy, resolution, depth, nodes, corpus_seed, seed, batch, bloom_bits
):
    wl = workload(corpus_seed)
    s = make_settings(
        wl,
        strategy=strategy,
        resolution=resolution,
        piggyback=depth,
        dialogue_batch=batch,
        bloom_bits=bloom_bits,
        seed=seed,
    )
    sim = EngineSimulator(nodes, s, seed=seed)
    subs = subscribe_all(sim, wl)
    want = wl.oracle(subs)
    assert len(want) >= 40  # not vacuous
    per_doc = Counter(d for _, d in want)
    for doc in wl.docs:
        report = sim.publish(doc.docno, doc.text, doc.title)
        assert report.terms == len(wl.terms[doc.docno])
        assert report.matches == per_doc[doc.docno]  # each matching query confirmed once
        # queries alike at a key are one candidate (merged: cqengine.core.state.postings.Block)
        alike = {frozenset(subs[sub]) for sub, d in want if d == doc.docno}
        assert report.candidates >= len(alike)
    assert_exact(sim.alerts(), want)
    assert sim.alerts() == []  # taken off the streams


# ---- 2. ledger ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy,resolution,depth,nodes,batch",
    [
        ("ri", "td", 0, 20, 1),
        ("ri", "bf", 0, 20, 1),
        ("mhi", "bf", 1, 37, 3),
        ("oi", "td", 3, 12, 3),
        ("sap-mhi", "bf", 0, 64, 1),
        ("mhi", "td", 0, 1, 1),
        ("ri", "bf", 1, 2, 1),
    ],
)
def test_ledger_accounts_for_every_document(strategy, resolution, depth, nodes, batch):
    wl = workload(2)
    s = make_settings(
        wl,
        strategy=strategy,
        resolution=resolution,
        piggyback=depth,
        dialogue_batch=batch,
        bloom_bits=256,
        seed=21,
    )
    sim = EngineSimulator(nodes, s, seed=21)
    replies = [sim.subscribe(q) for q in wl.queries]
    subs = {r.subscription_id: analyze(q) for r, q in zip(replies, wl.queries)}
    homes = {r.subscription_id: r.home for r in replies}
    assert sum(sim.load()) == len(subs)
    oracle = sim.ring.oracle()
    for doc in wl.docs:
        dn = sim.pick()
        report, per_node = publish_tracked(sim, doc, via=dn)
        kinds = report.kinds
        assert report.dn == dn
        assert set(kinds) <= {k + r for k in ENGINE_KINDS for r in ("", ".reply")}, kinds
        requests = {k: kinds[k].messages if k in kinds else 0 for k in ENGINE_KINDS}
        for k in ENGINE_KINDS:  # every request answered once
            replies_k = kinds[k + ".reply"].messages if k + ".reply" in kinds else 0
            assert requests[k] == replies_k, k
        res = report.resolution
        assert res.messages % 2 == 0
        assert res.messages == 2 * (requests["TermDialogue"] + requests["GetBloom"])
        assert res.bytes == sum(
            kinds[k].bytes for k in kinds if k.split(".")[0] in ("TermDialogue", "GetBloom")
        )
        remote_qns = [a for a, (c, _) in per_node.items() if c and a != dn]
        remote_matchers = [a for a, (_, m) in per_node.items() if m and a != dn]
        assert sum(c for c, _ in per_node.values()) == report.candidates
        if resolution == "td":
            assert requests["GetBloom"] == 0
        else:
            assert requests["GetBloom"] <= len(remote_qns)  # at most once per QN
        if not remote_qns:
            assert res.messages == 0
        # announcement: needed exactly when some term id is owned by another node
        ids = {term_id(t) for t in wl.terms[doc.docno]}
        away = {oracle.owner(x).address for x in ids} - {dn}
        assert (report.announcement.messages > 0) == bool(away)
        assert report.announcement.messages % 2 == 0
        # delivery: every home with a matching subscription other than the DN gets a batch
        hit_homes = {homes[s] for s, d in wl.oracle(subs, [doc.docno])} - {dn}
        assert requests["Deliver"] >= len(hit_homes)
        assert requests["Matched"] == len(remote_matchers)  # one report per QN with matches
        if nodes == 1:
            assert kinds == {}  # calls to oneself never cross the wire
    assert_exact(sim.alerts(), wl.oracle(subs))
    for r in replies[::3]:
        sim.unsubscribe(r)
        del homes[r.subscription_id]
    assert sum(sim.load()) == len(homes)
    assert_index_consistent(sim, homes)


def test_analyzed_input_alerts_as_text_does_and_the_tally_sums_the_nodes():
    """subscribe_terms/publish_terms (what prep output feeds) equal the matcher, and the
    simulator's ring-wide tally equals the sum of every node's counters."""
    w = workload(1)
    sim = EngineSimulator(16, Settings(strategy="mhi", resolution="bf", piggyback=1), seed=3)
    addresses = sorted(sim.engines)
    subs = {}
    for i, q in enumerate(w.queries):
        reply = sim.subscribe_terms(analyze(q), via=addresses[i % len(addresses)])
        subs[reply.subscription_id] = analyze(q)
    reports = [
        sim.publish_terms(d.docno, sorted(w.terms[d.docno]), via=addresses[i % 5])
        for i, d in enumerate(w.docs)
    ]
    assert set(sim.alerts()) == w.oracle(subs)
    assert sum(r.alerts for r in reports) == len(w.oracle(subs))
    for name in ("candidates", "matches", "alerts_delivered", "documents_published"):
        assert sim.tally[name] == sum(e.counters[name] for e in sim.engines.values())
    assert sim.tally["candidates"] == sum(r.candidates for r in reports)


def test_the_engine_service_serves_no_measurement():
    """What only measurement needs (a document's term ids) is no RPC of the node: the
    simulator's observer sees the documents as their DN stores them."""
    assert {m.name for m in ENGINE_SERVICE.methods} == {
        "GetConfig",
        "Index",
        "Unindex",
        "Announce",
        "GetBloom",
        "TermDialogue",
        "Matched",
        "Deliver",
        "Gossip",
        "Replicate",
        "Reconcile",
        "Repair",
        "Release",
        "LogPromise",
        "LogAppend",
        "LogFetch",
        "LogLeave",
        "Uptime",
    }
