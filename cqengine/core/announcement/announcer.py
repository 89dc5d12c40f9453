"""Announcement down the ring's embedded trees (paper section 5, Algorithms 1-3).

The DN starts a batch's announcement with each document as one run of all its ids; every
hop (the DN first) splits each document's runs by the next hop of their ids in its routing
table and sends each next hop one announcement with its runs of every document of the
batch. The runs of ids in a hop's own region stay there: the hop is a QN of the batch
(cqengine.core.qn.qn). When the DN counts its batch's reports, the batch carries a share that
each hop divides among its next hops and itself: every node the batch reached reports its
part, so the DN knows when the shares are back whole.
"""

from __future__ import annotations

import logging

import numpy as np

from chord.protocol.calls import Call, Op, PeerUnreachable
from chord.protocol.ids import in_open_closed
from chord.protocol.routing import NodeRef
from cqengine.core.basis import limits
from cqengine.core.frame.context import Context
from cqengine.core.frame.handoffs import Hearer, HopFilters
from cqengine.core.resolution.runs import Announced, Heard, Run, announced, announcement, route_runs
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.announcement.announcer")


def _mine(ids: np.ndarray | list[int]) -> tuple[list[int], list[None]]:
    """Every id processed here: an announcement past the hop limit."""
    return [0] * len(ids), [None]


def _presence_bytes(msg: pb.Announcement) -> int:
    """What the term-presence header adds to a message: its field, tag and length."""
    return int(pb.Announcement(presence=msg.presence).ByteSize())


class Announcer:
    def __init__(self, ctx: Context, qn: Hearer, filters: HopFilters) -> None:
        """`heard(h)`: what the QN here does with the runs of a batch that stopped here;
        `filters`: the aggregate filters I hold of my hops and grant of my region."""
        self.ctx, self.qn, self.filters = ctx, qn, filters

    def on_announce(self, msg: pb.Announcement) -> pb.AnnounceReply:
        ctx = self.ctx
        docs = announced(msg)
        reply = pb.AnnounceReply()
        if msg.filter:
            self.filters.grant(reply)
        if msg.share and self._idle(docs, msg.hops):  # its share goes back with the reply,
            reply.share = msg.share  # not in a report of nothing
            return reply
        dn = NodeRef(msg.dn_id, msg.dn) if msg.dn_id else ctx.peer(msg.dn)
        ctx.host.spawn(self.announce(dn, docs, msg.hops, msg.batch, msg.share, msg.owner))
        return reply

    def _routes(self, ids: np.ndarray) -> bool:
        """Does my table send any of these ids (unique, uint64) on to another node?"""
        places, routes = self.ctx.chord.table.routes(ids)
        return any(routes[p] is not None for p in np.unique(places).tolist())

    def _idle(self, docs: list[Announced], hops: int) -> bool:
        """Would this announcement stop here (every id mine) and find no query (no list
        under any id)? Then this node has nothing to pass on, resolve or report."""
        if hops >= limits.HOP_LIMIT:
            return False
        ids = np.unique(np.fromiter((y for d in docs for r in d.runs for y in r.ids), np.uint64))
        return not self._routes(ids) and not self.ctx.index.lists(ids)

    def announce(
        self,
        dn: NodeRef,
        docs: list[Announced],
        hops: int,
        batch: int = 0,
        share: int = 0,
        owner: bool = False,
    ) -> Op:
        """Algorithms 2 and 3 for a batch: every document's runs split by next hop, one
        announcement per next hop for all of them; then my own runs are resolved. Of the
        share of the batch I received, each next hop gets a part and my report brings back
        the rest (a part given to a hop that failed comes back to me). `owner`: the sender
        says the ids are mine (Announcement.owner)."""
        ctx = self.ctx
        table = ctx.chord.table
        k = ctx.settings.piggyback
        kept = share
        local: dict[int, list[Run]] = {}  # place in the batch -> my runs of that document
        todo = [(i, run) for i, doc in enumerate(docs) for run in doc.runs]
        router = table.routes if hops < limits.HOP_LIMIT else _mine
        if owner and hops < limits.HOP_LIMIT:
            ids = np.unique(np.fromiter((y for _, run in todo for y in run.ids), np.uint64))
            if self._routes(ids):  # not all mine by my table
                yield from ctx.chord.check_predecessor()  # it may be gone
                if table.predecessor is None:  # gone: its keys are mine now
                    router = _mine
        while todo:
            # each id's next hop by the table as it is now (a failed hop changes it); None: mine
            by_hop: dict[NodeRef, dict[int, list[Run]]] = {}
            for hop, parts in route_runs(todo, router, k).items():
                if hop is None:  # mine
                    for i, runs in parts.items():
                        local.setdefault(i, []).extend(runs)
                else:
                    by_hop[hop] = parts
            router = table.routes if hops < limits.HOP_LIMIT else _mine
            self._filter(by_hop)
            todo = []
            part = kept // (len(by_hop) + 1)
            if by_hop and kept and not part:
                # too little left to give every hop some (a routing loop halves it at each
                # hop): a hop given none would work uncounted, and the shares back could
                # make the whole without it. Burnt, the whole is never made: the DN's hold
                # ends and it announces the batch again.
                ctx.count("shares_burnt")
                kept = 0
            for hop, parts in by_hop.items():
                out = self._message(dn, docs, hops, hop, parts)
                if share:
                    out.batch, out.share = batch, part
                if ctx.observer is not None:
                    ctx.observer.on_announce(ctx, out)
                kept -= part
                asked_at = ctx.host.now()
                try:
                    reply = yield Call(hop, "Announce", out)
                    kept += reply.share  # handed back: nothing there to report
                    if out.filter:
                        self.filters.keep(hop, reply, asked_at)
                except PeerUnreachable:
                    self.filters.forget(hop)
                    # forgotten by the lookup layer: regroup around it; and if it was my
                    # successor, the next one owns its keys once I tell it (at once)
                    todo += [(i, run) for i, runs in parts.items() for run in runs]
                    if hop == table.successor:
                        ctx.host.spawn(ctx.chord.stabilize())
                    ctx.chord.forget(hop)
                    kept += part
        mine = [
            Announced(docs[i].key, docs[i].max_id, runs, docs[i].presence)
            for i, runs in sorted(local.items())
            if runs
        ]
        if not mine:
            if kept:  # nothing of my own to resolve: the share goes back alone
                try:
                    yield Call(dn, "Matched", pb.MatchedRequest(batch=batch, share=kept))
                except PeerUnreachable as e:
                    log.warning("returning a share to %s failed: %s", dn.address, e)
            return
        if hops >= limits.HOP_LIMIT and ctx.replicated:
            # processed where it stopped, maybe not at its ids' owner (tables in flux): the
            # share stays out, so its DN announces the batch again once its hold is over
            kept = 0
        yield from self.qn.heard(Heard(dn, mine, batch, kept))

    def _filter(self, by_hop: dict[NodeRef, dict[int, list[Run]]]) -> None:
        """Leave out of each hop's runs the documents its aggregate filter spares, and the
        hops left with none: nothing there could match (cqengine.core.announcement.filters)."""
        for hop, parts in list(by_hop.items()):
            for i in self.filters.spared(hop, parts):
                del parts[i]
            if not parts:
                del by_hop[hop]
                self.ctx.count("announcements_filtered")

    def _message(
        self,
        dn: NodeRef,
        docs: list[Announced],
        hops: int,
        hop: NodeRef,
        parts: dict[int, list[Run]],
    ) -> pb.Announcement:
        """The announcement to a next hop of its runs of each document."""
        ctx = self.ctx
        headers = [h for i in parts if (h := docs[i].presence) is not None]
        out = announcement(
            dn.address,
            hops + 1,
            ((docs[i].key, docs[i].max_id, runs) for i, runs in parts.items()),
            headers if len(headers) == len(parts) else None,  # every document's, or none
        )
        if out.presence:
            ctx.count("presence_bytes", _presence_bytes(out))
        out.filter = self.filters.wanted(hop)
        if ctx.replicated:  # where its documents are when the DN is gone,
            out.dn_id = dn.id  # and whether I know the ids to be the hop's
            out.owner = all(
                in_open_closed(y, ctx.me.id, hop.id)
                for runs in parts.values()
                for run in runs
                for y in run.ids
            )
        return out
