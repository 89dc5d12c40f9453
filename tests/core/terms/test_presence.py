"""Term-presence headers (cqengine.core.terms.presence): a header says exactly which hot terms a
document holds, a QN never calls a document's term absent because of one, and a
simulated ring with headers sends exactly the matcher's alerts, each once, for every
strategy and both ways of resolving, conjunctive and boolean queries alike."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import (
    SHAPES,
    boolean_expected,
    boolean_oracle,
    boolean_queries,
    boolean_queries_of,
    make_settings,
    subscribe_all,
    workload,
)

from cqengine.core.frame import checks
from cqengine.core.resolution.knowledge import knowledge
from cqengine.core.resolution.runs import Run, announced, announcement, group_runs, per_id
from cqengine.core.terms import presence
from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.settings import Settings, SettingsError
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_frequencies, matches
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.corpus import generate_corpus

ids64 = st.integers(1, 2**64 - 1)


def encode(per_doc) -> list[int]:
    """Several documents' headers one after another, as an announcement carries them."""
    return [v for ps in per_doc for v in presence.encode_one(ps)]


@given(st.lists(st.lists(st.integers(0, 499), unique=True), max_size=4))
def test_a_header_decodes_to_what_was_encoded(docs):
    docs = [sorted(d) for d in docs]
    assert presence.decode(encode(docs), len(docs), 500) == docs


@given(st.lists(st.integers(0, 600), max_size=12), st.integers(0, 3), st.integers(0, 500))
def test_any_values_decode_to_well_formed_headers_or_are_refused(values, docs, k):
    try:
        got = presence.decode(values, docs, k)
    except ValueError:
        return
    assert len(got) == docs
    for ps in got:
        assert ps == sorted(set(ps)) and all(0 <= p < k for p in ps)
    assert encode(got) == values


@given(st.sets(ids64, max_size=40), st.sets(ids64, min_size=1, max_size=40))
def test_a_header_names_the_hot_ids_the_document_holds(hot, doc):
    hot_ids = np.array(sorted(hot), dtype=np.uint64)
    doc_ids = np.array(sorted(doc), dtype=np.uint64)
    ps = presence.places(hot_ids, doc_ids)
    assert set(hot_ids[ps].tolist()) == hot & doc
    assert presence.places_of(presence.encode_one(ps), len(hot)).tolist() == ps


@hsettings(max_examples=60)
@given(
    st.sets(ids64, min_size=1, max_size=30),
    st.sets(ids64, max_size=30),
    st.lists(ids64, min_size=1, max_size=4, unique=True),
    st.integers(0, 3),
    st.data(),
)
def test_no_document_id_is_ever_called_absent_with_a_header(doc, hot, bounds, k, data):
    """Whatever a QN's region and however its runs were split, the ids a header adds
    never make a document's id absent, and every hot id the document lacks is absent."""
    ids = sorted(doc)
    hot_ids = np.array(sorted(hot | set(data.draw(st.lists(st.sampled_from(ids))))), np.uint64)
    cuts = sorted(bounds)
    runs = group_runs(
        [Run.whole(ids)], per_id(lambda y: next((c for c in cuts if y <= c), cuts[0])), k
    )
    region = data.draw(st.sampled_from([None, (cuts[-1], cuts[0])]))
    header = (hot_ids[presence.places(hot_ids, np.array(ids, np.uint64))], hot_ids)
    for runs_here in runs.values():
        know = knowledge(runs_here, ids[-1], region, k, header=header)
        assert not know.absent_in(np.array(ids, dtype=np.uint64)).any()
        lacking = np.array(sorted(set(hot_ids.tolist()) - doc), dtype=np.uint64)
        assert know.absent_in(lacking).all()


def test_an_announcement_carries_each_documents_header_through_a_hop():
    runs = [Run([5, 9], 9, 5)], [Run([3], 3, 3)]
    headers = [presence.encode_one([0, 4]), presence.encode_one([])]
    msg = announcement("n:1", 1, [(1, 9, runs[0]), (2, 3, runs[1])], headers)
    got = announced(pb.Announcement.FromString(msg.SerializeToString()))
    assert [d.presence for d in got] == headers == [[2, 0, 3], [0]]
    assert [presence.places_of(d.presence, 8).tolist() for d in got] == [[0, 4], []]
    assert announced(announcement("n:1", 1, [(1, 9, runs[0])]))[0].presence is None


@pytest.mark.parametrize(
    "values, why",
    [
        ([3, 0, 0], "a term-presence header of 3 terms"),  # more places than values
        ([1, 9], "place 9 among 8"),  # past the hot ids
        ([0, 0, 0], "left over"),  # values for a document the message does not have
        ([], None),  # no header: the paper's announcement
        ([2, 0, 6], None),  # places 0 and 7
    ],
)
def test_an_owner_refuses_an_announcement_whose_header_does_not_decode(values, why):
    s = Settings(df={"a": 1}, header_terms=8)
    msg = announcement("n:1", 1, [(1, 9, [Run([5, 9], 9, 5)])])
    msg.presence.extend(values)
    got = checks._announce(s, msg)
    assert got is None if why is None else why in got


def test_headers_need_term_statistics_and_travel_to_a_joining_node():
    with pytest.raises(SettingsError, match="--stats"):
        Settings(header_terms=16).validate()
    s = Settings(df={"levee": 3, "river": 2, "flood": 2, "dam": 1}, header_terms=3).validate()
    again = Settings.from_pb(pb.EngineConfig.FromString(s.to_pb().SerializeToString()))
    assert again.header_terms == 3
    assert again.hot_ids.tolist() == s.hot_ids.tolist()
    assert len(s.hot_ids) == 3  # "dam", the least frequent, is not hot


@pytest.mark.parametrize("resolution", ("td", "bf"))
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=6, deadline=None, derandomize=True)
@given(
    nodes=st.integers(1, 32),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    depth=st.sampled_from([0, 2]),
    hot=st.sampled_from([1, 16, 256, 60_000]),  # 60,000: every term hot
)
def test_alerts_with_headers_equal_the_matcher(
    strategy, resolution, nodes, corpus_seed, seed, depth, hot
):
    wl = workload(corpus_seed)
    s = make_settings(
        wl, strategy=strategy, resolution=resolution, piggyback=depth, header_terms=hot
    )
    sim = EngineSimulator(nodes, s, seed=seed)
    subs = subscribe_all(sim, wl)
    for d in wl.docs:
        sim.publish(d.docno, d.text, d.title)
    want = matches(subs, wl.terms)
    assert len(want) >= 10  # not vacuous
    assert_exact(sim.alerts(), want)
    assert sim.tally["presence_bytes"] > 0 or nodes == 1  # one node sends no announcement


@pytest.mark.parametrize("resolution", ("td", "bf"))
def test_boolean_alerts_with_headers_equal_the_matcher(resolution):
    """Negated hot terms are settled by the header, phrases still asked of the DN."""
    for corpus_seed in sorted(SHAPES):
        wl = workload(corpus_seed)
        sim = EngineSimulator(
            16, make_settings(wl, strategy="mhi", resolution=resolution, header_terms=64), seed=3
        )
        queries = boolean_queries(wl, corpus_seed)
        subs = {sim.subscribe(q).subscription_id: q for q in queries}
        for d in wl.docs:
            sim.publish(d.docno, d.text, d.title)
        assert_exact(sim.alerts(), boolean_oracle(wl, subs))


def test_headers_cut_candidates_and_questions_without_changing_matches():
    """The same ring and documents with and without headers: the same matches, fewer
    candidates and fewer ids asked."""
    wl = workload(sorted(SHAPES)[0])
    got = {}
    for hot in (0, 256):
        sim = EngineSimulator(16, make_settings(wl, strategy="oi", header_terms=hot), seed=5)
        subscribe_all(sim, wl)
        reports = [sim.publish(d.docno, d.text, d.title) for d in wl.docs]
        asked = sum(r.total(("TermDialogue",)).bytes for r in reports)
        got[hot] = (sim.tally["candidates"], sim.tally["matches"], asked, sorted(sim.alerts()))
    assert got[256][1] == got[0][1] and got[256][3] == got[0][3]
    assert got[256][0] < got[0][0]
    assert got[256][2] < got[0][2]


def test_headers_stay_exact_while_gossip_reindexes_and_a_node_fails():
    """SAP-MHI learning popular terms by gossip moves entries while documents come, and a
    replicated ring loses a node halfway: with headers on, every alert is the matcher's,
    once."""
    rng = random.Random(11)
    docs = list(generate_corpus(160, seed=11, vocab_size=300, mean_terms=25))
    df = document_frequencies(docs)
    queries = boolean_queries_of(docs, df, seed=11, n=80)
    settings = Settings(
        strategy="sap-mhi", synopsis_k=30, reindex_grace=0, df=df, header_terms=40, replicas=3
    )
    sim = EngineSimulator(16, settings, seed=11)
    replies = [sim.subscribe(q) for q in queries]
    got, alive = [], sorted(sim.ring.nodes)
    for i, d in enumerate(docs):
        sim.publish(d.docno, d.text, d.title, via=rng.choice(alive))
        if i % 20 == 19:
            sim.gossip_round()
            got += sim.alerts()
        if i == len(docs) // 2:  # an owner of entries fails; its replicas serve them
            got += sim.alerts()
            victim = max(alive, key=lambda a: len(sim.engines[a].index))
            alive.remove(victim)
            sim.fail([victim])
    got += sim.alerts()
    assert sum(e.counters["reindexed"] for e in sim.engines.values()) > 0
    want = boolean_expected({r.subscription_id: q for q, r in zip(queries, replies)}, docs)
    assert len(want) > 300
    assert_exact(got, want)


@given(st.lists(st.integers(0, 600), max_size=12), st.integers(0, 3), st.integers(0, 500))
def test_an_owners_one_pass_check_agrees_with_decoding(values, docs, k):
    try:
        presence.decode(values, docs, k)
        fine = True
    except ValueError:
        fine = False
    assert (presence.problem(values, docs, k) is None) == fine
