"""The one resolver (cqengine.core.resolution.resolution.Resolver) against the rules written out.

Parts come from arbitrary batches of documents, announced through arbitrary routing (QN
splits), some resolving by Bloom filters of any size (one whose DN failed gets none),
with any dialogue batch size; parts often share their lists. Each part must prune no
query that matches, ask in each round exactly what it would alone, and match exactly the
queries whose terms its document all holds; told the answers at once (measurement) it
must go through the same rounds.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support.runs import big_ids, deliver, ids

from cqengine.core.resolution.knowledge import Knowledge, knowledge, may_match
from cqengine.core.resolution.resolution import Resolver
from cqengine.core.resolution.runs import Run
from cqengine.core.state.postings import Block, ask_order, member
from cqengine.core.terms.bloom import BloomFilter
from cqengine.evaluation.measuring.meters import ShadowResolver
from cqengine.proto import cqengine_pb2 as pb


def reference(
    orders: list[list[int]],
    present: set[int],
    doc: set[int],
    batch: int,
    bloom: BloomFilter | None | bool,
) -> tuple[list[list[int]], set[int], bool]:
    """A part's queries (their ids in asking order) resolved alone by the rules: the ids
    each round asks, the queries matched, and whether it asked for the filter (`bloom`:
    False resolves by dialogue alone, None stands for a filter that never came)."""
    unknown = {i: [y for y in order if y not in present] for i, order in enumerate(orders)}
    matched = {i for i, u in unknown.items() if not u}
    pending = {i: u for i, u in unknown.items() if u}
    fetched = bloom is not False and bool(pending)
    if fetched:
        pending = {
            i: u for i, u in pending.items() if bloom is not None and all(y in bloom for y in u)
        }
    answers: dict[int, bool] = {}
    rounds = []
    while pending:
        asked = sorted(
            {y for u in pending.values() for y in [y for y in u if y not in answers][:batch]}
        )
        rounds.append(asked)
        answers.update((y, y in doc) for y in asked)
        left = {}
        for i, u in pending.items():
            if any(answers.get(y) is False for y in u):
                continue
            if all(y in answers for y in u):
                matched.add(i)
            else:
                left[i] = u
        pending = left
    return rounds, matched, fetched


def entries_of(queries: list[set[int]]) -> list[pb.QueryEntry]:
    return [
        pb.QueryEntry(subscription_id=i, term_ids=sorted(q), terms=[str(y) for y in sorted(q)])
        for i, q in enumerate(queries)
    ]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sets(st.one_of(ids, big_ids), min_size=1, max_size=30), min_size=1, max_size=3),
    st.lists(st.integers(0, 3), min_size=1, max_size=5),
    st.integers(0, 3),
    st.integers(1, 3),
    st.sampled_from([0, 16, 64, 512]),
    st.booleans(),
    st.data(),
)
def test_the_resolver_asks_what_each_part_would_alone_and_matches_brute_force(
    docs, dest_seq, k, batch, bloom_bits, by_rarity, data
):
    rarity = (lambda y, t: y % 7) if by_rarity else None
    # queries of the documents' ids (matches and near misses) and of others
    pool = st.one_of(st.sampled_from(sorted(set().union(*docs))), ids)
    entries = entries_of(
        data.draw(st.lists(st.sets(pool, min_size=1, max_size=6), min_size=1, max_size=30))
    )
    # each query indexed under one of its ids; a key's list is one block, whichever part holds it
    keys: dict[int, list[pb.QueryEntry]] = {}
    for e in entries:
        keys.setdefault(data.draw(st.sampled_from(list(e.term_ids))), []).append(e)
    lists = {key: Block.of(es, rarity, merge=False) for key, es in keys.items()}
    parts, wanted = [], []
    for _d, doc in enumerate(docs):
        doc_sorted = sorted(doc)
        bloom = BloomFilter.of(doc, bloom_bits, 2) if bloom_bits else None
        for local in deliver([Run.whole(doc_sorted)], dest_seq, k):
            mine = [lists[x] for x in sorted({x for r in local for x in r.ids}) if x in lists]
            if not mine:
                continue
            region = data.draw(st.one_of(st.none(), st.tuples(big_ids, big_ids), st.just((0, 0))))
            know = knowledge(local, doc_sorted[-1], region, k)
            how = data.draw(st.sampled_from(["td", "bf", "failed"])) if bloom else "td"
            parts.append((mine, know))
            wanted.append((doc, know, bloom if how == "bf" else None if how == "failed" else False))
    if not parts:
        return
    resolver = Resolver.knowing(parts, batch)
    expect = []
    for (mine, _), (doc, know, bloom) in zip(parts, wanted):
        block = Block.concat(mine)
        kept = may_match(block, know.absent_in(block.terms))
        candidates = block.entries[kept].tolist()
        orders = [ask_order(e, rarity) for e in candidates]
        matching = {e.subscription_id for e in block.entries if set(e.term_ids) <= doc}
        assert matching <= {e.subscription_id for e in candidates}  # pruning is sound
        rounds, matched, fetched = reference(orders, know.present, doc, batch, bloom)
        if bloom is not None:  # (a part whose filter never came loses its queries: its DN failed)
            assert {candidates[i].subscription_id for i in matched} == matching
        expect.append(
            (
                len(candidates),
                rounds,
                {candidates[i].subscription_id for i in matched},
                fetched,
                (block, kept, member(block.terms, know.present_array)),
            )
        )
    assert resolver.candidates.tolist() == [n for n, *_ in expect]
    # asked of the DN, round by round
    fetched = resolver.pending() > 0
    filters = [
        (p, bloom) for p, (_, _, bloom) in enumerate(wanted) if bloom is not False and fetched[p]
    ]
    assert [bool(fetched[p]) for p, (_, _, b) in enumerate(wanted) if b is not False] == [
        f for (*_, f, _), (_, _, b) in zip(expect, wanted) if b is not False
    ]
    resolver.rule_out(resolver.passes(filters))
    asked: list[list[list[int]]] = [[] for _ in parts]
    n = 0
    while questions := resolver.questions():
        for p, _at, question in questions:
            assert len(asked[p]) == n  # a part asks in the first rounds, then is done
            asked[p].append(question)
        resolver.learn(
            np.concatenate([at for _, at, _ in questions]),
            np.array(
                [y in wanted[p][0] for p, _, question in questions for y in question], dtype=bool
            ),
        )
        n += 1
    assert resolver.pending().sum() == 0
    for p, (got, found) in enumerate(zip(asked, resolver.matched())):
        assert got == expect[p][1]
        assert {e.subscription_id for e in found} == expect[p][2]
    # told the answers at once, from the candidates as given (how measurement resolves)
    told = ShadowResolver.of_candidates([given for *_, given in expect], batch)
    told.rule_out(told.passes(filters))
    rounds = told.settle(
        np.concatenate(
            [
                np.array([y in doc for y in given[0].terms.tolist()], dtype=bool)
                for (*_, given), (doc, _, _) in zip(expect, wanted)
            ]
        )
    )
    for p, (_, want, *_) in enumerate(expect):
        assert rounds[:, p].tolist() == [len(q) for q in want] + [0] * (len(rounds) - len(want))
    mask = told.matched_mask()
    assert [
        {e.subscription_id for e in given[0].entries[given[1]][mask[told.part == p]]}
        for p, (*_, given) in enumerate(expect)
    ] == [matched for _, _, matched, *_ in expect]


def test_two_documents_under_the_same_lists_are_each_answered_by_their_own():
    """A live QN's batch: two documents under the same lists are two parts, their terms
    apart; measured parts of one block share its columns, not its terms."""
    block = Block.of(entries_of([{1, 2}, {2, 3}, {4}]))
    know = Knowledge(present=set())  # knows nothing: every term is asked
    resolver = Resolver.knowing([([block], know), ([block], know)], 1)
    assert resolver.term_start.tolist() == [0, 4, 8]
    docs = [{1, 2, 4}, {2, 3}]
    asked = []
    while questions := resolver.questions():
        asked.append([q for _, _, q in questions])
        resolver.learn(
            np.concatenate([at for _, at, _ in questions]),
            np.array([y in docs[p] for p, _, q in questions for y in q], dtype=bool),
        )
    assert asked[0] == [[1, 2, 4], [1, 2, 4]]  # each query's first id, an id once per document
    assert [sorted(e.subscription_id for e in m) for m in resolver.matched()] == [[0, 2], [1]]
    nothing = np.zeros(len(block.terms), dtype=bool)
    measured = ShadowResolver.of_candidates(
        [(block, None, nothing), (block, np.array([True, False, True]), nothing)]
    )
    assert measured.columns.shape[1] == 3 and measured.term_start.tolist() == [0, 4, 8]
    assert measured.candidates.tolist() == [3, 2]
