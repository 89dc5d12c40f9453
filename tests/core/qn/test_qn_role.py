"""The QN alone (cqengine.core.qn.qn), at a node of a fake ring: it hears a batch's runs in
its region as the announcement leaves them there, resolves its candidates with their DN
(played by the test with a real Documents, the DN's own answers), and reports exactly the
subscriptions the brute-force matcher (cqengine.evaluation.setup.matcher) says each
document matches, each once, by Term Dialogue or by Bloom filters first, whatever the
piggyback depth, batching of questions and merging of queries."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.fakes import FakeNode, node_at, ring_at, ring_settings

from chord.protocol.calls import Call
from chord.protocol.ids import MASK
from chord.protocol.routing import NodeRef
from cqengine.core.frame.documents import Document, Documents
from cqengine.core.qn.qn import QN
from cqengine.core.resolution import matches
from cqengine.core.resolution.runs import Announced, Heard, Run, per_id, route_runs
from cqengine.core.terms.queries import analyze_query, entry_of
from cqengine.evaluation.setup.matcher import holds
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

# words that analysis leaves as they are: a document's words are its terms
VOCAB = [
    *("kelp", "moss", "fern", "reed", "sedg", "rush", "tarn", "bog", "fen", "peat", "loam"),
    *("silt", "clay", "marl", "chalk", "flint", "slate", "shale", "basalt", "granit"),
    *("quartz", "mica", "jade", "onyx"),
]
VOCAB_IDS = sorted(term_id(w) for w in VOCAB)
HOME = "home:1"  # where the matches' alerts go (the report names it; nobody calls it)

# node ids at, or next to, a term's id (where Observation 1's region ends), or anywhere
node_ids = st.one_of(
    st.tuples(st.sampled_from(VOCAB_IDS), st.integers(-1, 1)).map(lambda p: (p[0] + p[1]) & MASK),
    st.integers(0, MASK),
)
sequences = st.lists(st.sampled_from(VOCAB), min_size=2, max_size=16)


class QnAlone:
    """A QN at a node of a fake ring, the DN of what it hears another node, whose answers
    are a real Documents'; each report it gets is kept."""

    def __init__(self, ring: list[NodeRef], at: int, **kw) -> None:
        self.node: FakeNode = node_at(ring, ring[at], ring_settings(**kw))
        self.qn = QN(self.node.ctx)
        self.dn = ring[(at + 1) % len(ring)]
        self.documents = Documents(self.node.ctx.host.new_id, self.node.ctx.settings)
        self.reports: list[pb.MatchedRequest] = []
        peers = self.node.peers
        peers.on("TermDialogue", lambda call: self.documents.on_term_dialogue(call.request))
        peers.on("GetBloom", lambda call: self.documents.on_get_bloom(call.request))
        peers.on("Matched", self._matched)

    def _matched(self, call: Call) -> pb.Ack:
        assert call.peer == self.dn
        self.reports.append(call.request)
        return pb.Ack()

    def mine(self, term: str) -> bool:
        return self.node.owner(term_id(term)) == self.node.me

    def subscribe(self, sub: int, text: str) -> bool:
        """Index each alternative of the query here, under a term of it in my region;
        False (nothing indexed) if one has none: another node would hold it."""
        alternatives = analyze_query(text).alternatives
        keys = [min((t for t in alt.terms if self.mine(t)), default=None) for alt in alternatives]
        if None in keys:
            return False
        for number, (alt, key) in enumerate(zip(alternatives, keys)):
            entry = entry_of(alt, number)
            entry.subscription_id, entry.index_id, entry.home = sub, term_id(key), HOME
            self.node.ctx.index.put(entry.index_id, entry)
        return True

    def heard(self, sequences: list[list[str]]) -> Heard:
        """The DN stores these documents and announces them: what stops in my region."""
        me, owner, k = self.node.me, self.node.owner, self.node.ctx.settings.piggyback
        route = per_id(lambda y: None if owner(y) == me else owner(y))
        docs = []
        for i, sequence in enumerate(sequences):
            doc = Document(f"d{i}", list(dict.fromkeys(sequence)), sequence=sequence)
            kept = self.documents.store(doc)
            whole = Run.whole(sorted(kept.ids))
            mine = route_runs([(0, whole)], route, k).get(None)
            if mine:
                docs.append(Announced(kept.key, max(kept.ids), mine[0]))
        return Heard(self.dn, docs)

    def matched(self) -> list[tuple[int, str]]:
        """Every (subscription, docno) the QN's reports name, as often as named."""
        out = []
        for report in self.reports:
            keys = list(report.doc_keys)
            for d, (home, _), subs in matches.runs(report):
                assert home == HOME
                docno = self.documents.get(keys[d]).docno
                out.extend((sub, docno) for sub in subs)
        return out


@st.composite
def queries(draw, local: list[str], words: list[str]) -> str:
    """A query some term of whose every alternative is in `local`, its words mostly
    these (the documents'): a conjunction, an OR, a negated word or phrase, a phrase, a
    group."""
    mine = st.sampled_from(local)
    word = st.one_of(st.sampled_from(words), st.sampled_from(VOCAB))
    forms = [
        lambda: " ".join([draw(mine), *draw(st.lists(word, max_size=3))]),
        lambda: f"{draw(mine)} OR {draw(mine)}",
        lambda: f"{draw(mine)} -{draw(word)}",
        lambda: f'"{draw(mine)} {draw(word)}" {draw(word)}',
        lambda: f'{draw(mine)} -"{draw(word)} {draw(word)}"',
        lambda: f"({draw(mine)} | {draw(word)}) {draw(mine)}",
    ]
    return draw(st.sampled_from(forms))()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_ids, min_size=2, max_size=8, unique=True),
    st.data(),
    st.sampled_from(["td", "bf"]),
    st.integers(0, 3),
    st.integers(1, 3),
    st.booleans(),
)
def test_the_qn_reports_exactly_what_the_matcher_finds(ids, data, resolution, k, batch, merge):
    ring = ring_at(ids)
    t = QnAlone(
        ring,
        data.draw(st.integers(0, len(ring) - 1), "the QN"),
        resolution=resolution,
        piggyback=k,
        dialogue_batch=batch,
        merge_queries=merge,
    )
    docs = data.draw(st.lists(sequences, min_size=1, max_size=3), "documents")
    words = sorted({w for seq in docs for w in seq})
    local = [w for w in words if t.mine(w)]
    assume(local)  # (a QN hears nothing of a batch with no id in its region)
    texts = data.draw(st.lists(queries(local, words), min_size=1, max_size=12), "queries")
    subs = {sub: text for sub, text in enumerate(texts, 1) if t.subscribe(sub, text)}
    h = t.heard(docs)
    t.node.run(t.qn.heard(h))
    want = {
        (sub, f"d{i}")
        for i, sequence in enumerate(docs)
        for sub, text in subs.items()
        if holds(text, sequence)
    }
    got = t.matched()
    assert len(got) == len(set(got)), "a subscription alerted twice for one document"
    assert set(got) == want
    assert len(t.reports) == (1 if want else 0)  # one report to the DN, none of nothing


def test_a_qn_whose_dn_fails_counts_the_alerts_lost_and_reports_nothing():
    ring = ring_at([VOCAB_IDS[3], VOCAB_IDS[9], VOCAB_IDS[17]])
    t = QnAlone(ring, 1)
    local = [w for w in VOCAB if t.mine(w)]
    # a query the QN cannot settle alone: a term of it lies in another region
    elsewhere = next(w for w in VOCAB if not t.mine(w))
    assert t.subscribe(1, f"{local[0]} {elsewhere}")
    h = t.heard([[local[0], elsewhere]])
    t.node.peers.down.add(t.dn.address)
    t.node.run(t.qn.heard(h))
    assert not t.reports
    assert t.node.ctx.counters["dropped:dn_failed"] == 1


@pytest.mark.parametrize("resolution", ["td", "bf"])
def test_a_qn_asks_its_dn_only_what_it_cannot_know(resolution):
    """Its region's terms it knows present or absent from the runs (Observation 1), and
    the document's ids just before and after them; of the others, those its candidates
    need it asks the DN about (by filter first, resolving by filter)."""
    ring = ring_at([VOCAB_IDS[3], VOCAB_IDS[9], VOCAB_IDS[17]])
    t = QnAlone(ring, 1, resolution=resolution)
    here = [w for w in VOCAB if t.mine(w)]
    me = t.node.me.id
    # the others in ring order from me: the document's first and last of them border my run
    others = sorted((w for w in VOCAB if not t.mine(w)), key=lambda w: (term_id(w) - me) & MASK)
    unknown = others[len(others) // 2]
    assert t.subscribe(1, f"{here[0]} {unknown}")  # the DN must say
    assert t.subscribe(2, f"{here[0]} {here[1]}")  # settled here
    assert t.subscribe(3, f"{here[0]} -{here[2]}")  # settled here too
    h = t.heard([[here[0], here[1], *others], [here[0], here[2], *set(others) - {unknown}]])
    t.node.run(t.qn.heard(h))
    assert sorted(t.matched()) == [(1, "d0"), (2, "d0"), (3, "d0")]
    asked = [c.request for c in t.node.peers.sent("TermDialogue")]
    assert {y for r in asked for y in r.ids} == {term_id(unknown)}
    assert len(t.node.peers.sent("GetBloom")) == (resolution == "bf")
    if resolution == "td":  # no filter rules the second document out: asked of both
        assert sorted(len(r.doc_keys) for r in asked) == [2]
