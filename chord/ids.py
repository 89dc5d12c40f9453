"""The 64-bit identifier circle: ids, distances and wrap-around intervals."""

from __future__ import annotations

import mmh3
import numpy as np

BITS = 64
SPACE = 1 << BITS
MASK = SPACE - 1


def hash_id(text: str) -> int:
    """Unsigned 64-bit mmh3 of `text`: node ids from addresses, key ids from terms."""
    return mmh3.hash64(text.encode("utf-8"), signed=False)[0]


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
    return 0 < d and (a == b or d < distance(a, b))


def finger_start(node_id: int, i: int) -> int:
    """Start of finger i: node_id + 2**i on the circle."""
    return (node_id + (1 << i)) & MASK


def short(x: int) -> str:
    """A 16-hex-digit rendering for tables and logs."""
    return f"{x:016x}"


# ---- the same intervals over arrays of ids (numpy uint64 wraps around as the circle does) ----

def in_open_closed_array(xs, a: int, b: int):
    """Elementwise x in (a, b] clockwise, for a uint64 array; a == b: the whole circle."""
    if a == b:
        return np.ones(xs.shape, dtype=bool)
    d = xs - np.uint64(a)
    return (d > 0) & (d <= np.uint64(distance(a, b)))


def in_open_array(xs, a: int, b: int):
    """Elementwise x in (a, b) clockwise, for a uint64 array; a == b: the circle minus a."""
    d = xs - np.uint64(a)
    return (d > 0) if a == b else (d > 0) & (d < np.uint64(distance(a, b)))
