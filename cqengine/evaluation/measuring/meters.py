"""Meters: how a QN's shadows of one document are measured rather than sent.

A shadow (another resolution method, a shallower piggyback depth, another strategy's
index: cqengine.evaluation.measuring.measure) knows its matches at once, from the document the DN
holds (`Truth`); its Term Dialogue and Bloom filter calls are recorded (`Measured`) and,
once the document has run its course, worked out with every other recorded for it by
the same resolution the nodes run, told the document's answers instead of asking
(`Meter.settle`, by a `ShadowResolver`). These are the parts of measurement that know
nothing of the pass's observer, and so live apart from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from chord.protocol.routing import NodeRef
from cqengine.core.frame.documents import PublishedDoc
from cqengine.core.resolution.resolution import Resolver, side_by_side
from cqengine.core.state.postings import Block, any_per_query, expand, member, members_of
from cqengine.core.terms.bloom import BloomFilter, received_filter
from cqengine.evaluation.measuring.wire import bloom_sizes, dialogue_sizes
from cqengine.proto import cqengine_pb2 as pb

Sent = dict[
    tuple[str, str], list[int]
]  # resolution calls: (method, rpc) -> [calls, request bytes, reply bytes]


def note(sent: Sent, call: tuple[str, str], n: int, request: int, reply: int) -> None:
    """Add n calls (method, rpc) and their bytes to what was sent."""
    noted = sent.setdefault(call, [0, 0, 0])
    noted[0] += n
    noted[1] += request
    noted[2] += reply


@dataclass
class Measured:
    """A shadow's resolution of a block of candidates by one method, recorded to be
    worked out with the rest of its document's (Meter.settle), and counted under each of
    `tags`: its own, then those of every shadow that echoes it."""

    block: Block
    keep: np.ndarray | None  # the block's candidates (None: all of it)
    present: np.ndarray  # per term of the block: known present before asking
    method: str
    held: np.ndarray  # per term of the block: does the document hold it (the truth)?
    matches: np.ndarray  # per candidate: does the document hold all its terms?
    tags: list[str]


@dataclass
class Outcome:
    """What resolving a block's candidates in one state sends: the calls made (the node's
    own resolution, noted as it makes them) and the resolutions measured; a shadow left in
    the same state counts them again under its own tag (an echo)."""

    calls: Sent = field(default_factory=dict)
    measured: list[Measured] = field(default_factory=list)


class Truth:
    """The document's answers for a set of ids, known at once: what the measurement knows
    of a document, so that dialogues can be worked out round by round without asking."""

    def __init__(self, present: np.ndarray) -> None:
        self.array = present  # the ids the document holds, sorted uint64
        self._masks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def mask(self, terms: np.ndarray) -> np.ndarray:
        """Elementwise over sorted terms, all among the ids answered: does the document
        hold it? Worked out once per terms array (a block's depths and methods share it)."""
        got = self._masks.get(id(terms))
        if got is None:
            got = self._masks[id(terms)] = (
                terms,
                member(terms, self.array),
            )  # holds terms: its id stays
        return got[1]


class ShadowResolver(Resolver):
    """The resolution of shadows' recorded candidates (Meter.settle): the same rounds as
    a QN's (cqengine.core.resolution.resolution.Resolver), for parts given as they are measured, and
    resolved to the end told the document's answers (`settle`) instead of asking."""

    _given: list[list[tuple[Block, np.ndarray]]]  # per part: its block, its terms' places
    _terms: np.ndarray | None  # the parts' blocks' terms side by side, made once asked

    @classmethod
    def of_candidates(
        cls, parts: Sequence[tuple[Block, np.ndarray | None, np.ndarray]], batch: int = 1
    ) -> ShadowResolver:
        """Parts given as a block, its candidates (a mask over its queries; None: all) and
        which of its terms are known present. A block may be several parts (a QN measured
        at several depths and by both methods): they share its columns, not its terms."""
        distinct: dict[int, int] = {}  # id(block) -> its place among the distinct blocks
        blocks: list[Block] = []
        for b, _, _ in parts:
            if id(b) not in distinct:
                distinct[id(b)] = len(blocks)
                blocks.append(b)
        sizes = np.array([len(b) for b in blocks], dtype=np.intp)
        block_start = np.cumsum(sizes) - sizes
        which = [distinct[id(b)] for b, _, _ in parts]
        term_start = np.concatenate([[0], np.cumsum([len(b.terms) for b, _, _ in parts])]).astype(
            np.intp
        )
        counts = [len(b) if keep is None else int(np.count_nonzero(keep)) for b, keep, _ in parts]
        part = np.repeat(np.arange(len(parts)), counts)
        col = np.concatenate(
            [
                block_start[u] + (np.arange(len(b)) if keep is None else np.flatnonzero(keep))
                for u, (b, keep, _) in zip(which, parts)
            ]
            or [np.zeros(0, dtype=np.intp)]
        )
        self = cls(
            side_by_side(blocks, 0),  # codes into each block's terms
            np.concatenate([b.entries for b in blocks]),
            term_start,
            part,
            col.astype(np.intp),
            term_start[part],
            np.concatenate([present for _, _, present in parts]),
            batch,
        )
        self.members = members_of(blocks)
        self._given = [
            [(b, np.arange(t, t + len(b.terms)))]
            for (b, _, _), t in zip(parts, term_start.tolist())
        ]
        self._terms = None
        return self

    def sources(self) -> list[list[tuple[Block, np.ndarray]]]:
        """Per part, its block and the places of its terms among every part's."""
        return self._given

    def ids(self, at: np.ndarray) -> list[int]:
        """The term ids at these places: the parts' blocks' terms side by side."""
        if self._terms is None:
            self._terms = np.concatenate([b.terms for sources in self._given for b, _ in sources])
        return self._terms[at].tolist()

    def settle(self, told: np.ndarray) -> np.ndarray:
        """Resolve every part to the end, told the answers (`told`, over every part's
        terms) instead of asking: how many ids each round asks, a row per round, a column
        per part."""
        rounds = []
        while len(at := self.asking()):
            rounds.append(np.diff(at.searchsorted(self.term_start)))
            self.learn(at, told[at])
        return np.array(rounds, dtype=np.int64).reshape(len(rounds), self.parts)

    def matched_mask(self) -> np.ndarray:
        """Per candidate (the parts' side by side): matched so far?"""
        out = np.zeros(len(self.part), dtype=bool)
        out[self.unasked] = True
        if self.rounds is not None:
            out[np.array(self.rounds.matched, dtype=np.intp)] = True
        return out


class Meter:
    """What a QN measures its shadows of one document with: the document as its DN holds
    it (its term ids, what its alerts carry) and, if a shadow resolves by Bloom filter,
    its filter. A shadow's matches are known at once (`matches`); its dialogue is recorded
    (`measure`) to be worked out with every other recorded for the document, by the same
    resolver as the nodes', all at once and round by round (`settle`)."""

    def __init__(
        self, key: int, dn: NodeRef, doc: PublishedDoc, truth: Truth, bits: int, hashes: int
    ) -> None:
        self.key, self.dn, self.doc, self.truth = key, dn, doc, truth
        self.bits, self.hashes = bits, hashes
        self._filter: BloomFilter | None = None
        self._matches: dict[
            int, tuple[Block, np.ndarray, np.ndarray]
        ] = {}  # id(block) -> it, held, its matches
        self.measured: list[Measured] = []

    def filter(self) -> BloomFilter:
        if self._filter is None:
            self._filter = received_filter(
                self.bits, self.hashes, self.doc.bloom(self.bits, self.hashes)
            )
        return self._filter

    def _held(self, block: Block) -> tuple[Block, np.ndarray, np.ndarray]:
        """The block's terms the document holds, and its queries it matches: worked out
        once per block, whichever depths resolve it."""
        got = self._matches.get(id(block))
        if got is None:
            held = self.truth.mask(block.terms)
            got = self._matches[id(block)] = (block, held, ~any_per_query(~held[block.codes]))
        return got

    def matches(self, block: Block, keep: np.ndarray | None) -> list[pb.QueryEntry]:
        """The queries among the block's candidates (`keep`; None: all) that match."""
        _, _, full = self._held(block)
        return expand(
            block.entries, block.members, np.flatnonzero(full if keep is None else full & keep)
        )

    def measure(
        self,
        block: Block,
        keep: np.ndarray | None,
        present: np.ndarray,
        methods: Sequence[str],
        tag: str,
        outcome: Outcome,
    ) -> list[pb.QueryEntry]:
        """Record the resolution of the block's candidates (`keep`; None: all) by each
        method, to be counted under `tag` (and noted in `outcome`); returns the queries
        they match."""
        if "bf" in methods:
            self.filter()
        _, held, full = self._held(block)
        matches = full if keep is None else full[keep]
        for method in methods:
            outcome.measured.append(Measured(block, keep, present, method, held, matches, [tag]))
        self.measured += outcome.measured[-len(methods) :]
        return expand(
            block.entries, block.members, np.flatnonzero(full if keep is None else full & keep)
        )

    @staticmethod
    def settle(
        meters: Sequence[Meter], batch: int, bits: int
    ) -> Iterator[tuple[Meter, Measured, Sent, bool]]:
        """Work out every resolution these meters recorded (all of one document: the QNs
        it reached), all at once, told the document's answers (ShadowResolver):
        each with its meter, the calls it would have made, and whether it matched what the
        truth says it should."""
        parts = [(meter, m) for meter in meters for m in meter.measured]
        for meter in meters:
            meter.measured = []
        if not parts:
            return
        if any(meter.key != meters[0].key for meter in meters):
            raise ValueError("meters of different documents settle apart")
        resolver = ShadowResolver.of_candidates(
            [(m.block, m.keep, m.present) for _, m in parts], batch
        )
        filtered = np.array([m.method == "bf" for _, m in parts])
        bloomed = (
            resolver.pending() > 0
        ) & filtered  # asked for the filter: queries were left to ask about
        if bloomed.any():
            bloom = next(meter.filter() for meter, m in parts if m.method == "bf")  # the document's
            resolver.rule_out(
                resolver.passes([(p, bloom) for p in np.flatnonzero(bloomed).tolist()])
            )
        rounds = resolver.settle(np.concatenate([m.held for _, m in parts]))
        wrong = np.bincount(
            resolver.part[resolver.matched_mask() != np.concatenate([m.matches for _, m in parts])],
            minlength=len(parts),
        )
        asked = np.unique(rounds)
        request, reply = (
            np.zeros(int(asked[-1]) + 1 if len(asked) else 1, dtype=np.int64) for _ in range(2)
        )
        for n in asked[asked > 0].tolist():
            request[n], reply[n] = dialogue_sizes(n)
        calls, requests, replies = (
            (rounds > 0).sum(axis=0),
            request[rounds].sum(axis=0),
            reply[rounds].sum(axis=0),
        )
        fetched = bloom_sizes(bits)
        for (meter, m), bf, n, req, rep, bad in zip(
            parts,
            bloomed.tolist(),
            calls.tolist(),
            requests.tolist(),
            replies.tolist(),
            wrong.tolist(),
        ):
            sent: Sent = {}
            if bf:
                note(sent, (m.method, "GetBloom"), 1, *fetched)
            if n:
                note(sent, (m.method, "TermDialogue"), n, req, rep)
            yield meter, m, sent, not bad
