"""A QN's report of matches (cqengine.core.resolution.matches): columns say what one Match
each says, and a ring uses them only once every member speaks protocol 3."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_all, workload

from chord.protocol.floor import Floor
from cqengine.core.frame import checks
from cqengine.core.frame.documents import prepare
from cqengine.core.node import EngineNode
from cqengine.core.qn import qn
from cqengine.core.resolution import matches
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb

HOMES = [("10.0.0.1:7001", 0), ("10.0.0.2:7001", 0), ("10.0.0.2:7001", 77), ("h:1", 2**64 - 1)]

entry = st.builds(
    lambda sub, home: pb.QueryEntry(subscription_id=sub, home=home[0], home_id=home[1]),
    st.integers(1, 2**64 - 1),  # ids are random 64 bits: never 0
    st.sampled_from(HOMES),
)


def matched(request: pb.MatchedRequest) -> Counter:
    """Every (document, home, subscription) a report says, as the DN reads it."""
    return Counter((d, home, s) for d, home, subs in matches.runs(request) for s in subs)


def as_sent(found, columns: bool) -> pb.MatchedRequest:
    request = pb.MatchedRequest(doc_keys=list(range(1, len(found) + 1)))
    matches.report(request, found, columns)
    return pb.MatchedRequest.FromString(request.SerializeToString())


@given(st.lists(st.lists(entry, max_size=40), min_size=1, max_size=6))
def test_columns_say_what_a_match_each_says(found):
    want = Counter(
        (d, (e.home, e.home_id), e.subscription_id) for d, es in enumerate(found) for e in es
    )
    one_by_one, chosen = as_sent(found, False), as_sent(found, True)
    assert not one_by_one.subscriptions
    assert matched(one_by_one) == matched(chosen) == want
    for request in (one_by_one, chosen):  # the receiver's checks pass both
        assert checks.invalid(Settings(), "Matched", request) is None
    # in columns exactly when they are smaller
    forced = pb.MatchedRequest(doc_keys=one_by_one.doc_keys)
    grouped: dict[tuple, list[int]] = {}
    for d, home, subs in matches.runs(one_by_one):
        grouped.setdefault((d, home), []).extend(subs)
    matches._columns(forced, [(d, h, subs) for (d, h), subs in grouped.items()], len(found))
    assert bool(chosen.subscriptions) == (forced.ByteSize() < one_by_one.ByteSize())
    if chosen.subscriptions:
        runs = [(d, home) for d, home, _ in matches.runs(chosen)]
        assert len(runs) == len(set(runs))  # a document's matches of one home: one run
    else:
        assert chosen == one_by_one


def test_a_report_of_many_matches_costs_8_bytes_and_a_little_a_match():
    found = [
        [
            pb.QueryEntry(subscription_id=s, home=h, home_id=k)
            for s in range(i + 1, 4000, 7)
            for h, k in HOMES[:2]
        ]
        for i in range(4)
    ]
    n = sum(map(len, found))
    columns, one_by_one = as_sent(found, True), as_sent(found, False)
    assert columns.ByteSize() <= 8.1 * n
    assert 3 * columns.ByteSize() < one_by_one.ByteSize()  # some 27 bytes a Match


def test_a_lone_match_goes_as_one():
    """Every run one match: the Match form, a few bytes smaller."""
    found = [[pb.QueryEntry(subscription_id=5, home=h, home_id=k)] for h, k in HOMES]
    assert not as_sent(found, True).subscriptions


def test_a_node_that_just_joined_uses_no_feature_until_it_heard_its_successor():
    f = Floor(3)
    assert not f.uses(3)
    f.heard(3, 4, limit=40)
    assert f.uses(3)
    f.heard(1, 2, limit=40)  # an older node three hops on
    assert not f.uses(3) and f.uses(1)


@pytest.mark.parametrize("older", [False, True])
def test_a_ring_reports_in_columns_only_once_no_member_is_older(older, monkeypatch):
    """16 nodes, 3 replicas: with one node of protocol 2 among them (its floor, which
    stabilization takes round), every report goes a Match each, as that node reads them;
    else in columns. The alerts are the matcher's either way."""
    wl = workload(1)
    settings = make_settings(wl, replicas=3)
    sim = EngineSimulator(16, settings, seed=3)
    if older:
        sim.ring.nodes[sorted(sim.engines)[5]].floor = Floor(2)
        sim.ring.rounds(20)
        assert {n.floor.version for n in sim.ring.live()} == {2}
    reports = []
    handle = EngineNode.handle

    def keep(self, method, request):
        if method == "Matched":
            reports.append(request)
        return handle(self, method, request)

    monkeypatch.setattr(EngineNode, "handle", keep)
    subs = subscribe_all(sim, wl)
    docs = [
        prepare(d.docno, d.text.encode(), d.title, settings.max_document_bytes) for d in wl.docs
    ]
    for i in range(0, len(docs), 8):
        sim.publish_batch(docs[i : i + 8], via=sim.pick())
    assert_exact(sim.alerts(), wl.oracle(subs))
    assert all(not r.subscriptions or not r.matches for r in reports)
    in_columns = sum(len(r.subscriptions) for r in reports)
    one_by_one = sum(len(r.matches) for r in reports)
    # most matches share a report with others of their home: smaller in columns
    assert in_columns + one_by_one >= 100  # not vacuous
    assert in_columns == 0 if older else in_columns > 4 * one_by_one


def test_a_qn_resolves_a_batch_at_once_and_reports_it_in_one_message(monkeypatch):
    """Each QN a batch of 30 documents reached asks its DN about all of them together, one
    request a round (never one per document), and reports them in one Matched."""
    wl = workload(1)
    settings = make_settings(wl, replicas=3)
    calls: Counter = Counter()  # (QN, batch, method) -> requests
    docs_asked: Counter = Counter()
    answer = qn.Resolution.answer

    def counted(self, ask, reply, failure=""):
        calls[(ask.qn.ctx.me.address, ask.heard.batch, ask.rpc)] += 1
        docs_asked[ask.rpc] += len(ask.request.doc_keys)
        return answer(self, ask, reply, failure)

    monkeypatch.setattr(qn.Resolution, "answer", counted)
    reports: Counter = Counter()
    handle = EngineNode.handle

    def keep(self, method, request):
        if method == "Matched" and request.doc_keys:
            reports[request.batch] += 1
        return handle(self, method, request)

    monkeypatch.setattr(EngineNode, "handle", keep)
    sim = EngineSimulator(8, settings, seed=3)
    subs = subscribe_all(sim, wl)
    docs = [
        prepare(d.docno, d.text.encode(), d.title, settings.max_document_bytes) for d in wl.docs
    ]
    sim.publish_batch(docs, via=sim.pick())
    assert_exact(sim.alerts(), wl.oracle(subs))
    longest = max(len(terms) for terms in subs.values())
    qns = {q for q, _, _ in calls}
    assert len(qns) >= 4
    assert max(calls.values()) <= longest + 1  # rounds, not documents
    assert docs_asked["TermDialogue"] >= 3 * sum(
        n for (_, _, rpc), n in calls.items() if rpc == "TermDialogue"
    )  # documents asked about together
    assert sum(reports.values()) <= len(qns)  # one report per QN that matched any
