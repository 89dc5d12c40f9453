"""The DN: a batch of documents published through this node, stored and announced (paper
section 5; a batch of one is the paper's protocol).

The DN stores a batch's documents (replicated: and has its successors hold a copy, so that
one of them finishes the batch if the DN fails) and announces them, each as one run of its
ids (cqengine.core.announcement.announcer). Every QN the batch reaches reports its
matches back to the DN's node, whose reports (cqengine.core.delivery.reports) turn them
into alerts for their homes: the document's path goes on from the QN, not back here. Once
a batch is through, its copies are released here.

A network partition splits the ring in two, and each side serves on as a ring of its own:
a batch announced on one side never reaches the queries the other side alone holds, and
every report comes back all the same. So a DN keeps its batches of the last minutes
(`Sent`), and when a node it had lost is found again, and was up all along (its side was
a ring of its own, not a node that failed and restarted), it announces again those it
sent since shortly before the loss, once the rings have merged (APART_SETTLE). Homes take
each alert once: the side that had heard them adds nothing.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from chord.protocol.calls import Call, Op, PeerUnreachable
from chord.protocol.ids import distance
from chord.protocol.routing import NodeRef
from cqengine.core.basis import limits
from cqengine.core.basis.errors import LEAVING, EngineError
from cqengine.core.frame.context import Context
from cqengine.core.frame.documents import Document, Documents, PublishedDoc, prepare
from cqengine.core.frame.handoffs import Announcing, Expecting
from cqengine.core.resolution.runs import Announced, Run
from cqengine.core.state.ranges import in_range
from cqengine.core.terms import presence
from cqengine.core.terms.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.dn.dn")


class Sent:
    """The batches a DN announced lately, oldest first: (when, documents). Kept
    `margin` seconds, or, while nodes are lost, from `margin` before the first was lost,
    limits.HELD_FOR at most; and limits.DOC_CACHE documents at most, the oldest going
    first (counted: a partition healing after them finds them gone)."""

    def __init__(self, margin: float) -> None:
        self.margin = margin
        self.batches: deque[tuple[float, list[PublishedDoc]]] = deque()
        self.docs = 0
        self.lost_at: dict[NodeRef, float] = {}  # nodes lost, and when I heard of it

    def add(self, now: float, docs: list[PublishedDoc]) -> int:
        """Keep a batch just announced; how many documents went for want of room while
        nodes are lost."""
        self.batches.append((now, docs))
        self.docs += len(docs)
        for node in [n for n, t in self.lost_at.items() if t < now - limits.HELD_FOR]:
            del self.lost_at[node]  # lost for good, or found without a word
        since = min(self.lost_at.values(), default=now) - self.margin
        gone = 0
        while self.batches and (
            self.batches[0][0] < max(since, now - limits.HELD_FOR)
            or self.docs - len(self.batches[0][1]) >= limits.DOC_CACHE
        ):
            at, old = self.batches.popleft()
            self.docs -= len(old)
            gone += len(old) if at >= since else 0
        return gone

    def since(self, t: float) -> list[PublishedDoc]:
        """The documents of batches announced at `t - margin` or later, each once."""
        docs = {d.key: d for at, batch in self.batches if at >= t - self.margin for d in batch}
        return list(docs.values())


def tell(peer: NodeRef, method: str, request: object) -> Op:
    """A call whose failure changes nothing."""
    try:
        yield Call(peer, method, request)
    except PeerUnreachable:
        pass  # a copy left behind goes with the oldest (HeldBatches.hold)


class DN:
    # the reports of my batches, counted while I hold their alerts (set by the node, which
    # makes them after me: they release my batches' copies, cqengine.core.node)
    reports: Expecting

    def __init__(
        self,
        ctx: Context,
        documents: Documents,
        synopsis: Synopsis,
        announcer: Announcing,
        hold: float,
    ) -> None:
        """`hold`: seconds at most my reports hold a batch's alerts (Reports), for which
        my batches of the last minutes are kept, to announce again after a partition."""
        self.ctx, self.documents, self.synopsis = ctx, documents, synopsis
        self.announcer = announcer
        self.own: dict[int, list[NodeRef]] = {}  # my unresolved batches -> their copies
        # this life of mine: a batch of mine another life made is announced again, one of
        # this life is resolved already (no time tells them apart: a clock may be stepped)
        self.incarnation = ctx.host.incarnation
        self.started = ctx.host.now()  # how long I have been up (Uptime), on the host's clock
        # my batches of the last minutes, to announce again after a partition
        self.sent = Sent(limits.APART_MARGIN + 2 * hold)
        self.apart_since: float | None = None  # found again, up all along: since when apart
        # my successors, as the list was when it last changed (a shell that sets tables
        # without growing them has me look once: EngineSimulator)
        self.neighbours: set[NodeRef] = set(ctx.chord.table.successors) - {ctx.me}
        ctx.chord.lost_listeners.append(self.on_lost)
        ctx.chord.found_listeners.append(self.on_found)
        ctx.chord.successor_listeners.append(self.successors_changed)

    def publish(self, docno: str, text: bytes, title: str = "") -> Op:
        """Analyze and publish one document, a batch of one; EngineError if refused."""
        doc = prepare(docno, text, title, self.ctx.settings.max_document_bytes)
        return (yield from self.publish_one(doc))

    def publish_terms(
        self, docno: str, terms: Sequence[str], title: str = "", snippet: str = ""
    ) -> Op:
        """Publish one document already analyzed (by `analyze`, here or in a Spark job)."""
        return (yield from self.publish_one(Document(docno, terms, title, snippet)))

    def publish_one(self, doc: Document) -> Op:
        """A batch of one; EngineError if refused."""
        (reply,) = yield from self.publish_batch([doc])
        if isinstance(reply, EngineError):
            raise reply
        return reply

    def publish_batch(self, docs: Sequence[Document]) -> Op:
        """Store every document of the batch fit to publish (replicated: and copy them to my
        successor, which finishes the batch if I fail), and have them announced together
        (an operation handed to `spawn`). Per document, its PublishReply or the EngineError
        that refused it: a document is accepted once its DN holds it (and a replica)."""
        if self.ctx.stopping:
            return [EngineError("UNAVAILABLE", LEAVING)] * len(docs)
        out: list[pb.PublishReply | EngineError] = []
        stored: list[PublishedDoc] = []
        for doc in docs:
            try:
                stored.append(self._store(doc))
            except EngineError as e:
                out.append(e)
                continue
            out.append(
                pb.PublishReply(accepted=True, terms=len(stored[-1].ids), doc_key=stored[-1].key)
            )
        if (yield from self.send_out([doc for doc in stored if doc.ids])):
            return out
        refused = EngineError("UNAVAILABLE", "no successor took a copy of the document; try again")
        for kept in stored:
            self.documents.drop(kept.key)
        return [refused if isinstance(r, pb.PublishReply) else r for r in out]

    def _store(self, doc: Document) -> PublishedDoc:
        """Keep the document (I answer for it) and count it in the synopsis."""
        ctx = self.ctx
        if not doc.accepted:
            doc = replace(doc, accepted=ctx.host.clock())
        kept = self.documents.store(doc)
        if ctx.settings.gossiped:  # the DN stores, so counts, what it announces
            self.synopsis.add_document(kept.docno, kept.ids)
        ctx.count("documents_published")
        if ctx.observer is not None:
            ctx.observer.on_published(ctx, kept)
        return kept

    def send_out(self, stored: list[PublishedDoc], name: int = 0) -> Op:
        """Announce documents I hold as one batch of mine (named `name`: sent again after
        a partition, else after its first document); replicated, once my successor holds
        a copy (False: no successor took one)."""
        if not stored:
            return True
        ctx = self.ctx
        again, name = bool(name), name or stored[0].key
        if ctx.replicated:
            held = pb.HeldBatch(
                key=ctx.me.id, batch=name, dn=ctx.me.address, incarnation=self.incarnation
            )
            for doc in stored:
                held.documents.add(
                    key=doc.key,
                    docno=doc.docno,
                    title=doc.title,
                    snippet=doc.snippet,
                    ids=doc.sorted_ids().tolist(),
                    sequence=doc.held_sequence(),  # for phrase questions, if it takes over
                )
            took = yield from self._copied(held)
            if not took and not ctx.chord.table.alone():
                return False
            ctx.store.batches.hold(held)  # a leave hands it over with the rest
            self.own[name] = took
        hot = ctx.settings.hot_ids
        batch = [
            Announced(
                doc.key,
                max(doc.ids),
                [Run.whole(sorted(doc.ids))],
                presence.encode_one(presence.places(hot, doc.sorted_ids())) if len(hot) else None,
            )
            for doc in stored
        ]
        share = 0
        if self.reports.hold > 0:  # count the reports of the batch
            share = limits.WHOLE
            self.reports.expect(name, batch)
        ctx.host.spawn(self.announcer.announce(ctx.me, batch, 0, name if share else 0, share))
        if not again:  # (those sent again are kept as first sent)
            forgotten = self.sent.add(ctx.host.now(), stored)
            if forgotten:
                ctx.count("documents_unkept", forgotten)
        return True

    def _copied(self, held: pb.HeldBatch) -> Op:
        """Copies of my batch to my replicas (the successors after them, for those that do
        not answer): which took one."""
        ctx = self.ctx
        took: list[NodeRef] = []
        for peer in list(ctx.chord.table.successors):
            if peer == ctx.me or len(took) == ctx.settings.replicas - 1:
                break
            try:
                yield Call(peer, "Replicate", pb.Records(batches=[held]))
                took.append(peer)
            except PeerUnreachable:
                ctx.chord.forget(peer)
        return took

    # ---- after a partition -----------------------------------------------------------------

    def on_lost(self, node: NodeRef) -> None:
        self.sent.lost_at.setdefault(node, self.ctx.host.now())

    def successors_changed(self) -> None:
        """Nodes gone from my successor list count as lost, and those back in it as found:
        a node that never called one across a cut sees the ring shrink all the same."""
        ctx = self.ctx
        t = ctx.chord.table
        now = set(t.successors) - {ctx.me}
        reach = max((distance(ctx.me.id, n.id) for n in now), default=0)
        for node in self.neighbours - now:
            if len(now) < t.r or distance(ctx.me.id, node.id) < reach:
                self.on_lost(node)  # gone from within the list: not pushed past its end
        for node in now - self.neighbours:
            self.on_found(node)
        self.neighbours = now

    def on_found(self, node: NodeRef, tries: int = 1) -> None:
        """A node I had lost is found again: if it was up all along, my batches since
        shortly before are announced again once the rings have merged."""
        since = self.sent.lost_at.pop(node, None)
        if since is not None:
            self.ctx.host.spawn(self._found_apart(node, since, tries))

    def on_uptime(self, req: pb.UptimeRequest) -> pb.UptimeReply:
        return pb.UptimeReply(seconds=self.ctx.host.now() - self.started)

    def _found_apart(self, node: NodeRef, since: float, tries: int) -> Op:
        ctx = self.ctx
        try:
            reply = yield Call(node, "Uptime", pb.UptimeRequest())
        except PeerUnreachable:  # not reachable after all (a stale entry): lost still
            self.sent.lost_at.setdefault(node, since)
            if tries < limits.APART_TRIES:  # asked again while my successors list it
                ctx.host.later(limits.APART_SETTLE, lambda: self._listed_again(node, tries))
            return
        if reply.seconds <= ctx.host.now() - since:
            return  # it restarted since: my batches reached every node that was up
        if self.apart_since is None:
            ctx.host.later(limits.APART_SETTLE, self._announce_again)
        self.apart_since = min(since, self.apart_since or since)
        log.warning(
            "%s was apart since %.0f s ago: my batches of then go out again",
            node.address,
            ctx.host.now() - since,
        )

    def _listed_again(self, node: NodeRef, tries: int) -> None:
        if node in self.ctx.chord.table.successors:
            self.on_found(node, tries + 1)

    def _announce_again(self) -> None:
        """My batches since shortly before the partition, announced again as one batch
        each of at most limits.MAX_BATCH_DOCS documents, under new names."""
        since, self.apart_since = self.apart_since, None
        if since is None or self.ctx.stopping:
            return
        docs = self.sent.since(since)
        self.ctx.count("documents_sent_again", len(docs))
        for i in range(0, len(docs), limits.MAX_BATCH_DOCS):
            again = [self.documents.keep_published(d) for d in docs[i : i + limits.MAX_BATCH_DOCS]]
            self.ctx.host.spawn(self.send_out(again, self.ctx.host.new_id()))

    # ---- held copies ---------------------------------------------------------------------

    def release(self, batch: int) -> None:
        """My batch is through: its copies are needed no more."""
        ctx = self.ctx
        ctx.store.batches.release(batch)
        # and my replicas now: a node that joined before them since was handed a copy
        for peer in dict.fromkeys([*self.own.pop(batch, ()), *ctx.replica_set()]):
            ctx.host.spawn(tell(peer, "Release", pb.ReleaseRequest(batch=batch)))

    def take_over(self) -> Op:
        """Batches held for DNs whose key is mine now: their DN failed or left (a live DN
        owns its own key) before it finished them, or was I, before I restarted (its copies
        came back to me with my region). I announce them again as their DN (homes take
        each alert once: those already sent are not repeated), and the other copies go."""
        ctx = self.ctx
        region = ctx.region()
        if region is None:
            return
        for held in list(ctx.store.batches.held.values()):
            if not in_range(held.key, *region) or held.batch in self.own:
                continue
            if held.key == ctx.me.id and held.incarnation == self.incarnation:
                # mine, made in this life, and resolved: a copy whose release missed its
                # holder came back to me with my region
                self.release(held.batch)
                ctx.count("stale_copies_released")
                continue
            self.release(held.batch)  # the other copies go: mine is announced anew
            stored = [self.documents.keep(d) for d in held.documents]
            ctx.count("documents_taken_over", len(stored))
            log.warning(
                "taking over batch %016x of %s (%d documents): its DN is gone",
                held.batch,
                held.dn,
                len(stored),
            )
            yield from self.send_out(stored)
