"""Sizes of the engine's messages on the wire, worked out without building them.

Measurement needs the bytes of messages that are never sent: the announcement a
shallower piggyback depth would have carried (cqengine.evaluation.measuring.depths.bytes_saved)
and the resolution calls and alerts of a measured shadow (cqengine.evaluation.measuring.measure),
each of one document. Every field of these messages has a number below 16, so its tag is
one byte. Tests check each size against the bytes of the message the engine sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from cqengine.core.resolution.matches import one_by_one_bytes


def varint_size(v: int) -> int:
    return max(1, (v.bit_length() + 6) // 7)


def packed_fixed64_size(n: int) -> int:
    """A field of n packed fixed64 values: a tag, a length and 8 bytes each (none if empty)."""
    return 1 + varint_size(8 * n) + 8 * n if n else 0


def bytes_field_size(n: int) -> int:
    """A bytes field of n bytes (none if empty)."""
    return element_size(n) if n else 0


def element_size(n: int) -> int:
    """An element of n bytes of a repeated bytes or string field: sent even if empty."""
    return 1 + varint_size(n) + n


KEY = 9  # a document's key: an element of a repeated fixed64 field, not packed (cqengine.proto)


@lru_cache(maxsize=4096)  # node addresses and a document's strings, over and over
def string_field_size(s: str) -> int:
    return bytes_field_size(len(s.encode("utf-8")))


FOUND = 2  # `found = true`: a tag and one byte


def dialogue_sizes(n: int) -> tuple[int, int]:
    """A Term Dialogue round asking n ids that the DN answers: request and reply bytes."""
    return KEY + packed_fixed64_size(n), FOUND + bytes_field_size((n + 7) // 8)


def bloom_sizes(bits: int) -> tuple[int, int]:
    """A Bloom filter of `bits` bits fetched from the DN: request and reply bytes."""
    return KEY, FOUND + bytes_field_size(bits // 8)


def matched_size(matches: Iterable[tuple[int, str]]) -> int:
    """A QN's report of its matches of one document, (subscription id, home) each (home
    keys 0: a ring without replicas), to the DN: in whichever of its forms is smaller, as
    the QN sends it once the ring speaks protocol 3 (cqengine.core.resolution.matches.report)."""
    runs: dict[str, list[int]] = {}  # a run per home, as the QN groups them
    for sub, home in matches:
        runs.setdefault(home, []).append(sub)
    one_by_one = one_by_one_bytes([(0, (home, 0), subs) for home, subs in runs.items()])
    columns = (
        packed_fixed64_size(sum(map(len, runs.values())))
        + packed_varints_size(map(len, runs.values()))
        + packed_varints_size(range(len(runs)))  # each run's home: its place
        + sum(element_size(len(home.encode("utf-8"))) for home in runs)
    )
    return KEY + min(one_by_one, columns)


def packed_varints_size(values: Iterable[int]) -> int:
    """A field of packed varints (none if empty)."""
    n = sum(varint_size(v) for v in values)
    return 1 + varint_size(n) + n if n else 0


def alert_batch_size(docno: str, title: str, snippet: str, n: int) -> int:
    """The DN's batch of alerts of one document for n subscriptions of one home node (its
    docno an element of a repeated field: sent even if empty)."""
    return (
        element_size(len(docno.encode("utf-8")))
        + string_field_size(title)
        + string_field_size(snippet)
        + packed_fixed64_size(n)
    )
