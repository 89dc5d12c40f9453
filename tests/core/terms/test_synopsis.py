"""Coin tossing, merging and top-K: the laws gossip convergence rests on."""

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from cqengine.core.terms.synopsis import Synopsis, coin_tosses, merge, top_k

terms = st.integers(0, 40)
registers = st.tuples(st.integers(1, 8))  # one CT register: the exact case (see the module)
multi = st.dictionaries(terms, st.tuples(st.integers(1, 8), st.integers(1, 8)), max_size=25)
synopses = st.dictionaries(terms, registers, max_size=25)
ks = st.integers(1, 12)


def items(d):
    return list(d.items())


@given(synopses, ks)
def test_merge_is_idempotent(a, k):
    a = top_k(a, k)
    assert merge(a, items(a), k) == a


@given(multi, multi, ks)
def test_several_registers_still_merge_idempotently_and_commutatively(a, b, k):
    a, b = top_k(a, k), top_k(b, k)
    assert merge(a, items(a), k) == a
    assert merge(a, items(b), k) == merge(b, items(a), k)


@given(synopses, synopses, ks)
def test_merge_is_commutative(a, b, k):
    a, b = top_k(a, k), top_k(b, k)
    assert merge(a, items(b), k) == merge(b, items(a), k)


@given(synopses, synopses, synopses, ks)
def test_merge_is_associative(a, b, c, k):
    a, b, c = top_k(a, k), top_k(b, k), top_k(c, k)
    assert merge(merge(a, items(b), k), items(c), k) == merge(a, items(merge(b, items(c), k)), k)


@given(st.lists(synopses, min_size=1, max_size=6), ks)
def test_truncated_merging_equals_the_central_top_k(parts, k):
    """Merging truncated parts in any grouping gives the top K of all maxima."""
    central: dict = {}
    for p in parts:
        for t, v in p.items():
            central[t] = tuple(map(max, central.get(t, v), v))
    acc: dict = {}
    for p in parts:
        acc = merge(acc, items(top_k(p, k)), k)
    assert acc == top_k(central, k)


@given(synopses, st.integers(1, 30))
def test_top_k_ties_break_by_term_id(d, k):
    chosen = top_k(d, k)
    assert len(chosen) == min(k, len(d))
    worst = min(-sum(v) for v in chosen.values()) if chosen else None
    for t, v in d.items():
        if t not in chosen:
            assert -sum(v) >= worst or len(chosen) == len(d)
            tied = [c for c, cv in chosen.items() if sum(cv) == sum(v)]
            assert all(c < t for c in tied)


def test_coin_tosses_are_deterministic_capped_and_geometric():
    assert coin_tosses(7, "D1", 32, 3) == coin_tosses(7, "D1", 32, 3)
    assert all(1 <= v <= 4 for t in range(500) for v in coin_tosses(t, "D", 4, 2))
    counts = Counter(coin_tosses(t, f"doc{t % 97}", 64)[0] for t in range(20000))
    assert abs(counts[1] / 20000 - 0.5) < 0.02 and abs(counts[2] / 20000 - 0.25) < 0.02


def test_the_same_document_twice_changes_nothing():
    s = Synopsis(k=50, hashes=2)
    assert s.add_document("D1", range(100))
    before, clock = dict(s.entries), s.clock
    assert not s.add_document("D1", range(100))  # seen again along another path
    assert s.entries == before and s.clock == clock


def test_values_grow_with_document_frequency():
    rng = random.Random(1)
    s = Synopsis(k=10, hashes=4)
    for d in range(2000):
        s.add_document(f"D{d}", [0] + ([1] if d % 10 == 0 else []) + [rng.randrange(2, 10**6)])
    assert sum(s.entries[0]) > sum(s.entries.get(1, (0,)))
    assert 0 in s.popular()


def test_deltas_carry_everything_a_neighbour_lacks():
    a, b = Synopsis(k=20), Synopsis(k=20)
    a.add_document("D1", range(30))
    b.merge(a.since(0))
    told = a.clock
    a.add_document("D2", range(20, 60))
    b.merge(a.since(told))
    assert b.entries == a.entries and b.digest() == a.digest()
