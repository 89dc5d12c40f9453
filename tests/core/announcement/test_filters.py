"""Aggregate filters (cqengine.core.announcement.filters): a filter spares a hop only ids
of its region under which it holds no list; a simulated ring with filters sends exactly
the matcher's alerts, each once, for every strategy and both ways of resolving, while
subscriptions under new keys arrive between documents, nodes fail and join, and gossip
re-indexes; and a subscription under a key new at its owner is acknowledged only once
every filter granted without that key has expired."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import (
    SHAPES,
    boolean_expected,
    boolean_queries_of,
    make_settings,
    workload,
)

from cqengine.core.announcement.filters import Filter
from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.settings import Settings, SettingsError
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze, term_id
from cqengine.text.corpus import generate_corpus

ids64 = st.integers(0, 2**64 - 1)


def in_region(x: int, lo: int, hi: int) -> bool:
    return lo == hi or (lo < x <= hi if lo < hi else x > lo or x <= hi)


@given(ids64, ids64, st.lists(ids64, max_size=8), st.lists(ids64, min_size=1, max_size=8))
def test_a_filter_spares_only_ids_of_its_region_without_lists(lo, hi, keys, ids):
    f = Filter(lo, hi, np.array(sorted(set(keys)), dtype=np.uint64), until=1.0)
    spared = f.spares(np.array(ids, dtype=np.uint64))
    assert spared == all(in_region(x, lo, hi) and x not in keys for x in ids)


def test_a_lease_is_checked():
    with __import__("pytest").raises(SettingsError, match="filter lease"):
        Settings(filter_lease=-1).validate()
    s = Settings(filter_lease=2.5).validate()
    assert Settings.from_pb(s.to_pb()).filter_lease == 2.5


def waves(sim, wl, parts: int, rng: random.Random):
    """Subscribe the queries in `parts` waves, each followed by some documents: what the
    ring alerted, and what the matcher says it owed (a subscription owes the documents
    published after it)."""
    queries, docs = list(wl.queries), list(wl.docs)
    got, want, subs = [], set(), {}
    for w in range(parts):
        for q in queries[w::parts]:
            subs[sim.subscribe(q, via=rng.choice(sorted(sim.engines))).subscription_id] = analyze(q)
        batch = docs[w::parts]
        for d in batch:
            sim.publish(d.docno, d.text, d.title, via=rng.choice(sorted(sim.engines)))
        want |= wl.oracle(subs, [d.docno for d in batch])
        got += sim.alerts()
    return got, want


@hsettings(max_examples=24, deadline=None)
@given(
    strategy=st.sampled_from(STRATEGIES),
    resolution=st.sampled_from(["td", "bf"]),
    nodes=st.integers(2, 32),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    lease=st.sampled_from([0.5, 5.0, 60.0]),
    parts=st.integers(1, 4),
)
def test_alerts_with_filters_equal_the_matcher(
    strategy, resolution, nodes, corpus_seed, seed, lease, parts
):
    wl = workload(corpus_seed)
    s = make_settings(wl, strategy=strategy, resolution=resolution, filter_lease=lease)
    sim = EngineSimulator(nodes, s, seed=seed)
    got, want = waves(sim, wl, parts, random.Random(seed))
    assert len(want) >= 5  # not vacuous
    assert_exact(got, want)


def test_filters_spare_announcements_without_changing_alerts():
    """The same ring and documents with filters and without: the same alerts, fewer
    announcements sent."""
    wl = workload(sorted(SHAPES)[2])
    got = {}
    for lease in (0.0, 10.0):
        sim = EngineSimulator(64, make_settings(wl, strategy="oi", filter_lease=lease), seed=5)
        alerts, _ = waves(sim, wl, 1, random.Random(5))
        sent = sum(
            c.messages for k, c in sim.ring.transport.ledger.snapshot().items() if k == "Announce"
        )
        got[lease] = (sorted(alerts), sent, sim.tally["announcements_filtered"])
    assert got[10.0][0] == got[0.0][0]
    assert got[10.0][2] > 0 and got[0.0][2] == 0
    assert got[10.0][1] < got[0.0][1]


def published_ring(corpus_seed: int, nodes: int, lease: float, seed: int) -> EngineSimulator:
    """An RI ring with filters, every query subscribed and every document published."""
    wl = workload(corpus_seed)
    sim = EngineSimulator(nodes, make_settings(wl, strategy="ri", filter_lease=lease), seed=seed)
    for q in wl.queries:
        sim.subscribe(q)
    for d in wl.docs:
        sim.publish(d.docno, d.text, d.title)
    return sim


def test_a_new_key_is_acknowledged_only_after_the_filters_without_it_expired():
    """A node holds its hop's filter; a query under a key the hop holds no list for is
    subscribed: its acknowledgement waits out the filter, and the next document with
    the term reaches the hop and alerts."""
    sim = published_ring(sorted(SHAPES)[2], 24, lease=30.0, seed=2)  # filters granted
    sim.alerts()
    holders = [(a, e.filters.held) for a, e in sim.engines.items() if e.filters.held]
    assert holders
    clock = sim.ring.clock
    # a term no document or query has, whose owner's filter somebody holds
    held = {addr for _, h in holders for addr in h}
    term = next(t for t in map(word, range(100_000)) if owner_of(sim, term_id(t)) in held)
    before = clock.now()
    expiry = max(
        f.until for _, h in holders for addr, f in h.items() if addr == owner_of(sim, term_id(term))
    )
    assert expiry > before  # the filter is current: it would spare the term
    reply = sim.subscribe(term)
    assert clock.now() >= expiry  # the acknowledgement waited it out
    assert sum(e.counters["filter_waits"] for e in sim.engines.values()) > 0
    sim.publish("doc-new", f"a document about {term}", "")
    assert (reply.subscription_id, "doc-new") in set(sim.alerts())


def word(i: int) -> str:
    """A word no workload has, as the analyzer keeps it."""
    letters = "".join("bcdfghjklmnpqrstvwxz"[int(c)] for c in str(i))
    (term,) = analyze("qy" + letters)
    return term


def owner_of(sim: EngineSimulator, key: int) -> str:
    ids = sorted((e.chord.me.id, a) for a, e in sim.engines.items())
    return next((a for i, a in ids if i >= key), ids[0][1])


def test_filters_stay_exact_while_gossip_reindexes_and_nodes_fail_and_join():
    """SAP-MHI learning popular terms by gossip moves entries to keys new at their owners
    while documents come; a replicated ring loses a node and takes in another: with
    filters on, every alert is the matcher's, once."""
    rng = random.Random(13)
    docs = list(generate_corpus(160, seed=13, vocab_size=300, mean_terms=25))
    df = document_frequencies(docs)
    queries = boolean_queries_of(docs, df, seed=13, n=80)
    settings = Settings(
        strategy="sap-mhi", synopsis_k=30, reindex_grace=0, df=df, filter_lease=3.0, replicas=3
    )
    sim = EngineSimulator(24, settings, seed=13)
    replies = [sim.subscribe(q) for q in queries]
    got = []
    for i, d in enumerate(docs):
        sim.publish(d.docno, d.text, d.title, via=rng.choice(sorted(sim.engines)))
        if i % 20 == 19:
            sim.gossip_round()
            got += sim.alerts()
        if i == 60:  # an owner of entries fails; its replicas serve them
            got += sim.alerts()
            sim.fail([max(sorted(sim.engines), key=lambda a: len(sim.engines[a].index))])
        if i == 110:  # a node joins and takes keys from its successor
            got += sim.alerts()
            sim.ring.join("node-joined")
            sim.fail([])
    got += sim.alerts()
    assert sum(e.counters["reindexed"] for e in sim.engines.values()) > 0
    assert sum(e.counters["announcements_filtered"] for e in sim.engines.values()) > 0
    want = boolean_expected({r.subscription_id: q for q, r in zip(queries, replies)}, docs)
    assert len(want) > 300
    assert_exact(got, want)


def test_a_node_whose_region_changed_waits_out_its_former_owners_filters():
    """A node joins and takes keys from its successor, whose filters of the old region
    other nodes may hold: a subscription under a key new in the joiner's region is
    acknowledged only a lease after the join."""
    lease = 20.0
    sim = published_ring(sorted(SHAPES)[1], 12, lease, seed=4)
    clock = sim.ring.clock
    sim.ring.join("node-joined")
    joined_at = clock.now()
    sim.fail([])  # rounds until the ring is right again
    term = next(t for t in map(word, range(100_000)) if owner_of(sim, term_id(t)) == "node-joined")
    reply = sim.subscribe(term)
    assert clock.now() >= joined_at + lease
    sim.publish("doc-new", f"news of {term}", "")
    assert (reply.subscription_id, "doc-new") in set(sim.alerts())


def test_a_filter_that_cannot_be_read_spares_nothing():
    """A reply whose filter is out of order, or whose lease is not a number, is ignored:
    the hop keeps getting every announcement."""
    wl = workload(sorted(SHAPES)[0])
    sim = EngineSimulator(4, make_settings(wl, strategy="ri", filter_lease=5.0), seed=1)
    engine = next(iter(sim.engines.values()))
    hop = engine.chord.table.successor
    for reply in (
        pb.AnnounceReply(filter_lo=1, filter_hi=9, filter_keys=[7, 3], filter_lease=5.0),
        pb.AnnounceReply(filter_lo=1, filter_hi=9, filter_keys=[3], filter_lease=float("nan")),
    ):
        engine.filters.keep(hop, reply, asked_at=0.0)
        assert hop.address not in engine.filters.held
    engine.filters.keep(hop, pb.AnnounceReply(filter_lo=1, filter_hi=9, filter_lease=5.0), 0.0)
    assert engine.filters.held[hop.address].spares(np.array([4], dtype=np.uint64))
