"""What a QN knows of a document at every piggyback depth at once (measurement only).

Piggyback depths differ only in what a QN knows: the announcement's tree does not depend
on k, and depth d's successor ids are the first d of a deeper announcement's. So one
announcement carrying the deepest depth tells what every shallower one would have told
(`truncated`, `Told`, `Depths`), and how many bytes each would have saved
(`bytes_saved`). The experiments measure every depth in one pass this way
(cqengine.evaluation.measuring.measure).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from chord.protocol.ids import MASK, arc_spans
from cqengine.core.resolution.knowledge import Knowledge, knowledge, may_match
from cqengine.core.resolution.runs import Run, successors
from cqengine.core.state.postings import Block
from cqengine.evaluation.measuring.wire import packed_fixed64_size, varint_size
from cqengine.proto import cqengine_pb2 as pb


def truncated(runs: Sequence[Run], depth: int) -> list[Run]:
    """The runs as an announcement piggybacking `depth` ids would carry them: for any
    depth, a run's succ ids are the first of a deeper announcement's."""
    return [Run(r.ids, r.prev, r.next, r.succ[:depth]) for r in runs]


def bytes_saved(runs: Iterable[pb.Run], depths: Sequence[int]) -> list[int]:
    """For each depth, how many bytes fewer an announcement's runs take on the wire with
    their succ ids cut to that depth (each run is a length-prefixed field of it)."""
    saved = [0] * len(depths)
    for r in runs:
        n = len(r.succ)
        if not n:
            continue
        size = r.ByteSize()
        for i, d in enumerate(depths):
            if d < n:
                cut = (
                    size - packed_fixed64_size(n) + packed_fixed64_size(d)
                )  # succ is packed fixed64
                saved[i] += size + varint_size(size) - cut - varint_size(cut)
    return saved


NEVER = np.iinfo(np.int64).max


@dataclass
class Depths:
    """What a QN knows of each term of a block at every piggyback depth at once: depth d
    knows what knowledge(truncated(runs, d), ..., d) does (tests check), here worked out
    once for all depths. A term is known present from the least depth whose runs hold
    it; it lies in the absent spans from the least depth whose spans reach it, since a
    local id's piggybacked arc only grows with the depth (an arc that does not, possible
    only in a malformed announcement, is kept aside and tested depth by depth)."""

    terms: np.ndarray
    present_from: np.ndarray  # per term, int64 (NEVER: at no depth)
    spans_from: np.ndarray
    irregular: list[tuple[int, list[int]]]  # (local id, its successors) of arcs that do not grow
    _pruned_from: np.ndarray | bool | None = (
        None  # per query of the block `kept` is asked of (False: no such)
    )

    def present(self, d: int) -> np.ndarray:
        return self.present_from <= d

    def kept(self, block: Block, d: int) -> np.ndarray:
        """may_match(block, self.absent(d)): which queries of the block (whose terms these
        are; the same block every time) depth d keeps. Where a term, once absent, stays
        absent at every deeper depth (a well-formed announcement: an id a deeper depth
        tells present was never in an absent span), each query's least pruning depth is
        worked out once for all depths."""
        if self._pruned_from is None:
            absent_from = np.where(self.present_from > self.spans_from, self.spans_from, NEVER)
            ray = not self.irregular and bool(
                ((self.present_from == NEVER) | (absent_from == NEVER)).all()
            )
            self._pruned_from = (
                np.minimum.reduce(absent_from[block.codes], axis=0) if ray else False
            )
        if self._pruned_from is False:
            return may_match(block, self.absent(d))
        return self._pruned_from > d

    def absent(self, d: int) -> np.ndarray:
        inside = self.spans_from <= d
        for x, after in self.irregular:
            if d:
                for lo, hi in arc_spans(x, after[min(d, len(after)) - 1]):
                    inside |= (self.terms >= lo) & (self.terms <= hi)
        return inside & (self.present_from > d)


class Told:
    """What one announcement's local runs tell a QN, at every piggyback depth up to k:
    each depth's knowledge, and all depths at once over a block's terms. Worked out once
    per announcement however many indexes consult it (the engine's own and each shadow
    index, in a measurement pass, ask the same of the same runs)."""

    def __init__(
        self,
        runs: Sequence[Run],
        max_id: int,
        region: tuple[int, int] | None,
        k: int,
        obs1: bool = True,
        obs2: bool = True,
    ) -> None:
        self.runs, self.max_id, self.region, self.k, self.obs1, self.obs2 = (
            runs,
            max_id,
            region,
            k,
            obs1,
            obs2,
        )
        self._at: dict[int, Knowledge] = {}

    def at(self, d: int) -> Knowledge:
        """Depth d's knowledge: the runs cut short to d piggybacked ids."""
        know = self._at.get(d)
        if know is None:
            know = self._at[d] = knowledge(
                truncated(self.runs, d), self.max_id, self.region, d, self.obs1, self.obs2
            )
        return know

    @cached_property
    def _seen(self) -> tuple[np.ndarray, np.ndarray]:
        """Every id the runs hold, with the least depth that holds it."""
        seen: dict[int, int] = {}
        for run in self.runs:
            for j, y in enumerate(run.succ):
                seen[y] = min(seen.get(y, NEVER), j + 1)  # depth d carries the first d succ ids
            for y in (*run.ids, run.prev, run.next):
                seen[y] = 0
        return (
            np.fromiter(seen, dtype=np.uint64, count=len(seen)),
            np.fromiter(seen.values(), dtype=np.int64, count=len(seen)),
        )

    @cached_property
    def _arcs(self) -> list[tuple[int, list[int]]]:
        """Each local id with the successors piggybacked after it (at depth k)."""
        return [
            (x, after)
            for run in self.runs
            for j, x in enumerate(run.ids)
            if (after := successors(run.ids, j, run.succ, self.k) if self.k else [])
        ]

    @cached_property
    def _reach(self) -> tuple[np.ndarray, np.ndarray, list[tuple[int, list[int]]]]:
        """The depth from which the absent spans reach each id, as a step function: its
        steps' first ids, and per step (and first, for the ids below them all) the least
        depth whose spans cover it (NEVER: none). Depth 0's spans reach from 0; a local
        id's piggybacked arc (x, after[d-1]] reaches at depth d. Arcs that do not grow
        with the depth (a malformed announcement's) are kept aside. Worked out once per
        announcement, so that each block's terms are placed with one search."""
        starts, ends = self.at(0).absent_spans  # no piggybacked arcs
        segments = [(lo, hi, 0) for lo, hi in zip(starts.tolist(), ends.tolist())]
        irregular = []
        for x, after in self._arcs:
            if x < after[0] and all(a < b for a, b in zip(after, after[1:])):
                segments += [
                    (lo + 1, hi, d) for d, (lo, hi) in enumerate(zip([x] + after, after), 1)
                ]
            else:
                irregular.append((x, after))
        steps = sorted(
            {lo for lo, _, _ in segments} | {hi + 1 for _, hi, _ in segments if hi < MASK}
        )
        least = [min((d for lo, hi, d in segments if lo <= y <= hi), default=NEVER) for y in steps]
        return (
            np.array(steps, dtype=np.uint64),
            np.array([NEVER] + least, dtype=np.int64),
            irregular,
        )

    def depths(self, terms: np.ndarray) -> Depths:
        """Depths up to k of what the runs tell of these (sorted) terms."""
        ys, least = self._seen
        present_from = np.full(len(terms), NEVER, dtype=np.int64)
        at = np.minimum(terms.searchsorted(ys), max(len(terms) - 1, 0))
        hit = terms[at] == ys if len(terms) else np.zeros(len(ys), dtype=bool)
        present_from[at[hit]] = least[hit]
        steps, reached, irregular = self._reach
        return Depths(
            terms, present_from, reached[steps.searchsorted(terms, side="right")], irregular
        )
