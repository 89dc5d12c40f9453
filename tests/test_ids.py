"""Interval arithmetic on the 64-bit circle, against a case-by-case reference."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from chord.ids import (SPACE, distance, finger_start, hash_id, in_open, in_open_array, in_open_closed,
                       in_open_closed_array, parse_id)

ids = st.integers(min_value=0, max_value=SPACE - 1)
# small values and values near the wrap point, where mistakes live
edgy = st.one_of(ids, st.integers(0, 8), st.integers(SPACE - 8, SPACE - 1))


def ref_open_closed(x, a, b):
    if a < b:
        return a < x <= b
    if a > b:
        return x > a or x <= b
    return True  # (a, a] is the whole circle


def ref_open(x, a, b):
    if a < b:
        return a < x < b
    if a > b:
        return x > a or x < b
    return x != a


@given(edgy, edgy, edgy)
def test_open_closed_matches_reference(x, a, b):
    assert in_open_closed(x, a, b) == ref_open_closed(x, a, b)


@given(edgy, edgy, edgy)
def test_open_matches_reference(x, a, b):
    assert in_open(x, a, b) == ref_open(x, a, b)


@given(st.lists(edgy, min_size=1, max_size=20), edgy, edgy)
def test_array_intervals_match_the_reference(xs, a, b):
    arr = np.array(xs, dtype=np.uint64)
    assert in_open_closed_array(arr, a, b).tolist() == [ref_open_closed(x, a, b) for x in xs]
    assert in_open_array(arr, a, b).tolist() == [ref_open(x, a, b) for x in xs]


@given(edgy, edgy)
def test_distance_round_trip(a, b):
    assert (a + distance(a, b)) % SPACE == b
    assert distance(a, b) + distance(b, a) in (0, SPACE)


@given(edgy, edgy, edgy)
def test_intervals_partition_the_circle(x, a, b):
    # for a != b, (a, b] and (b, a] split the circle: every x is in exactly one
    if a != b:
        assert in_open_closed(x, a, b) != in_open_closed(x, b, a)


@given(ids, st.integers(0, 63))
def test_finger_start_wraps(n, i):
    assert distance(n, finger_start(n, i)) == 1 << i


def test_hash_id_is_unsigned_64_bit_and_stable():
    values = {hash_id(f"127.0.0.1:{p}") for p in range(1000)}
    assert len(values) == 1000 and all(0 <= v < SPACE for v in values)
    assert hash_id("hurricane") == hash_id("hurricane")


@pytest.mark.parametrize("text,value", [("0", 0), ("42", 42), ("0xff", 255),
                                        (str(SPACE - 1), SPACE - 1)])
def test_parse_id_accepts(text, value):
    assert parse_id(text) == value


@pytest.mark.parametrize("text,why", [("abc", "malformed"), ("-1", "outside"),
                                      (str(SPACE), "outside"), ("0x", "malformed"), ("", "malformed")])
def test_parse_id_rejects(text, why):
    with pytest.raises(ValueError, match=why):
        parse_id(text)
