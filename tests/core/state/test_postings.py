"""Compiled inverted lists hold exactly what the entries say, through every change."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqengine.core.state.postings import MERGED, Block, InvertedIndex, ask_order, member
from cqengine.evaluation.passes.rings import compile_blocks
from cqengine.proto import cqengine_pb2 as pb

KEYS = st.integers(0, 5)
IDS = st.one_of(st.integers(0, 40), st.integers(2**64 - 3, 2**64 - 1))


def entry(sub: int, ids) -> pb.QueryEntry:
    ids = sorted(ids)
    return pb.QueryEntry(subscription_id=sub, term_ids=ids, terms=[f"t{y}" for y in ids])


def rows(block: Block) -> list[tuple[int, list[int]]]:
    """Each query's terms as the block holds them, padding dropped."""
    out = []
    members = block.members if block.members is not None else [(e,) for e in block.entries]
    for group, codes in zip(members, block.codes.T):
        ids = [int(block.terms[c]) for c in codes]
        out += [(e.subscription_id, list(dict.fromkeys(ids))) for e in group]
    return out


entries = st.lists(
    st.tuples(st.integers(0, 10**6), st.sets(IDS, min_size=1, max_size=6)), max_size=12
)


@settings(max_examples=150, deadline=None)
@given(st.lists(entries, min_size=1, max_size=4), st.booleans())
def test_blocks_hold_their_entries_in_asking_order(groups, by_rarity):
    rarity = (lambda y, t: -y) if by_rarity else None
    made = [[entry(s, ids) for s, ids in g] for g in groups]
    blocks = [Block.of(m, rarity) for m in made]
    want = [(e.subscription_id, ask_order(e, rarity)) for m in made for e in m]
    assert sorted(rows(Block.concat(blocks))) == sorted(want)
    for b, m in zip(blocks, made):
        assert list(b.terms) == sorted(set(int(t) for t in b.terms))  # sorted and distinct
        # entries alike are one query, held once with all its entries
        assert len(b) == len({tuple(e.term_ids) for e in m}) and b.held() == len(m)
        assert len(Block.of(m, rarity, merge=False)) == len(m)
    every = Block.concat(blocks)
    keep = np.array([i % 2 == 0 for i in range(len(every))], dtype=bool)
    kept = [group for group, k in zip(rows_by_query(every), keep) if k]
    assert sorted(rows(every.select(keep))) == sorted(r for group in kept for r in group)


def rows_by_query(block: Block) -> list[list[tuple[int, list[int]]]]:
    """rows(), a list per query (column)."""
    return [rows(block.select(np.arange(len(block)) == i)) for i in range(len(block))]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.integers(0, 6), st.sets(IDS, min_size=1, max_size=4)),
        st.tuples(
            st.just("replace"), KEYS, st.integers(0, 6), st.sets(IDS, min_size=1, max_size=4)
        ),
        st.tuples(st.just("remove"), KEYS, st.integers(0, 6)),
        st.tuples(st.just("take"), KEYS, KEYS),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_index_blocks_and_subscriptions_follow_every_change(program):
    index = InvertedIndex()
    model: dict[int, list[pb.QueryEntry]] = {}
    for op in program:
        if op[0] in ("put", "replace"):
            _, key, sub, ids = op
            e = entry(sub, ids)
            if op[0] == "replace":
                index.replace(key, e)
                model[key] = [x for x in model.get(key, []) if x.subscription_id != sub]
            else:
                index.put(key, e)
            model.setdefault(key, []).append(e)
        elif op[0] == "remove":
            _, key, sub = op
            index.remove(key, lambda x, sub=sub: x.subscription_id == sub)
            model[key] = [x for x in model.get(key, []) if x.subscription_id != sub]
        else:
            _, lo, hi = op
            taken = index.take_range(lo, hi)
            index.put_items(taken)  # handed back, as a node that rejoins would get them
            for key in {k for k, _ in taken}:  # one entry per subscription and key: the last
                model[key] = list({x.subscription_id: x for x in model[key]}.values())
        for key in range(6):
            b = index.block(key)
            held = model.get(key, [])
            assert (b is None) == (not held)
            if b is not None:
                assert sorted(rows(b)) == sorted(
                    (e.subscription_id, list(e.term_ids)) for e in held
                )
            for sub in range(7):
                assert index.holds(key, sub) == any(e.subscription_id == sub for e in held)
        for keys in (
            (0, 1, 2),
            (3, 5),
            (1, 4),
            (0, 1, 2),
        ):  # merged, and kept merged, as the lists are now
            lists = [b for b in map(index.block, keys) if b is not None]
            merged = index.blocks(keys)
            assert (merged is None) == (not lists)
            if merged is not None:
                assert rows(merged) == [r for b in lists for r in rows(b)]
                assert merged.subscriptions() == b"".join(b.subscriptions() for b in lists)
        kept = index._merged.values()
        assert index._merged_size == sum(len(b) for _, b in kept) <= MERGED * len(index)


@given(st.lists(IDS, max_size=20), st.sets(IDS, max_size=8))
def test_member_is_set_membership(xs, members):
    got = member(np.array(xs, dtype=np.uint64), np.array(sorted(members), dtype=np.uint64))
    assert got.tolist() == [x in members for x in xs]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(KEYS, st.integers(0, 30), st.sets(IDS, min_size=1, max_size=6)), max_size=25
    ),
    st.booleans(),
    st.integers(0, 5),
)
def test_compiling_at_once_builds_the_blocks_each_key_would(filed, by_rarity, moved):
    """compile_blocks (cqengine.evaluation.passes.rings, before a simulated ring is forked)
    builds every key's block, filter positions included, in bulk; an index of
    the same subscriptions filed under other keys, compiled with the first one's asking
    orders, still gets the blocks of its own entries."""
    rarity = (lambda y, t: -y) if by_rarity else None
    subs = {sub: ids for _, sub, ids in filed}  # a subscription has one set of terms
    orders: dict[int, list[int]] = {}
    for shift in (0, moved):  # the second index: the same subscriptions under other keys
        lazy, bulk = InvertedIndex(rarity), InvertedIndex(rarity)
        for key, sub, _ in filed:
            for index in (lazy, bulk):
                index.replace((key + shift) % 6, entry(sub, subs[sub]))
        compile_blocks(bulk, (64, 3), orders)
        for key in range(6):
            want, got = lazy.block(key), bulk.block(key)
            assert (want is None) == (got is None)
            if want is not None:
                assert rows(got) == rows(want)
                assert np.array_equal(got.terms, want.terms) and np.array_equal(
                    got.codes, want.codes
                )
                assert np.array_equal(got.bloom_positions(64, 3), want.bloom_positions(64, 3))


def test_an_index_adopts_only_a_block_of_the_list_it_holds():
    """A block built elsewhere (compile_blocks) replaces nothing but a key's own list."""
    index = InvertedIndex()
    index.put(1, entry(7, {1, 2}))
    with pytest.raises(ValueError, match="a block of 2 entries for a list of 1"):
        index.adopt(1, Block.of([entry(7, {1, 2}), entry(8, {2})]))
    assert index.unbuilt() == [(1, [entry(7, {1, 2})])] and index.block(1) is not None
    assert index.unbuilt() == []
