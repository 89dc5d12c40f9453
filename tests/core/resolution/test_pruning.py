"""Pruning and resolution are sound: they never drop a matching query, never confirm a wrong one.

The runs are split by arbitrary destination functions, as stale or inconsistent routing
tables would split them, and the QN's region is arbitrary too: knowledge must still never
call a document id absent.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.runs import SMALL, big_ids, deliver, ids

from chord.protocol.ids import in_open, in_open_closed
from cqengine.core.frame.documents import PublishedDoc
from cqengine.core.resolution.knowledge import knowledge, known_in_parts, may_match
from cqengine.core.resolution.resolution import pack_bits, unpack_bits, unpack_many
from cqengine.core.resolution.runs import Run, announcement, successors
from cqengine.core.state.postings import FEW, Block, member, union_terms
from cqengine.core.terms.bloom import BloomFilter, _positions, positions_array
from cqengine.evaluation.measuring.depths import Told, bytes_saved, truncated


@settings(max_examples=200, deadline=None)
@given(
    st.sets(st.one_of(ids, big_ids, st.just(0)), min_size=1, max_size=60),
    st.lists(st.integers(0, 3), min_size=1, max_size=7),
    st.integers(1, 12),
    st.data(),
)
def test_a_shallower_announcement_is_a_deeper_one_cut_short(doc, dest_seq, deep, data):
    """What shadow depths rely on: every hop's runs at depth k are the deeper runs with
    their succ ids cut to k, and bytes_saved is the exact difference on the wire."""
    k = data.draw(st.integers(0, deep - 1))
    whole = [Run.whole(sorted(doc))]
    deeper = list(deliver(whole, dest_seq, deep))
    assert list(deliver(whole, dest_seq, k)) == [truncated(runs, k) for runs in deeper]
    for runs in deeper:
        msg = announcement("node-3", 2, [(7, max(doc), runs)])
        cut = announcement("node-3", 2, [(7, max(doc), truncated(runs, k))])
        assert bytes_saved(msg.runs, [k, deep]) == [msg.ByteSize() - cut.ByteSize(), 0]


def assert_depths_know_what_each_depth_does(runs, max_id, region, k, obs1, obs2, probes):
    terms = np.array(
        sorted(set(probes) | {y for r in runs for y in (*r.ids, *r.succ, r.prev, r.next)}),
        dtype=np.uint64,
    )
    told = Told(
        runs, max_id, region, k, obs1, obs2
    )  # one per announcement, asked of block after block
    for ys in (terms[::2], terms, terms):  # the last: what it returns
        known = told.depths(ys)
        # queries of three consecutive terms (the last ones shorter): the block's terms are ys
        ids_ = ys.tolist()
        block = Block.of_rows(
            np.arange(len(ids_)), [ids_[i : i + 3] for i in range(len(ids_))], merge=False
        )
        assert np.array_equal(block.terms, ys)
        for d in range(k + 1):
            know = knowledge(truncated(runs, d), max_id, region, d, obs1, obs2)
            for absent, present in (
                (known.absent(d), known.present(d)),
                (told.at(d).absent_in(ys), member(ys, told.at(d).present_array)),
            ):
                assert np.array_equal(absent, know.absent_in(ys)), d
                assert np.array_equal(present, member(ys, know.present_array)), d
            assert np.array_equal(known.kept(block, d), may_match(block, know.absent_in(ys))), d
    return known


@settings(max_examples=200, deadline=None)
@given(
    st.sets(st.one_of(ids, big_ids, st.just(0)), min_size=1, max_size=60),
    st.lists(st.integers(0, 3), min_size=1, max_size=7),
    st.integers(0, 12),
    st.one_of(st.none(), st.tuples(big_ids, big_ids)),
    st.booleans(),
    st.booleans(),
)
def test_all_depths_at_once_know_what_each_depth_alone_does(doc, dest_seq, k, region, obs1, obs2):
    """Shadow depths read every depth's knowledge off one structure; as any announcement
    carries them, a local id's piggybacked arc only grows with the depth."""
    doc_sorted = sorted(doc)
    probes = {(y + e) % 2**64 for y in doc for e in (-1, 1)} | {0, 2**64 - 1}
    for local in deliver([Run.whole(doc_sorted)], dest_seq, k):
        known = assert_depths_know_what_each_depth_does(
            local, doc_sorted[-1], region, k, obs1, obs2, probes
        )
        assert known.irregular == []


run = st.builds(
    Run,
    st.lists(st.one_of(ids, big_ids), min_size=1, max_size=6),
    st.one_of(ids, big_ids),
    st.one_of(ids, big_ids),
    st.lists(st.one_of(ids, big_ids), max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(run, min_size=1, max_size=4),
    st.one_of(ids, big_ids),
    st.integers(0, 10),
    st.one_of(st.none(), st.tuples(big_ids, big_ids)),
    st.booleans(),
    st.booleans(),
    st.sets(st.one_of(ids, big_ids), max_size=30),
)
def test_all_depths_at_once_know_what_each_depth_does_from_any_runs(
    runs, max_id, k, region, obs1, obs2, probes
):
    """Even runs no announcement carries (wrapping, unordered succ ids): the arcs that do
    not grow with the depth are tested depth by depth."""
    assert_depths_know_what_each_depth_does(runs, max_id, region, k, obs1, obs2, probes)


def test_bytes_saved_counts_a_run_whose_length_prefix_shrinks():
    run = Run(
        list(range(1, 13)), prev=20, next=0, succ=list(range(30, 40))
    )  # 189 bytes, 107 without succ: a one-byte length then
    msg = announcement("", 0, [(1, 0, [run, Run([50], 40, 60, [70])])])
    for k in range(11):
        cut = announcement("", 0, [(1, 0, truncated([run, Run([50], 40, 60, [70])], k))])
        assert bytes_saved(msg.runs, [k]) == [msg.ByteSize() - cut.ByteSize()]


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.one_of(ids, big_ids), min_size=1, max_size=60),
    st.lists(st.integers(0, 3), min_size=1, max_size=7),
    st.integers(0, 5),
    st.tuples(big_ids, big_ids),
    st.booleans(),
    st.booleans(),
)
def test_knowledge_never_calls_a_document_id_absent(doc, dest_seq, k, region, obs1, obs2):
    doc_sorted = sorted(doc)
    probes = (
        set(doc) | {(y + 1) % 2**64 for y in doc} | {(y - 1) % 2**64 for y in doc} | {0, 2**64 - 1}
    )
    for local in deliver([Run.whole(doc_sorted)], dest_seq, k):
        know = knowledge(local, doc_sorted[-1], region, k, obs1, obs2)
        assert know.present <= doc
        for y in probes:
            if know.absent(y):
                assert y not in doc


@settings(max_examples=200, deadline=None)
@given(st.sets(ids, min_size=1, max_size=40), st.integers(0, 6), st.data())
def test_knowledge_is_complete_where_the_paper_says(doc, k, data):
    """Inside a run's (prev, next) within the region, and up to s_k after a local id,
    every id that is not a document id is known absent."""
    doc_sorted = sorted(doc)
    run = Run.whole(doc_sorted)
    know = knowledge([run], doc_sorted[-1], (0, 0), k)  # region (0, 0]: the whole circle
    ys = np.arange(0, min(SMALL, doc_sorted[-1] + 3), dtype=np.uint64)
    assert (know.absent_in(ys) == ~np.isin(ys, doc_sorted)).all()
    # piggyback alone (Observations off): exact between x and its k-th successor
    pig = knowledge([run], doc_sorted[-1], None, k, obs1=False, obs2=False)
    x_at = data.draw(st.integers(0, len(doc_sorted) - 1))
    after = successors(doc_sorted, x_at, [], k)
    if after:
        ys = np.arange(doc_sorted[x_at] + 1, after[-1], dtype=np.uint64)
        assert (pig.absent_in(ys) == ~np.isin(ys, doc_sorted)).all()


def entries_strategy():
    return st.lists(st.sets(ids, min_size=1, max_size=6), min_size=1, max_size=30)


@given(st.sets(big_ids, max_size=200), st.sets(big_ids, max_size=50), st.integers(1, 16))
def test_bloom_filter_has_no_false_negatives(members, others, byte_size):
    bf = BloomFilter.of(members, byte_size * 8, 5)
    assert all(m in bf for m in members)
    copy = BloomFilter(byte_size * 8, 5, bf.to_bytes())
    assert all((x in copy) == (x in bf) for x in members | others)
    probe = sorted(members | others | {0, 2**64 - 1})
    assert copy.contains_array(np.array(probe, dtype=np.uint64)).tolist() == [
        x in bf for x in probe
    ]


@given(st.lists(big_ids, max_size=200), st.integers(1, 16), st.integers(1, 7))
def test_a_filter_of_ids_is_the_one_adding_each_makes(members, byte_size, hashes):
    one_by_one = BloomFilter(byte_size * 8, hashes)
    for x in members:
        one_by_one.add(x)
    assert BloomFilter.of(members, byte_size * 8, hashes).to_bytes() == one_by_one.to_bytes()


@given(st.sets(big_ids, max_size=50), st.sets(big_ids, min_size=1, max_size=20))
def test_a_filter_tested_in_bulk_then_added_to_answers_anew(members, later):
    """The bulk test keeps the filter's bits unpacked; an id added afterwards is found
    either way."""
    bf = BloomFilter.of(members, 256, 3)
    probe = np.array(sorted(members | later), dtype=np.uint64)
    positions = positions_array(probe, 256, 3)
    for _ in range(2):  # the second time from what it kept
        assert bf.contains_array(probe).tolist() == [x in bf for x in probe.tolist()]
        assert bf.holds_positions(positions).tolist() == [x in bf for x in probe.tolist()]
    for x in later:
        bf.add(x)
    assert bf.contains_array(probe).tolist() == [x in bf for x in probe.tolist()]
    assert bf.holds_positions(positions).tolist() == [x in bf for x in probe.tolist()]
    assert bf.contains_array(np.array(sorted(later), dtype=np.uint64)).all()


@given(st.lists(big_ids, max_size=50), st.integers(1, 200), st.integers(1, 12))
def test_bloom_positions_in_bulk_are_the_scalar_ones(term_ids, byte_size, hashes):
    got = positions_array(np.array(term_ids, dtype=np.uint64), byte_size * 8, hashes)
    assert got.T.tolist() == [_positions(t, byte_size * 8, hashes) for t in term_ids]


def reference_absent(know, y: int) -> bool:
    """Knowledge's rules written out arc by arc (the form absent_spans compiles)."""
    if y in know.present:
        return False
    if know.max_id is not None and y > know.max_id:
        return True
    if (
        know.region is not None
        and in_open_closed(y, *know.region)
        and any(
            in_open_closed(y, prev, last) or in_open(y, last, nxt)
            for prev, last, nxt in know.run_arcs
        )
    ):
        return True
    return any(in_open_closed(y, a, b) for a, b in know.piggy_arcs)


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.one_of(ids, big_ids), min_size=1, max_size=40),
    st.lists(st.integers(0, 3), min_size=1, max_size=6),
    st.integers(0, 4),
    st.tuples(big_ids, big_ids),
    st.booleans(),
    st.booleans(),
    st.lists(big_ids, max_size=30),
)
def test_compiled_knowledge_equals_its_rules(doc, dest_seq, k, region, obs1, obs2, extra):
    doc_sorted = sorted(doc)
    for local in deliver([Run.whole(doc_sorted)], dest_seq, k):
        know = knowledge(local, doc_sorted[-1], region, k, obs1, obs2)
        edges = [v for r in local for v in (r.prev, r.next, r.ids[0], r.ids[-1])] + list(region)
        probes = sorted(
            {(v + d) % 2**64 for v in edges + doc_sorted for d in (-1, 0, 1)} | set(extra)
        )
        ys = np.array(probes, dtype=np.uint64)
        assert know.absent_in(ys).tolist() == [reference_absent(know, y) for y in probes]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(run, min_size=1, max_size=3),
            st.one_of(st.none(), st.tuples(big_ids, big_ids)),
            st.sets(st.one_of(ids, big_ids, st.just(0), st.just(2**64 - 1)), max_size=30),
        ),
        min_size=1,
        max_size=5,
    ),
    st.one_of(ids, big_ids),
    st.integers(0, 4),
    st.booleans(),
    st.booleans(),
)
def test_qns_know_in_step_what_each_knows_alone(qns, max_id, k, obs1, obs2):
    """What QNs resolving in step prune and know by: their terms side by side (each QN's
    sorted, often the same ids as another's), each QN's spans and present ids placed among
    its own terms find what its absent_in and member find, and nothing of another's."""
    knows, terms = [], []
    for runs, region, probes in qns:
        know = knowledge(runs, max_id, region, k, obs1, obs2)
        edges = {
            (v + d) % 2**64
            for r in runs
            for v in (*r.ids, *r.succ, r.prev, r.next, max_id)
            for d in (-1, 0, 1)
        }
        knows.append(know)
        terms.append(
            np.array(sorted(probes | edges), dtype=np.uint64)[:: len(knows)]
        )  # some with no terms at all
    start = np.concatenate([[0], np.cumsum([len(t) for t in terms])])
    absent, present = known_in_parts(np.concatenate(terms), start, knows)
    for know, ys, a, b in zip(knows, terms, start, start[1:]):
        assert absent[a:b].tolist() == know.absent_in(ys).tolist()
        assert present[a:b].tolist() == member(ys, know.present_array).tolist()


@given(
    st.lists(
        st.sets(st.one_of(ids, big_ids, st.just(0), st.just(2**64 - 1)), max_size=30),
        min_size=1,
        max_size=4,
    )
)
def test_merged_terms_are_the_distinct_ones_with_each_blocks_places(term_sets):
    """A QN's blocks' terms merged (Block.concat, Resolver) as np.unique merges them."""
    blocks = [
        Block.of_rows(np.arange(max(1, len(t))), [[y] for y in sorted(t)] or [[7]], merge=False)
        for t in term_sets
    ]
    terms, inverse = union_terms(blocks)
    want, want_inverse = np.unique(np.concatenate([b.terms for b in blocks]), return_inverse=True)
    assert np.array_equal(terms, want) and np.array_equal(inverse, want_inverse)


@given(
    st.lists(st.booleans(), max_size=70), st.lists(st.lists(st.booleans(), max_size=70), max_size=5)
)
def test_dialogue_bits_round_trip_little_endian(flags, more):
    data = pack_bits(flags)
    assert len(data) == (len(flags) + 7) // 8
    assert all(bool(data[i // 8] >> (i % 8) & 1) == f for i, f in enumerate(flags))
    assert [bool(f) for f in unpack_bits(data, len(flags))] == flags
    # a round's replies, unpacked at once
    replies = [flags, *more]
    assert unpack_many([pack_bits(r) for r in replies], [len(r) for r in replies]).tolist() == sum(
        replies, []
    )
    if flags:
        with pytest.raises(ValueError):
            unpack_many([pack_bits(r) for r in replies], [len(r) + 8 for r in replies])


@given(st.sets(ids, max_size=60), st.lists(ids, max_size=2 * FEW + 8))
def test_a_document_answers_a_question_of_any_length_by_membership(doc, question):
    """A few ids are answered in Python, more in numpy: the same answer either way."""
    held = PublishedDoc(1, "d", "", "", frozenset(doc)).holds(question)
    assert [bool(h) for h in held] == [y in doc for y in question]
    assert [bool(f) for f in unpack_bits(pack_bits(held), len(question))] == [
        y in doc for y in question
    ]
