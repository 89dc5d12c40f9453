"""Measurement: the observer of a measurement pass over a simulated ring's engine nodes.

`Shadows` counts what the nodes send, as the simulator's default observer does
(cqengine.evaluation.measuring.tally.Tally), and measures, in the same pass over the documents,
what other settings would have sent: the other resolution method (the shadow method),
shallower piggyback depths (shadow depths) and other strategies' indexes of the same
subscriptions (shadow indexes). The runs of a pass differ only in what happens at a QN
once it holds its runs of a document, and that is where it attaches (`on_heard`, of
cqengine.core.frame.observer): it prunes and resolves each shadow as that setting would,
measured, not sent. A shadow's matches are known at once (the queries whose terms the
document all holds: the DN's document, which the observer sees stored); its dialogue is
recorded by the QN's meter and, once the document has run its course (`settle`), worked
out with every other recorded for it, all at once and round by round
(cqengine.evaluation.measuring.meters), and its messages, and the alerts its matches would set off,
are counted as its run alone would have sent them: echo:KIND and echo_bytes:KIND
counters under the shadow's tag (cqengine.evaluation.measuring.tags: kD for a depth, INDEX/kD for
a shadow index, METHOD for the shadow method). A shadow left in the same state as one
resolved already (the same candidates knowing the same of their terms), the node's own
resolution included, would ask the same questions and hear the same answers: its
messages are counted again (an echo) instead of worked out again. Every shadow must
match the same queries as the node; tests/evaluation/test_evaluation.py checks a pass against runs
of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cqengine.core.frame.documents import PublishedDoc
from cqengine.core.frame.observer import Node
from cqengine.core.resolution.knowledge import may_match
from cqengine.core.resolution.runs import Heard
from cqengine.core.state.postings import Block, InvertedIndex, member
from cqengine.evaluation.measuring.depths import Told, bytes_saved
from cqengine.evaluation.measuring.meters import Meter, Outcome, Sent, Truth, note
from cqengine.evaluation.measuring.tags import (
    Unsent,
    call_kind,
    depth_tag,
    ledger_kind,
    unsent_counts,
)
from cqengine.evaluation.measuring.tally import Tally
from cqengine.evaluation.measuring.wire import alert_batch_size, matched_size
from cqengine.proto import cqengine_pb2 as pb

STACK = 10_000  # queries recorded by the meters settled as one stack
ACK = pb.Ack().ByteSize()  # an Ack's bytes: it is empty


def _state(keep: np.ndarray, present: np.ndarray) -> tuple[bytes, bytes]:
    """What decides a resolution of a block's queries: which it keeps, and which of the
    block's terms the QN knows present."""
    return keep.tobytes(), present.tobytes()


@dataclass
class ShadowIndex:
    """Another strategy's index of the same subscriptions, hosted beside a node's own for
    measurement: every QN resolves its lists too, at each of `depths`, measured under the
    index's name (NAME/kD: kinds and counters), with the report of its matches and the
    alert batches they would set off (NAME:Matched, NAME:Deliver)."""

    index: InvertedIndex
    depths: tuple[int, ...]


@dataclass
class Own:
    """A QN's own resolution of what it heard, as the measurement needs it: what it sends
    (for shadows in its state to echo), the queries it must match (worked out from the
    document), and the queries it did match (told by the node)."""

    outcome: Outcome = field(default_factory=Outcome)
    found: list[pb.QueryEntry] | None = None
    matched: list[pb.QueryEntry] = field(default_factory=list)
    noting: bool = False  # do shadows echo its calls (else they need not be noted)?


def _stacks(meters: list[tuple[Node, Meter]]) -> Iterator[list[tuple[Node, Meter]]]:
    """Meters in runs of about STACK queries recorded: a stack's arrays then stay in the
    processor's cache, which one of a whole document's does not."""
    run, size = [], 0
    for node, meter in meters:
        run.append((node, meter))
        size += sum(len(m.matches) for m in meter.measured)
        if size >= STACK:
            yield run
            run, size = [], 0
    if run:
        yield run


class Shadows(Tally):
    """The observer of a measurement pass: besides the tally, every QN's shadows.

    `resolution`: the shadow method ("" for none); `depths`: the shadow piggyback depths,
    shallower than the ring's; `indexes`: per node address, the shadow indexes it hosts
    by name. `matched` holds, per shadow index, the subscriptions its matches would alert
    since it was last emptied."""

    def __init__(
        self,
        resolution: str = "",
        depths: Sequence[int] = (),
        indexes: dict[str, dict[str, ShadowIndex]] | None = None,
    ) -> None:
        super().__init__()
        self.resolution, self.depths = resolution, tuple(depths)
        self.indexes: dict[str, dict[str, ShadowIndex]] = indexes if indexes is not None else {}
        self.matched: dict[str, list[int]] = {}
        self._docs: dict[int, PublishedDoc] = {}  # the documents published, as their DN holds them
        self._truths: dict[int, Truth] = {}
        self._own: dict[int, Own] = {}  # id(heard) -> the QN's own resolution of it
        self._owned: list[tuple[Node, Own]] = []
        self._echoes: list[tuple[Node, Outcome, str]] = []  # calls counted again once known
        self._meters: list[tuple[Node, Meter]] = []
        self._unsent: Unsent = {}

    def check(self, settings) -> None:
        """Refuse shadows the ring's settings cannot measure."""
        if self.resolution not in ("", *{"td", "bf"} - {settings.resolution}):
            raise ValueError(
                f"shadow resolution {self.resolution!r} must be the method other than "
                f"{settings.resolution}, or none"
            )
        if len(set(self.depths)) != len(self.depths) or not all(
            0 <= d < settings.piggyback for d in self.depths
        ):
            raise ValueError(
                f"shadow piggyback depths {list(self.depths)} must be distinct and below "
                f"the piggyback depth {settings.piggyback}"
            )

    # ---- what the nodes say ------------------------------------------------------------------

    def on_published(self, node: Node, doc: PublishedDoc) -> None:
        self._docs[doc.key] = doc

    def on_announce(self, node: Node, msg: pb.Announcement) -> None:
        if self.depths:  # the announcement bytes each shallower depth would not have sent
            for d, n in zip(self.depths, bytes_saved(msg.runs, self.depths)):
                if n:
                    self.tally[f"{depth_tag(d)}:announce_bytes_saved"] += n

    def on_heard(self, node: Node, heard: Heard) -> None:
        if len(heard.docs) != 1:
            raise ValueError("shadows are measured on batches of one document")
        self._measure(node, heard, heard.docs[0])

    def on_resolution_call(
        self, node: Node, heard: Heard, rpc: str, request: Any, reply: Any
    ) -> None:
        own = self._own.get(id(heard))
        if (
            own is not None and own.noting and heard.dn != node.me
        ):  # a call to itself crosses no wire
            note(
                own.outcome.calls,
                (node.settings.resolution, rpc),
                1,
                request.ByteSize(),
                reply.ByteSize(),
            )

    def on_matched(self, node: Node, heard: Heard, matched: list[list[pb.QueryEntry]]) -> None:
        own = self._own.get(id(heard))
        if own is not None:
            own.matched = matched[0]

    def settle(self) -> None:
        """Count what every shadow of the document would have sent."""
        for _, own in self._owned:
            if own.found is not None and {id(e) for e in own.matched} != {id(e) for e in own.found}:
                self.tally["shadow_disagreements"] += 1
        for node, outcome, tag in self._echoes:
            self._count_calls(node, outcome.calls, tag)
        self._settle_meters()
        for name, n in unsent_counts(self._unsent):
            self.tally[name] += n
        for pending in (
            self._docs,
            self._truths,
            self._own,
            self._owned,
            self._echoes,
            self._meters,
            self._unsent,
        ):
            pending.clear()

    # ---- a QN's shadows ----------------------------------------------------------------------

    def _measure(self, node: Node, heard: Heard, doc) -> None:
        """Prune and resolve, measured, every shadow of a QN's runs of a document."""
        s = node.settings
        ids = doc.local_ids()
        told = Told(doc.runs, doc.max_id, node.region(), s.piggyback)
        truth = self._truths.get(doc.key)
        if truth is None:
            known = self._docs[doc.key]  # every QN of a document was told by its DN
            truth = self._truths[doc.key] = Truth(np.array(sorted(known.ids), dtype=np.uint64))
        meter = Meter(doc.key, heard.dn, self._docs[doc.key], truth, s.bloom_bits, s.bloom_hashes)
        hosted = self.indexes.get(node.me.address, {})
        own = self._own[id(heard)] = Own(noting=bool(self.depths or hosted))
        self._owned.append((node, own))
        shared: dict[bytes, tuple[Block, dict]] = {}
        block, resolved = self._shared(shared, node.index, ids, bool(hosted))
        if block is not None:
            self._own_shadows(node, block, told, meter, resolved, own)
        for name, shadow in hosted.items():
            block, resolved = self._shared(shared, shadow.index, ids, True)
            if block is not None:
                matched = self._shadow_depths(
                    node, block, told, meter, shadow.depths, name, resolved
                )
                self._index_matched(node, meter, matched, name)
        self._meters.append((node, meter))

    @staticmethod
    def _shared(
        shared: dict[bytes, tuple[Block, dict]], index: InvertedIndex, ids: list[int], hosting: bool
    ) -> tuple[Block | None, dict]:
        """The queries the index holds under these local ids, as one block (None: none),
        with what its states resolved to: those of an index here that holds the same
        queries, in the same order, if one came before (strategies often agree)."""
        block = index.blocks(ids)
        if block is None or not hosting:  # no other index to share with
            return block, {}
        return shared.setdefault(block.subscriptions(), (block, {}))

    def _own_shadows(
        self, node: Node, block: Block, told: Told, meter: Meter, resolved: dict, own: Own
    ) -> None:
        """The node's own state (what it resolves), the shadow method in it, and the
        shadow depths; `resolved` then holds the states resolved."""
        know = told.at(node.settings.piggyback)
        keep = may_match(block, know.absent_in(block.terms))
        present = member(block.terms, know.present_array)
        n = int(np.count_nonzero(keep))
        own.found = meter.matches(block, keep)
        if n and self.resolution:
            candidates = block if n == len(block) else block.select(keep)
            self._agree(
                meter.measure(candidates, None, present, (self.resolution,), "", own.outcome),
                own.found,
            )
        if own.noting:
            resolved[_state(keep, present)] = (own.outcome, own.found)
        if self.depths:
            self._shadow_depths(node, block, told, meter, self.depths, "", resolved, own.found)

    def _shadow_depths(
        self,
        node: Node,
        block: Block,
        told: Told,
        meter: Meter,
        wanted: tuple[int, ...],
        index: str,
        resolved: dict,
        matched: list[pb.QueryEntry] | None = None,
    ) -> list[pb.QueryEntry]:
        """Prune and resolve the block as each wanted depth would have (the runs cut
        short), measured and counted under kD: kinds and counters (INDEX/kD: for a shadow
        index); every depth must find the same matches (`matched`, the node's own; for a
        shadow index its first depth's), which it returns. What each depth knows of the
        block's terms is worked out for all depths at once (`Told.depths`), unless one
        depth is wanted. A depth left in a state resolved already is counted as an echo."""
        s = node.settings
        known = told.depths(block.terms) if len(wanted) > 1 else None
        for d in wanted:
            tag = depth_tag(d, index)
            if known is None:  # its own knowledge costs less than every depth's
                know = told.at(d)
                keep = may_match(block, know.absent_in(block.terms))
                present = member(block.terms, know.present_array)
            else:
                keep, present = known.kept(block, d), known.present(d)
            state = _state(keep, present)
            n = int(np.count_nonzero(keep))
            self.tally[f"{tag}:candidates"] += n
            if state in resolved:
                outcome, found = resolved[state]
                self._echo(node, outcome, tag)
            else:
                outcome = Outcome()
                found = []
                if n:
                    methods = tuple(m for m in (s.resolution, self.resolution) if m)
                    found = meter.measure(
                        block, keep if n < len(block) else None, present, methods, tag, outcome
                    )
                resolved[state] = (outcome, found)
            if matched is None:
                matched = found
            else:
                self._agree(found, matched)
        return matched if matched is not None else []

    def _index_matched(
        self, node: Node, meter: Meter, matched: list[pb.QueryEntry], index: str
    ) -> None:
        """Count, under INDEX: echo kinds, the report a shadow index's run would send the
        DN and the alert batches the DN would send for it, one per home node (none that
        stays on a node: it never crosses the wire)."""
        if not matched:
            return
        self.tally[f"{index}:matches"] += len(matched)
        doc, dn = meter.doc, meter.dn.address
        if dn != node.me.address:
            self._count_echo(
                ledger_kind("Matched", index),
                1,
                matched_size((e.subscription_id, e.home) for e in matched),
                ACK,
            )
        homes = Counter(e.home for e in matched)
        sizes = [
            alert_batch_size(doc.docno, doc.title, doc.snippet, n)
            for home, n in homes.items()
            if home != dn
        ]
        if sizes:
            self._count_echo(
                ledger_kind("Deliver", index), len(sizes), sum(sizes), len(sizes) * ACK
            )
        self.matched.setdefault(index, []).extend(e.subscription_id for e in matched)

    def _echo(self, node: Node, outcome: Outcome, tag: str) -> None:
        """Count what a state resolved already sends again under `tag`: its calls once
        known (the node's own are noted as it makes them), its measured resolutions once
        settled."""
        self._echoes.append((node, outcome, tag))
        for m in outcome.measured:
            m.tags.append(tag)

    def _agree(self, found: list[pb.QueryEntry], matched: list[pb.QueryEntry]) -> None:
        """Count a shadow that matched other queries than the node's own resolution."""
        if {id(e) for e in found} != {id(e) for e in matched}:  # the block's very entries
            self.tally["shadow_disagreements"] += 1

    # ---- counting what shadows would have sent ---------------------------------------------

    def _settle_meters(self) -> None:
        """Settle the shadows the QNs' meters recorded (Meter.settle), the document's in
        stacks across its QNs, and count what each would have sent."""
        by_doc: dict[int, list[tuple[Node, Meter]]] = {}
        for node, meter in self._meters:
            if meter.measured:
                by_doc.setdefault(meter.key, []).append((node, meter))
        for pending in by_doc.values():
            self._settle_document(pending)

    def _settle_document(self, pending: list[tuple[Node, Meter]]) -> None:
        s = pending[0][0].settings  # the ring's: every node's
        for run in _stacks(pending):
            node_of = {id(meter): node for node, meter in run}
            for meter, m, calls, agrees in Meter.settle(
                [meter for _, meter in run], s.dialogue_batch, s.bloom_bits
            ):
                node = node_of[id(meter)]
                if not agrees:
                    self.tally["shadow_disagreements"] += 1
                if calls and meter.dn != node.me:  # none to itself: that never crosses the wire
                    for tag in m.tags:
                        self._count_calls(node, calls, tag)

    def _count_calls(self, node: Node, calls: Sent, tag: str) -> None:
        """Count resolution calls not sent as a run resolving under depth tag `tag` would
        have sent them."""
        own = node.settings.resolution
        for (method, rpc), (n, request, reply) in calls.items():
            self._count_echo(call_kind(rpc, tag, method, own), n, request, reply)

    def _count_echo(self, kind: str, calls: int, request: int, reply: int) -> None:
        """Count calls of a ledger kind that a run alone would have sent (see unsent_counts)."""
        got = self._unsent.get(kind)
        if got is None:
            self._unsent[kind] = [calls, request, reply]
        else:
            got[0] += calls
            got[1] += request
            got[2] += reply
