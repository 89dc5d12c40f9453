"""Queries in the query language on the simulator: alerts equal the matcher's reading of
each query's tree (cqengine.evaluation.setup.matcher.holds), for every strategy and both ways
of resolving, each alert once; every alternative's entry placed, and gone again with an
unsubscribe."""

from __future__ import annotations

import random

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
    workload,
)

from cqengine.core.basis.errors import EngineError
from cqengine.core.frame.documents import prepare
from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.corpus import generate_corpus


def entries(sim: EngineSimulator) -> list:
    return [e for eng in sim.engines.values() for k in eng.index.keys() for e in eng.index.get(k)]


def subscribe(sim: EngineSimulator, queries: list[str]) -> dict[int, tuple[str, object]]:
    out = {}
    for q in queries:
        reply = sim.subscribe(q)
        out[reply.subscription_id] = (q, reply)
    return out


@pytest.mark.parametrize("batch", (1, 64))
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
    strategy, resolution, batch, nodes, corpus_seed, seed, depth, bloom_bits
):
    """Documents published one by one (the paper's protocol), or 64 to a batch (each QN
    reporting a batch's matches in columns, cqengine.core.resolution.matches)."""
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
    if batch == 1:
        for d in wl.docs:
            sim.publish(d.docno, d.text, d.title)
    else:
        docs = [
            prepare(d.docno, d.text.encode(), d.title, settings.max_document_bytes) for d in wl.docs
        ]
        for i in range(0, len(docs), batch):
            sim.publish_batch(docs[i : i + batch], via=sim.pick())
    assert_exact(sim.alerts(), want)
    # every match reported is an alert, or a document its subscriber had (two of its
    # query's alternatives matched it at different QNs): counted, never silently gone
    t = sim.tally
    dropped = sum(n for name, n in t.items() if name.startswith("dropped:"))
    assert t["matches"] == t["alerts_delivered"] + t["alerts_repeated"] + dropped
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


def test_merged_subscribers_are_one_candidate_and_leave_one_by_one():
    """Subscribers of one query (MHI files it under one term) share one column of their
    key's block: one candidate per document however many they are; each one that
    unsubscribes stops getting alerts, the others go on, until none is left."""
    wl = workload(1)
    sim = EngineSimulator(8, make_settings(wl, strategy="mhi"), seed=4)
    query = next(q for q in boolean_queries(wl, 2) if boolean_oracle(wl, {0: q}))
    replies = [sim.subscribe(query) for _ in range(5)]
    blocks = [eng.index.block(k) for eng in sim.engines.values() for k in eng.index.keys()]
    alternatives = len(replies[0].alternatives)
    assert sum(len(b) for b in blocks) == alternatives  # one column per alternative
    assert sum(b.held() for b in blocks) == 5 * alternatives  # holding every subscriber
    docs = list(wl.docs)
    for left in range(5, -1, -1):
        subs = {r.subscription_id: query for r in replies[:left]}
        for d in docs[:6]:
            report = sim.publish(d.docno + f"-{left}", d.text, d.title)
            assert report.candidates <= alternatives
        owed = boolean_oracle(wl, subs, {d.docno for d in docs[:6]})
        assert_exact(sim.alerts(), {(sub, f"{docno}-{left}") for sub, docno in owed})
        if left:
            sim.unsubscribe(replies[left - 1])
    assert entries(sim) == []


@pytest.mark.parametrize("resolution", ("td", "bf"))
def test_merged_boolean_entries_survive_r_minus_1_failures(resolution):
    """Replicated (R = 3), boolean queries, many subscribed twice (merged at their keys):
    two consecutive nodes fail; every alert after is the matcher's, once."""
    wl = workload(2)
    settings = make_settings(wl, strategy="mhi", resolution=resolution, replicas=3, seed=5)
    sim = EngineSimulator(12, settings, seed=5)
    sim.hold(True)
    queries = boolean_queries(wl, 7, 40)
    subs = subscribe(sim, queries + queries[:20])
    half = len(wl.docs) // 2
    for d in wl.docs[:half]:
        sim.publish(d.docno, d.text, d.title)
    merged = [
        a
        for a, eng in sim.engines.items()
        for k in eng.index.keys()
        if eng.index.block(k).members is not None
    ]
    assert merged
    oracle = sim.ring.oracle()
    at = [n.address for n in oracle.nodes].index(merged[0])
    sim.fail([oracle.nodes[(at + i) % len(oracle.nodes)].address for i in range(2)])
    assert sim.ring.problems() == []
    for d in wl.docs[half:]:
        sim.publish(d.docno, d.text, d.title, via=sim.pick())
    assert_exact(sim.alerts(), boolean_oracle(wl, {s: q for s, (q, _) in subs.items()}))


def test_reindexed_boolean_entries_alert_once_and_unsubscribe_wherever_they_moved():
    """SAP-MHI learning popular terms by gossip moves entries while documents come:
    boolean queries, each subscribed twice (merged), alert the matcher's documents once,
    and an unsubscribe finds every entry of its query wherever it moved."""
    rng = random.Random(9)
    docs = list(generate_corpus(160, seed=9, vocab_size=300, mean_terms=25))
    queries = boolean_queries_of(docs, document_frequencies(docs), seed=9, n=80)[:80]
    settings = Settings(strategy="sap-mhi", synopsis_k=30, reindex_grace=0)
    sim = EngineSimulator(16, settings, seed=9)
    replies = [(q, sim.subscribe(q)) for q in queries for _ in range(2)]
    got = []
    for i, d in enumerate(docs):
        sim.publish(d.docno, d.text, d.title, via=rng.choice(sorted(sim.ring.nodes)))
        if i % 20 == 19:
            sim.gossip_round()
            got += sim.alerts()
    got += sim.alerts()
    assert sum(e.counters["reindexed"] for e in sim.engines.values()) > 0
    want = boolean_expected({r.subscription_id: q for q, r in replies}, docs)
    assert len(want) > 300
    assert_exact(got, want)
    assert len(entries(sim)) == sum(len(r.alternatives) for _, r in replies)
    for _, r in replies[::2]:
        sim.unsubscribe(r)
    assert len(entries(sim)) == sum(len(r.alternatives) for _, r in replies[1::2])


HANDMADE = "The levee held after the storm. Later, the storm passed the levee"
QUERIES = {  # what each query must do with HANDMADE, by the README's definitions
    '"levee held"': True,
    '"held storm"': True,  # across the document's stop words
    '"passed the levee"': True,  # at the end of the document
    '"storm levee"': False,  # both there, never in a row
    'levee -"storm held"': True,
    'levee -"held storm"': False,  # NOT of a phrase that is there
    "levee OR storm": True,  # both alternatives match: one alert
    '"levee held" OR storm OR levee': True,
    "levee -storm": False,
}


@pytest.mark.parametrize("resolution", ("td", "bf"))
def test_a_handmade_document_alerts_what_the_language_says_once(resolution):
    sim = EngineSimulator(6, Settings(strategy="mhi", resolution=resolution), seed=2)
    replies = {sim.subscribe(q).subscription_id: q for q in QUERIES}
    sim.publish("D1", HANDMADE)
    got = sim.alerts()
    assert sorted(replies[s] for s, _ in got) == sorted(q for q, yes in QUERIES.items() if yes)


def test_a_batch_of_queries_with_many_alternatives_places_them_all():
    """A SubscribeBatch of 1,000 queries of 4 alternatives each is 4,000 entries: they go
    to their owners in Index messages of at most 1,000, and every query is placed."""
    sim = EngineSimulator(3, Settings(strategy="mhi"), seed=1)
    texts = [f"(w{i}a OR w{i}b) (w{i}c OR w{i}d)" for i in range(1000)]
    replies = sim.subscribe_many(texts)
    assert all(len(r.alternatives) == 4 for r in replies)
    assert len(entries(sim)) == 4000
    sim.publish("D1", "w7a w7d and w9b")
    assert sorted(sim.alerts()) == [(replies[7].subscription_id, "D1")]


def test_a_query_nested_too_deep_is_refused_with_where():
    sim = EngineSimulator(2, Settings(), seed=1)
    with pytest.raises(EngineError) as e:
        sim.subscribe("(" * 500 + "levee" + ")" * 500)
    assert e.value.code == "INVALID_ARGUMENT" and "nest more than 32" in str(e.value)
    assert len(sim.subscribe("(" * 32 + "levee" + ")" * 32).alternatives) == 1
    with pytest.raises(EngineError):  # a long phrase of one word is as many questions
        sim.subscribe('"' + "levee " * 65 + '"')


def test_a_dn_that_answers_no_phrase_question_fails_its_documents_not_the_qn(monkeypatch):
    """A DN answering the last round without its phrases (one that knows no phrase
    questions): the QN counts the alerts of its documents there lost (a QN's document
    fails whole, as when its DN fails) and goes on; it does not stop with an error."""
    from cqengine.core.frame import documents

    monkeypatch.setattr(
        documents,
        "_with_phrases",
        lambda req, docs: pb.DialogueReply(
            found=[d is not None for d in docs], present=b"\xff" * 8
        ),
    )
    sim = EngineSimulator(4, Settings(strategy="mhi"), seed=1)
    sim.subscribe("levee")
    sim.subscribe('"levee held"')
    sim.publish("D1", "The levee held")
    assert sim.alerts() == [] and sim.tally["dropped:dn_failed"] == 2
    sim.publish("D2", "The levee broke")  # no phrase to ask: resolved as ever
    assert len(sim.alerts()) == 1


def test_malformed_negations_and_phrases_are_refused_where_they_arrive():
    """An entry's negated terms and phrases are checked as its terms are (a DN asked a
    malformed phrase refuses no less), and a last round's phrase questions must add up."""
    from cqengine.core.frame import checks
    from cqengine.core.terms.queries import analyze_query, entry_of

    query = analyze_query('levee -flood "storm surge"')
    good = entry_of(query.alternatives[0], 0)
    good.subscription_id, good.index_id = 7, good.term_ids[0]
    settings = Settings()
    assert checks.invalid(settings, "Index", pb.IndexRequest(entry=good)) is None
    breaks = [
        lambda e: e.not_terms.append("x"),  # ids and terms apart
        lambda e: e.not_ids.__setitem__(0, 1),  # an id not its term's
        lambda e: e.phrases[0].ids.pop(),  # a phrase's ids and terms apart
        lambda e: (e.phrases[0].ids.pop(), e.phrases[0].terms.pop()),  # a phrase of one
        lambda e: e.phrases.add(ids=[1] * 70, terms=["a"] * 70),  # too many to ask
    ]
    for breaking in breaks:
        bad = pb.QueryEntry()
        bad.CopyFrom(good)
        breaking(bad)
        assert checks.invalid(settings, "Index", pb.IndexRequest(entry=bad)), bad
    ask = pb.DialogueRequest(doc_keys=[1], ids=[1, 2, 3], phrase_lengths=[2], phrase_docs=[0])
    assert checks.invalid(settings, "TermDialogue", ask) is None
    for lengths, docs in (([4], [0]), ([1], [0]), ([2], [1]), ([2], [])):
        del ask.phrase_lengths[:], ask.phrase_docs[:]
        ask.phrase_lengths.extend(lengths)
        ask.phrase_docs.extend(docs)
        assert checks.invalid(settings, "TermDialogue", ask), (lengths, docs)
