"""What a QN knows of a document from the runs that reached it (paper section 5), as pure
functions: local-set pruning.

Every pruning rule of the paper is one fact: *between two ids the receiver knows, it knows
exactly which document ids lie there*.
- Observation 1: inside its region, between a run's prev and next, a QN has every id.
  Because prev/next travel with the run (cqengine.core.resolution.runs), this holds even when a
  region's ids reach the QN along several paths or through stale routing tables: it is
  provably safe.
- Observation 2: no document id exceeds max_id.
- Algorithm 4 (and 6): after a local id x, its k successors s_1..s_k are all the document
  ids in (x, s_k].
A query with a term id the QN knows to be absent cannot match, so it is dropped; a term
id it knows to be present need not be asked about in resolution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Literal

import numpy as np

from chord.protocol.ids import MASK, arc_spans, intersect_spans, union_spans
from cqengine.core.resolution.runs import Run, successors
from cqengine.core.state.postings import Block, any_per_query, member, ranges


@dataclass
class Knowledge:
    """What a QN knows of the document from the runs it received."""

    present: set[int]
    max_id: int | None = None  # Observation 2
    region: tuple[int, int] | None = None  # (predecessor, me]: Observation 1's scope
    run_arcs: list[tuple[int, int, int]] = field(default_factory=list)  # (prev, last, next)
    piggy_arcs: list[tuple[int, int]] = field(default_factory=list)  # (x, s_k]
    # the ring's hot ids, when a term-presence header came (cqengine.core.terms.presence): every
    # one of them not in `present` is absent
    hot: np.ndarray | None = None

    @cached_property
    def present_array(self) -> np.ndarray:
        """`present` as a sorted array (taken once, when the runs have all been read)."""
        return np.array(sorted(self.present), dtype=np.uint64)

    @cached_property
    def absent_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Where every id is known not to be a document id (present ones aside), as sorted
        disjoint spans: starts and ends. Worked out once per announcement, in Python on a
        few arcs, so that testing a whole block of terms is one search."""
        merged = self.span_list
        return (
            np.array([lo for lo, _ in merged], dtype=np.uint64),
            np.array([hi for _, hi in merged], dtype=np.uint64),
        )

    @cached_property
    def span_list(self) -> list[tuple[int, int]]:
        """absent_spans as a list of (start, end): QNs in step put all theirs in one array."""
        spans = []
        if self.max_id is not None and self.max_id < MASK:
            spans.append((self.max_id + 1, MASK))
        if self.region is not None and self.run_arcs:
            # (prev, last] then (last, next): for a run holding the whole document
            # prev == last, and (last, last] is the whole circle, as it should be
            within = union_spans(
                [
                    s
                    for prev, last, nxt in self.run_arcs
                    for s in arc_spans(prev, last) + arc_spans(last, nxt, closed=False)
                ]
            )
            spans += intersect_spans(within, arc_spans(*self.region))
        for a, b in self.piggy_arcs:
            spans += arc_spans(a, b)
        return union_spans(spans)

    def in_spans(self, ys: np.ndarray) -> np.ndarray:
        """Elementwise over a uint64 array: does y lie in the absent spans?"""
        starts, ends = self.absent_spans
        if not len(starts):
            return np.zeros(ys.shape, dtype=bool)
        i = starts.searchsorted(ys, side="right") - 1
        return (i >= 0) & (ys <= ends[np.maximum(i, 0)])

    def absent_in(self, ys: np.ndarray) -> np.ndarray:
        """Elementwise over a uint64 array: True only where y is certainly not a document id."""
        inside = self.in_spans(ys)
        if inside.any():  # often none lies in a span, and then nothing needs the membership test
            inside &= ~member(ys, self.present_array)
        if self.hot is not None:
            inside |= member(ys, self.hot) & ~member(ys, self.present_array)
        return inside

    def absent(self, y: int) -> bool:
        return bool(self.absent_in(np.array([y], dtype=np.uint64))[0])


# (part, id) pairs as 12 bytes that sort as the pairs do: big-endian part, then id
TAGGED = np.dtype([("part", ">u4"), ("id", ">u8")])


def tagged(parts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    out = np.empty(len(ids), dtype=TAGGED)
    out["part"] = parts
    out["id"] = ids
    return out.view("S12")


def known_in_parts(
    terms: np.ndarray, term_start: np.ndarray, knows: Sequence[Knowledge]
) -> tuple[np.ndarray, np.ndarray]:
    """Several QNs' knowledge at once (QNs resolving in step), over their blocks' terms
    side by side, part p's sorted from term_start[p]: where each knows a term absent
    (Knowledge.absent_in) and where present (one of its present ids). Each part's
    few spans and present ids are placed among its own terms by one search over all
    parts' (part, term) pairs, not a search per part."""
    n, parts = len(terms), np.arange(len(knows))
    keys = tagged(np.repeat(parts, np.diff(term_start)), terms)

    def place(
        ids: np.ndarray, counts: list[int], side: Literal["left", "right"] = "left"
    ) -> tuple[np.ndarray, np.ndarray]:
        wanted = tagged(np.repeat(parts, counts), ids)
        return keys.searchsorted(wanted, side), wanted

    # each QN's few spans and ids, in one array each (not an array per QN, then joined)
    spans = [k.span_list for k in knows]
    ends = np.array([end for s in spans for span in s for end in span], dtype=np.uint64).reshape(
        -1, 2
    )
    counts = [len(s) for s in spans]
    (lo, _), (hi, _) = place(ends[:, 0], counts), place(ends[:, 1], counts, "right")
    inside = np.zeros(n, dtype=bool)
    inside[ranges(lo, hi - lo)] = True  # the terms [lo, hi) of each span: few, most spans hold none
    ids = np.fromiter(chain.from_iterable(k.present for k in knows), dtype=np.uint64)
    at, wanted = place(ids, [len(k.present) for k in knows])
    hit = at < n
    at, wanted = at[hit], wanted[hit]
    present = np.zeros(n, dtype=bool)
    present[at[keys[at] == wanted]] = True
    absent = inside & ~present
    headed = np.array([k.hot is not None for k in knows], dtype=bool)
    if headed.any():  # a header's hot ids the document lacks: all the ring's not present
        hot = next(k.hot for k in knows if k.hot is not None)  # one ring: the same ids
        absent |= member(terms, hot) & ~present & np.repeat(headed, np.diff(term_start))
    return absent, present


def knowledge(
    runs: Sequence[Run],
    max_id: int,
    region: tuple[int, int] | None,
    k: int,
    obs1: bool = True,
    obs2: bool = True,
    header: tuple[np.ndarray, np.ndarray] | None = None,
) -> Knowledge:
    """The knowledge local runs give; `region` None (predecessor unknown) turns Observation 1
    off; `header`: the hot ids a term-presence header says present, and the ring's hot ids."""
    know = Knowledge(
        present=set(), max_id=max_id if obs2 else None, region=region if obs1 else None
    )
    if header is not None:
        know.present.update(header[0].tolist())
        know.hot = header[1]
    for run in runs:
        know.present.update(run.ids)
        know.present.update(run.succ)
        know.present.update((run.prev, run.next))
        know.run_arcs.append((run.prev, run.ids[-1], run.next))
        if k:
            for j, x in enumerate(run.ids):
                after = successors(run.ids, j, run.succ, k)
                if after:
                    know.piggy_arcs.append((x, after[-1]))
    return know


def may_match(block: Block, absent: np.ndarray) -> np.ndarray:
    """Per query of the block: may it still match (none of its terms absent, a mask over
    the block's terms)?"""
    if not len(block) or not absent.any():
        return np.ones(len(block), dtype=bool)
    may: np.ndarray = ~any_per_query(absent[block.codes])
    return may
