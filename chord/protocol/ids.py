"""The 64-bit identifier circle: ids, distances and wrap-around intervals."""

from __future__ import annotations

import mmh3

BITS = 64
SPACE = 1 << BITS
MASK = SPACE - 1


def hash_id(text: str) -> int:
    """Unsigned 64-bit mmh3 of `text`: node ids from addresses, key ids from terms."""
    return mmh3.hash64(text.encode("utf-8"), signed=False)[0]


def spread_ids(n: int, seed: int = 0) -> list[int]:
    """n ids evenly spaced round the circle from a seeded offset: every node's region the
    same length, where hashed addresses make the longest some 7 times the median at 1,000
    nodes (a ring started in one place, `ring up --balanced-ids`, can give its nodes
    these: every node is a member by certificate, so no one picks a place to attack)."""
    if n < 1:
        return []
    start = mmh3.hash64(f"spread/{seed}".encode(), signed=False)[0]
    return [(start + i * SPACE // n) & MASK for i in range(n)]


def parse_id(text: str) -> int:
    """An id given by a person: decimal or 0x-hex, within [0, 2**64)."""
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f"malformed id {text!r}: expected a decimal or 0x-hex integer") from None
    if not 0 <= value < SPACE:
        raise ValueError(f"id {text!r} is outside the identifier space [0, 2**64)")
    return value


def distance(a: int, b: int) -> int:
    """Clockwise distance from a to b; 0 when a == b."""
    return (b - a) & MASK


def in_open_closed(x: int, a: int, b: int) -> bool:
    """x in (a, b] clockwise; when a == b the interval is the whole circle."""
    return a == b or 0 < distance(a, x) <= distance(a, b)


def in_open(x: int, a: int, b: int) -> bool:
    """x in (a, b) clockwise; when a == b the interval is the circle minus a."""
    d = distance(a, x)
    return d > 0 and (a == b or d < distance(a, b))


def finger_start(node_id: int, i: int) -> int:
    """Start of finger i: node_id + 2**i on the circle."""
    return (node_id + (1 << i)) & MASK


def short(x: int) -> str:
    """A 16-hex-digit rendering for tables and logs."""
    return f"{x:016x}"


# ---- arcs as closed spans [lo, hi] of the line 0..MASK, to union and intersect them ------

Span = tuple[int, int]


def arc_spans(a: int, b: int, closed: bool = True) -> list[Span]:
    """The clockwise arc (a, b], or (a, b) when not closed, as sorted spans (a == b: the
    whole circle, or all of it but a)."""
    length = (distance(a, b) or SPACE) - (0 if closed else 1)
    if length <= 0:
        return []
    if length >= SPACE:
        return [(0, MASK)]
    lo, hi = (a + 1) & MASK, (a + length) & MASK
    return [(lo, hi)] if lo <= hi else [(0, hi), (lo, MASK)]


def union_spans(spans: list[Span]) -> list[Span]:
    """Sorted, disjoint and not touching."""
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def intersect_spans(xs: list[Span], ys: list[Span]) -> list[Span]:
    """The common part of two unions of spans, each sorted and disjoint."""
    out: list[Span] = []
    i = j = 0
    while i < len(xs) and j < len(ys):
        lo, hi = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out
