"""Interval arithmetic on the 64-bit circle, against a case-by-case reference."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chord.protocol.ids import (
    SPACE,
    arc_spans,
    distance,
    finger_start,
    hash_id,
    in_open,
    in_open_closed,
    intersect_spans,
    parse_id,
    union_spans,
)

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


def covered(spans, x):
    return any(lo <= x <= hi for lo, hi in spans)


@given(edgy, edgy, st.lists(edgy, max_size=10))
def test_arcs_as_spans_hold_the_same_points(a, b, xs):
    probes = xs + [
        a,
        b,
        (a + 1) % SPACE,
        (b + 1) % SPACE,
        (a - 1) % SPACE,
        (b - 1) % SPACE,
        0,
        SPACE - 1,
    ]
    for closed, ref in ((True, ref_open_closed), (False, ref_open)):
        spans = arc_spans(a, b, closed)
        assert all(lo <= hi for lo, hi in spans) and spans == sorted(spans)
        assert [covered(spans, x) for x in probes] == [ref(x, a, b) for x in probes]


@given(
    st.lists(st.tuples(edgy, edgy), max_size=6),
    st.lists(st.tuples(edgy, edgy), max_size=6),
    st.lists(edgy, max_size=20),
)
def test_span_union_and_intersection(arcs1, arcs2, xs):
    s1 = union_spans([s for a, b in arcs1 for s in arc_spans(a, b)])
    s2 = union_spans([s for a, b in arcs2 for s in arc_spans(a, b, closed=False)])
    for spans in (s1, s2):
        assert all(
            spans[i][1] + 1 < spans[i + 1][0] for i in range(len(spans) - 1)
        )  # sorted, apart
    both = intersect_spans(s1, s2)
    probes = xs + [p for lo, hi in s1 + s2 for p in (lo, hi, lo - 1, hi + 1) if 0 <= p < SPACE]
    for x in probes:
        in1 = any(ref_open_closed(x, a, b) for a, b in arcs1)
        in2 = any(ref_open(x, a, b) for a, b in arcs2)
        assert covered(s1, x) == in1 and covered(s2, x) == in2 and covered(both, x) == (in1 and in2)


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


@pytest.mark.parametrize(
    "text,value", [("0", 0), ("42", 42), ("0xff", 255), (str(SPACE - 1), SPACE - 1)]
)
def test_parse_id_accepts(text, value):
    assert parse_id(text) == value


@pytest.mark.parametrize(
    "text,why",
    [
        ("abc", "malformed"),
        ("-1", "outside"),
        (str(SPACE), "outside"),
        ("0x", "malformed"),
        ("", "malformed"),
    ],
)
def test_parse_id_rejects(text, why):
    with pytest.raises(ValueError, match=why):
        parse_id(text)
