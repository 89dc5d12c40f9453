"""Document announcement and local-set pruning (paper section 5), as pure functions.

An announcement carries *runs*: contiguous stretches of the document's term ids in ring
order, each with the document ids just before (`prev`) and just after (`next`) it, and up
to k piggybacked ids that follow its last id in increasing order (`succ`). The publishing
node starts from one run holding every id; each hop splits runs by next hop (Algorithms 1
and 3) and a sub-run inherits its neighbours as prev/next.

Every pruning rule of the paper is then one fact: *between two ids the receiver knows, it
knows exactly which document ids lie there*.
- Observation 1: inside its region, between a run's prev and next, a QN has every id.
  Because prev/next travel with the run, this holds even when a region's ids reach the
  QN along several paths or through stale routing tables: it is provably safe.
- Observation 2: no document id exceeds max_id.
- Algorithm 4 (and 6): after a local id x, its k successors s_1..s_k are all the document
  ids in (x, s_k].
A query with a term id the QN knows to be absent cannot match, so it is dropped; a term
id it knows to be present need not be asked about in resolution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Callable, Hashable, Iterable, Sequence

import numpy as np

from chord.ids import MASK, arc_spans, intersect_spans, union_spans
from cqengine.postings import Block, any_per_query, member, ranges
from cqengine.proto import cqengine_pb2 as pb
from cqengine.wire import packed_fixed64_size, varint_size


@dataclass
class Run:
    ids: list[int]  # ring order from the first id; wraps past zero at most once
    prev: int
    next: int
    succ: list[int] = field(default_factory=list)

    @classmethod
    def whole(cls, sorted_ids: Sequence[int]) -> "Run":
        """The document as one run: what the publishing node starts from."""
        return cls(list(sorted_ids), prev=sorted_ids[-1], next=sorted_ids[0])

    @classmethod
    def from_pb(cls, r: pb.Run) -> "Run":
        return cls(list(r.ids), r.prev, r.next, list(r.succ))


def announcement(doc_key: int, dn: str, max_id: int, runs: Iterable[Run], hops: int) -> pb.Announcement:
    """The message carrying these runs (each added in place, not built and then copied)."""
    out = pb.Announcement(doc_key=doc_key, dn=dn, max_id=max_id, hops=hops)
    add = out.runs.add
    for r in runs:
        add(ids=r.ids, prev=r.prev, next=r.next, succ=r.succ)
    return out


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
                cut = size - packed_fixed64_size(n) + packed_fixed64_size(d)  # succ is packed fixed64
                saved[i] += size + varint_size(size) - cut - varint_size(cut)
    return saved


def successors(ids: Sequence[int], j: int, tail: Sequence[int], k: int) -> list[int]:
    """Up to k document ids that follow ids[j] in increasing order (none past the largest)."""
    out: list[int] = []
    last = ids[j]
    for y in ids[j + 1:]:
        if len(out) == k or y <= last:  # y <= last: wrapped past the largest id
            return out
        out.append(y)
        last = y
    return out + list(tail[:k - len(out)])


def split(run: Run, dests: Sequence[Hashable], k: int) -> list[tuple[Hashable, Run]]:
    """Cut a run where the destination of consecutive ids changes; dests[i] is ids[i]'s."""
    out = []
    start = 0
    ids = run.ids
    for i in range(1, len(ids) + 1):
        if i < len(ids) and dests[i] == dests[start]:
            continue
        prev = ids[start - 1] if start > 0 else run.prev
        nxt = ids[i] if i < len(ids) else run.next
        succ = successors(ids, i - 1, run.succ, k) if k else []
        out.append((dests[start], Run(ids[start:i], prev, nxt, succ)))
        start = i
    return out


def group_runs(runs: Iterable[Run], dest: Callable[[int], Hashable], k: int) -> dict[Hashable, list[Run]]:
    """Algorithms 1 and 3 over runs: sub-runs per next hop (None: mine to process)."""
    groups: dict[Hashable, list[Run]] = {}
    for run in runs:
        for d, sub in split(run, [dest(x) for x in run.ids], k):
            groups.setdefault(d, []).append(sub)
    return groups


@dataclass
class Knowledge:
    """What a QN knows of the document from the runs it received."""

    present: set[int]
    max_id: int | None = None                       # Observation 2
    region: tuple[int, int] | None = None           # (predecessor, me]: Observation 1's scope
    run_arcs: list[tuple[int, int, int]] = field(default_factory=list)  # (prev, last, next)
    piggy_arcs: list[tuple[int, int]] = field(default_factory=list)  # (x, s_k]

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
        return (np.array([lo for lo, _ in merged], dtype=np.uint64),
                np.array([hi for _, hi in merged], dtype=np.uint64))

    @cached_property
    def span_list(self) -> list[tuple[int, int]]:
        """absent_spans as a list of (start, end): QNs in step put all theirs in one array."""
        spans = []
        if self.max_id is not None and self.max_id < MASK:
            spans.append((self.max_id + 1, MASK))
        if self.region is not None and self.run_arcs:
            # (prev, last] then (last, next): for a run holding the whole document
            # prev == last, and (last, last] is the whole circle, as it should be
            within = union_spans([s for prev, last, nxt in self.run_arcs
                                  for s in arc_spans(prev, last) + arc_spans(last, nxt, closed=False)])
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


def known_in_parts(terms: np.ndarray, term_start: np.ndarray, knows: Sequence[Knowledge]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Several QNs' knowledge at once (QNs resolving in step), over their blocks' terms
    side by side, part p's sorted from term_start[p]: where each knows a term absent
    (Knowledge.absent_in) and where present (one of its present ids). Each part's
    few spans and present ids are placed among its own terms by one search over all
    parts' (part, term) pairs, not a search per part."""
    n, parts = len(terms), np.arange(len(knows))
    keys = tagged(np.repeat(parts, np.diff(term_start)), terms)

    def place(ids: np.ndarray, counts: list[int], side: str = "left") -> tuple[np.ndarray, np.ndarray]:
        wanted = tagged(np.repeat(parts, counts), ids)
        return keys.searchsorted(wanted, side), wanted

    # each QN's few spans and ids, in one array each (not an array per QN, then joined)
    spans = [k.span_list for k in knows]
    ends = np.array([end for s in spans for span in s for end in span], dtype=np.uint64).reshape(-1, 2)
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
    return inside & ~present, present


def knowledge(runs: Sequence[Run], max_id: int, region: tuple[int, int] | None, k: int,
              obs1: bool = True, obs2: bool = True) -> Knowledge:
    """The knowledge local runs give; `region` None (predecessor unknown) turns Observation 1 off."""
    know = Knowledge(present=set(), max_id=max_id if obs2 else None,
                     region=region if obs1 else None)
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
    present_from: np.ndarray                     # per term, int64 (NEVER: at no depth)
    spans_from: np.ndarray
    irregular: list[tuple[int, list[int]]]       # (local id, its successors) of arcs that do not grow
    _pruned_from: np.ndarray | bool | None = None  # per query of the block `kept` is asked of (False: no such)

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
            ray = not self.irregular and bool(((self.present_from == NEVER) | (absent_from == NEVER)).all())
            self._pruned_from = np.minimum.reduce(absent_from[block.codes], axis=0) if ray else False
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

    def __init__(self, runs: Sequence[Run], max_id: int, region: tuple[int, int] | None, k: int,
                 obs1: bool = True, obs2: bool = True) -> None:
        self.runs, self.max_id, self.region, self.k, self.obs1, self.obs2 = runs, max_id, region, k, obs1, obs2
        self._at: dict[int, Knowledge] = {}

    def at(self, d: int) -> Knowledge:
        """Depth d's knowledge: the runs cut short to d piggybacked ids."""
        know = self._at.get(d)
        if know is None:
            know = self._at[d] = knowledge(truncated(self.runs, d), self.max_id, self.region, d,
                                           self.obs1, self.obs2)
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
        return (np.fromiter(seen, dtype=np.uint64, count=len(seen)),
                np.fromiter(seen.values(), dtype=np.int64, count=len(seen)))

    @cached_property
    def _arcs(self) -> list[tuple[int, list[int]]]:
        """Each local id with the successors piggybacked after it (at depth k)."""
        return [(x, after) for run in self.runs for j, x in enumerate(run.ids)
                if (after := successors(run.ids, j, run.succ, self.k) if self.k else [])]

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
                segments += [(lo + 1, hi, d) for d, (lo, hi) in enumerate(zip([x] + after, after), 1)]
            else:
                irregular.append((x, after))
        steps = sorted({lo for lo, _, _ in segments} | {hi + 1 for _, hi, _ in segments if hi < MASK})
        least = [min((d for lo, hi, d in segments if lo <= y <= hi), default=NEVER) for y in steps]
        return np.array(steps, dtype=np.uint64), np.array([NEVER] + least, dtype=np.int64), irregular

    def depths(self, terms: np.ndarray) -> Depths:
        """Depths up to k of what the runs tell of these (sorted) terms."""
        ys, least = self._seen
        present_from = np.full(len(terms), NEVER, dtype=np.int64)
        at = np.minimum(terms.searchsorted(ys), max(len(terms) - 1, 0))
        hit = terms[at] == ys if len(terms) else np.zeros(len(ys), dtype=bool)
        present_from[at[hit]] = least[hit]
        steps, reached, irregular = self._reach
        return Depths(terms, present_from, reached[steps.searchsorted(terms, side="right")], irregular)


def may_match(block: Block, absent: np.ndarray) -> np.ndarray:
    """Per query of the block: may it still match (none of its terms absent, a mask over
    the block's terms)?"""
    if not len(block) or not absent.any():
        return np.ones(len(block), dtype=bool)
    return ~any_per_query(absent[block.codes])
