"""Query merging (cqengine.core.state.merging): a merged column never loses a match, and asks
the DN exactly what its members would have asked unmerged; on the simulator, alerts equal
the matcher's for every strategy and resolution, boolean queries included."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import Phase, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import SHAPES, boolean_expected, boolean_queries, make_settings, workload

from cqengine.core.resolution.knowledge import Knowledge
from cqengine.core.resolution.resolution import Resolver
from cqengine.core.state.merging import merged
from cqengine.core.state.postings import Block
from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.settings import RESOLUTIONS
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb

NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)  # a ring run is slow to shrink
IDS = range(1, 13)  # a small vocabulary: queries share their first questions often


def entry(sub: int, ids: set[int]) -> pb.QueryEntry:
    ids = sorted(ids)
    return pb.QueryEntry(subscription_id=sub, term_ids=ids, terms=[f"t{y}" for y in ids])


def resolve(parts, doc: set[int], ruled_out: set[int] | None, batch: int):
    """Resolve parts ((blocks, knowledge) each) told the document's answers, ruling out
    `ruled_out` first by filter (None: no filter): per part the subscriptions matched,
    the ids asked round by round, and the candidates."""
    r = Resolver.knowing(parts, batch)
    if ruled_out is not None:
        r.rule_out(~np.isin(r.terms, sorted(ruled_out)))
    rounds = []
    while len(at := r.asking()):
        rounds.append(sorted(zip(np.searchsorted(r.term_start, at, "right").tolist(), r.ids(at))))
        r.learn(at, np.isin(r.terms[at], sorted(doc)))
    found = [sorted(e.subscription_id for e in m) for m in r.matched()]
    return found, rounds, r.candidates.tolist()


queries = st.lists(st.sets(st.sampled_from(IDS), min_size=1, max_size=5), min_size=1, max_size=40)


@hsettings(max_examples=300, deadline=None)
@given(
    qs=queries,
    keys=st.data(),
    doc=st.sets(st.sampled_from(IDS)),
    df=st.lists(st.integers(0, 5), min_size=len(IDS), max_size=len(IDS)),
    parts=st.integers(1, 3),
    max_id=st.sampled_from(IDS),
    known=st.sets(st.sampled_from(IDS)),
    noise=st.one_of(st.none(), st.sets(st.sampled_from(IDS))),
    batch=st.integers(1, 3),
)
@example(
    qs=[{1, 2, 3}, {1, 2, 4}, {1, 2}], keys=None, doc={1, 2, 3}, df=[0] * 12, parts=1,
    max_id=12, known=set(), noise=None, batch=1,
)  # fmt: skip
def test_a_merge_never_loses_a_match_and_asks_what_its_members_would(
    qs, keys, doc, df, parts, max_id, known, noise, batch
):
    """Arbitrary lists (each query under one of its terms, the keys spread over `parts` QNs, those
    under the document's ids consulted, as a QN does), what each QN knows of the document
    (ids it holds, none above max_id), a sound filter (it passes every id the document
    holds, and errs on `noise`), and dialogue batches: merged, the matches are the brute
    force's, and the unmerged resolution's ids, round by round, at batch 1."""
    doc = {y for y in doc if y <= max_id}
    rarity = lambda y, t: df[y - 1]  # noqa: E731
    lists: dict[int, dict[int, list[pb.QueryEntry]]] = defaultdict(lambda: defaultdict(list))
    for sub, ids in enumerate(qs):
        key = sorted(ids)[0] if keys is None else keys.draw(st.sampled_from(sorted(ids)))
        if key in doc:  # a QN consults the lists under the document's own ids only
            lists[key % parts][key].append(entry(sub, ids))
    if not lists:
        return
    ruled_out = None if noise is None else set(IDS) - doc - noise
    got = {}
    for merge in (False, True):
        inputs = []
        for p in sorted(lists):
            know = Knowledge(present={y for y in known & doc} | set(lists[p]) & doc, max_id=max_id)
            blocks = [Block.of(es, rarity) for _, es in sorted(lists[p].items())]
            if merge:
                blocks = [merged(b, k) for b, k in zip(blocks, sorted(lists[p]))]
            inputs.append((blocks, know))
        got[merge] = resolve(inputs, doc, ruled_out, batch)
    brute = [
        sorted(e.subscription_id for es in lists[p].values() for e in es if doc >= set(e.term_ids))
        for p in sorted(lists)
    ]
    assert got[True][0] == brute
    assert got[False][0] == brute
    if batch == 1:  # the members' first questions are the merged column's: the same asks
        assert got[True][1] == got[False][1]


def test_a_merged_block_holds_every_entry_once():
    es = [entry(s, ids) for s, ids in enumerate([{1, 2, 3}, {1, 2, 4}, {1, 2}, {1, 5}, {1, 2, 3}])]
    b = Block.of(es, lambda y, t: {1: 9, 2: 0, 3: 1, 4: 1, 5: 0}[y])
    m = merged(b, 1)
    assert len(m) < len(b)  # {1, 2, ...} asks 2 first (rarest): one column
    assert m.held() == b.held() == len(es)
    assert sorted(e.subscription_id for e in m.all_entries()) == list(range(len(es)))
    # the merged column asks what its members share, the key's term aside: 2
    g = next(g for g in m.groups.tolist() if g is not None)
    assert len(g) == 3  # {1,2,3} twice (one column, queries alike), {1,2,4}, {1,2}
    column = m.codes[:, list(m.groups).index(g)]
    assert set(m.terms[column].tolist()) == {2}
    assert merged(Block.of(es[:1]), 1).groups is None  # nothing to merge: the block itself


def test_merging_is_off_by_default_and_travels_to_joining_nodes():
    from cqengine.core.terms.settings import Settings

    assert Settings().merge_queries is False
    assert Settings.from_pb(Settings(merge_queries=True).to_pb()).merge_queries is True


def merged_columns(sim: EngineSimulator) -> int:
    return sum(
        sum(g is not None for g in b.groups.tolist())
        for e in sim.engines.values()
        for k in e.index.keys()
        if (b := e.index.block(k)) is not None and b.groups is not None
    )


@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=4, deadline=None, derandomize=True, phases=NO_SHRINK)
@given(
    nodes=st.integers(1, 24),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    depth=st.sampled_from([0, 2]),
)
def test_merged_rings_alert_as_the_matcher_and_send_the_same_bytes(
    strategy, resolution, nodes, corpus_seed, seed, depth
):
    """Plain and boolean queries on a ring with merging and one without: each ring's
    alerts are the matcher's, and the two rings' messages are the same, byte for byte.
    (Candidates may be more: a merged column that matches is one more than its members.)"""
    wl = workload(corpus_seed)
    texts = list(wl.queries) + boolean_queries(wl, seed)
    texts += texts[:: max(1, len(texts) // 8)]  # some subscribed twice: their entries merge
    runs = {}
    for merge in (False, True):
        s = make_settings(
            wl, strategy=strategy, resolution=resolution, piggyback=depth, merge_queries=merge
        )
        sim = EngineSimulator(nodes, s, seed=seed)
        subs = {sim.subscribe(q).subscription_id: q for q in texts}
        ledger = []
        for d in wl.docs:
            report = sim.publish(d.docno, d.text, d.title)
            ledger.append(sorted((k, c.bytes, c.messages) for k, c in report.kinds.items()))
        want = boolean_expected(subs, wl.docs)
        assert len(want) >= 40  # not vacuous
        assert_exact(sim.alerts(), want)
        runs[merge] = ledger, merged_columns(sim)
    assert runs[True][1] > 0  # some queries were merged
    assert runs[True][0] == runs[False][0]
