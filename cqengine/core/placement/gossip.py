"""Synopsis gossip and re-indexing (paper section 8): SAP-MHI without a fixed list of popular
terms learns them.

Each DN counts the documents it publishes in a coin-toss synopsis of the most popular terms
(cqengine.core.terms.synopsis); nodes push what changed to their successors and fingers, so every
synopsis converges to the ring's. When the popular terms change, an owner moves the entries
it holds whose indexing term changed with them: placed at the new key first, removed from
the old one only after `reindex_grace`, so that a document already on its way to the old
key still finds them (the home takes a second alert of the same document once).
"""

from __future__ import annotations

from functools import partial
from operator import is_

from chord.protocol.calls import Call, Op, PeerUnreachable
from chord.protocol.routing import NodeRef
from cqengine.core.basis.errors import EngineError
from cqengine.core.frame.context import Context
from cqengine.core.frame.handoffs import Copier
from cqengine.core.placement.placement import Placement
from cqengine.core.terms.queries import entry_slot
from cqengine.core.terms.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb


class Gossip:
    def __init__(
        self, ctx: Context, synopsis: Synopsis, placement: Placement, replication: Copier
    ) -> None:
        self.ctx, self.synopsis, self.placement = ctx, synopsis, placement
        self.replication = replication
        self.gossiped_to: dict[NodeRef, int] = {}  # neighbour -> synopsis clock last pushed
        self.indexed_with: frozenset[int] = frozenset()  # the popular set entries were placed by
        self.retiring: list[tuple[float, int, pb.QueryEntry]] = []  # (until, old key, entry)

    def gossip(self) -> Op:
        """Push to each successor and finger what changed since it was last told."""
        for nb in self.ctx.chord.table.neighbors():
            delta = self.synopsis.since(self.gossiped_to.get(nb, 0))
            if not delta:
                continue
            msg = pb.GossipRequest(
                term_ids=[t for t, _ in delta],
                hashes=self.synopsis.hashes,
                values=b"".join(bytes(v) for _, v in delta),
            )
            clock = self.synopsis.clock
            try:
                yield Call(nb, "Gossip", msg)
                self.gossiped_to[nb] = clock
            except PeerUnreachable:
                self.gossiped_to.pop(nb, None)
        yield from self.reindex()

    def on_gossip(self, req: pb.GossipRequest) -> pb.Ack:
        h = req.hashes or 1
        values = req.values
        self.synopsis.merge(
            (t, tuple(values[i * h : (i + 1) * h])) for i, t in enumerate(req.term_ids)
        )
        return pb.Ack()

    def reindex(self) -> Op:
        """Move the entries held here whose SAP-MHI term changed with the synopsis.

        The entry is placed at its new key first and leaves the old one only after
        `reindex_grace` seconds: a document whose announcement reached the new owner before
        the entry and reaches the old one after the move still finds it. Meanwhile both
        copies may match; the home node drops the second alert.
        """
        ctx = self.ctx
        yield from self._retire()
        if not ctx.settings.gossiped or self.synopsis.popular() == self.indexed_with:
            return
        self.indexed_with = self.synopsis.popular()
        leaving = {id(e) for _, _, e in self.retiring}
        owns = ctx.chord.table.owns
        for key in ctx.index.keys():
            if ctx.replicated and not owns(key):
                continue  # a replica's: its owner moves it
            for e in ctx.index.get(key):
                if id(e) in leaving:
                    continue
                new_key, _ = self.placement.index_term(e)
                if new_key == key:
                    continue
                moved = pb.QueryEntry()
                moved.CopyFrom(e)
                moved.index_id = new_key
                moved.version = e.version + 1  # where it may come back, it beats its tombstone
                try:
                    yield from self.placement.at_owner(
                        new_key, "Index", pb.IndexRequest(entry=moved)
                    )
                except EngineError:
                    continue  # ownership in flux: it stays where it is, still found
                self.retiring.append((ctx.host.now() + ctx.settings.reindex_grace, key, e))
                ctx.count("reindexed")
        yield from self._retire()

    def _retire(self) -> Op:
        """Drop moved entries whose grace period is over (the very object: a newer entry
        for the same subscription at that key stays); replicated, as tombstones of their
        version, copied to my replicas."""
        ctx = self.ctx
        due = ctx.host.now()
        keep, gone = [], pb.Records()
        for until, key, e in self.retiring:
            if until > due:
                keep.append((until, key, e))
            elif not ctx.replicated:
                ctx.index.remove(key, partial(is_, e))  # that very entry
            elif ctx.store.entries.delete_entry(key, entry_slot(e), e.version):
                tomb = pb.QueryEntry(subscription_id=entry_slot(e), version=e.version)
                gone.entries.add(key=key, entry=tomb, deleted=ctx.host.clock())
        self.retiring = keep
        if gone.entries:
            yield from self.replication.copy(gone)
