"""Placement of subscriptions (paper section 4): a query is homed at the node it was
subscribed through and indexed once, under one of its terms, at that term id's owner.

The indexing strategy (cqengine.core.indexing) picks the term; the entry goes to the
owner, found by a lookup and looked up again while ownership moves. Replicated, the owner
copies an entry to its replicas before it acknowledges it, and the home copies the
subscription's record to its own (a replica takes the home's place if it fails).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Callable

from chord.node import Call, Op, PeerUnreachable
from cqengine.core import limits
from cqengine.core.context import Context
from cqengine.core.errors import LEAVING, EngineError
from cqengine.core.indexing import chooser
from cqengine.core.mailboxes import Subscription, home_record, token_hash
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze, term_id

NO_TOKEN = bytes(32)  # compared with when no subscription has the id: no token hashes to it
Copy = Callable[[pb.Records], Op]  # records to my replicas (Replication.copy)


class Placement:
    def __init__(self, ctx: Context, popular: Callable[[], frozenset[int]], copy: Copy) -> None:
        """`popular`: the popular term ids SAP-MHI avoids, as they are now (the ring's fixed
        list, or what gossip learnt); `copy`: records changed here, to my replicas."""
        self.ctx, self.copy = ctx, copy
        s = ctx.settings
        fixed = s.popular_ids
        self.choose = chooser(
            s.strategy, s.seed, s.df, (lambda: fixed) if fixed is not None else popular
        )

    # ---- a subscriber's requests ---------------------------------------------------------

    def subscribe(self, text: str) -> Op:
        size = len(text.encode("utf-8"))
        limit = self.ctx.settings.max_query_bytes
        if size > limit:  # before the work of analyzing it
            raise EngineError(
                "INVALID_ARGUMENT", f"the query has {size} bytes; the limit is {limit}"
            )
        return (yield from self.subscribe_terms(analyze(text)))

    def subscribe_terms(self, terms: list[str]) -> Op:
        """Subscribe a query already analyzed (by `analyze`, here or in a Spark job)."""
        ctx = self.ctx
        if ctx.stopping:
            raise EngineError("UNAVAILABLE", LEAVING)
        if not terms:
            raise EngineError(
                "INVALID_ARGUMENT",
                "the query has no terms left after stop-word removal and stemming",
            )
        if len(terms) > limits.MAX_QUERY_TERMS:
            raise EngineError(
                "INVALID_ARGUMENT",
                f"the query has {len(terms)} terms; at most {limits.MAX_QUERY_TERMS} are allowed",
            )
        pairs = sorted((term_id(t), t) for t in terms)
        sub_id = ctx.host.new_id()
        while sub_id in ctx.subscriptions:  # never two alike here (64 random bits: never)
            sub_id = ctx.host.new_id()
        x, index_term = pairs[self.choose(pairs, sub_id)]
        key = ctx.me.id if ctx.replicated else 0  # its home key: mine
        entry = pb.QueryEntry(
            subscription_id=sub_id,
            term_ids=[p[0] for p in pairs],
            terms=[p[1] for p in pairs],
            index_id=x,
            home=ctx.me.address,
            home_id=key,
        )
        token = secrets.token_hex(16)
        sub = Subscription(sub_id, token_hash(token), terms, x, index_term, key=key)
        ctx.subscriptions[sub_id] = sub  # before placing: an alert may come at once
        try:
            yield from self.at_owner(x, "Index", pb.IndexRequest(entry=entry))
        except BaseException:
            del ctx.subscriptions[sub_id]
            raise
        if ctx.replicated:  # the home's replicas take over if it fails
            yield from self.copy(pb.Records(homes=[home_record(sub)]))
        if ctx.journal is not None:  # placed: from now on it must outlive the process
            ctx.journal.subscribed(sub)
        return pb.SubscribeReply(
            subscription_id=sub_id,
            token=token,
            terms=terms,
            index_term=index_term,
            home=ctx.me.address,
            home_id=key,
            contacts=[s.address for s in ctx.chord.table.successors if s != ctx.me],
        )

    def unsubscribe(self, sub_id: int, token: str) -> Op:
        ctx = self.ctx
        sub = self.authorized(sub_id, token)
        if ctx.replicated:  # a tombstone, for the replicas too
            ctx.store.unsubscribe(sub_id, sub.key)
            deleted = ctx.store.gone[sub_id][1]
            record = pb.HomeRecord(key=sub.key, subscription_id=sub_id, deleted=deleted)
            yield from self.copy(pb.Records(homes=[record]))
        else:
            del ctx.subscriptions[sub_id]  # no alert reaches it from now on
            if ctx.journal is not None:
                ctx.journal.unsubscribed(sub_id, 0, 0.0)
        # a gossiped synopsis may have moved the entry under any of the query's terms
        gossiped = ctx.settings.gossiped
        keys = sorted({term_id(t) for t in sub.terms}) if gossiped else [sub.index_id]
        for key in keys:
            yield from self.at_owner(
                key, "Unindex", pb.UnindexRequest(index_id=key, subscription_id=sub_id)
            )
        return pb.UnsubscribeReply()

    def authorized(self, sub_id: int, token: str) -> Subscription:
        """The subscription, if its token is right and I serve it (its home, not a replica).
        An unknown id and a wrong token get the same answer, in the same time: a guesser
        learns nothing of which ids exist."""
        ctx = self.ctx
        sub = ctx.subscriptions.get(sub_id)
        kept = sub.token_hash if sub is not None else NO_TOKEN
        if not hmac.compare_digest(kept, token_hash(token)) or sub is None:
            raise EngineError(
                "NOT_FOUND", f"no subscription {sub_id:016x} with this token at {ctx.me.address}"
            )
        if sub.key and not ctx.serves(sub.key):
            raise EngineError(
                "UNAVAILABLE",
                f"subscription {sub_id:016x} is served by another node now: look up its home "
                f"key {sub.key:016x}",
            )
        return sub

    def at_owner(self, key: int, method: str, request) -> Op:
        """Send an index change to the key's owner, looking again while ownership moves."""
        for _ in range(limits.PLACE_ATTEMPTS):
            owner, _ = yield from self.ctx.chord.lookup(key, verify=True)
            try:
                reply = yield Call(owner, method, request)
            except PeerUnreachable:
                continue
            if reply.owner:
                return owner
        raise EngineError("UNAVAILABLE", "the ring's ownership kept changing; try again")

    # ---- at the owner of an index term ---------------------------------------------------

    def on_index(self, req: pb.IndexRequest) -> pb.IndexReply | Op:
        e, ctx = req.entry, self.ctx
        if not ctx.chord.table.owns(e.index_id):
            return pb.IndexReply(owner=False)
        if ctx.replicated:
            return self._placed(pb.EntryRecord(key=e.index_id, entry=e))
        ctx.index.replace(e.index_id, e)
        return pb.IndexReply(owner=True)

    def on_unindex(self, req: pb.UnindexRequest) -> pb.IndexReply | Op:
        ctx = self.ctx
        if not ctx.chord.table.owns(req.index_id):
            return pb.IndexReply(owner=False)
        if ctx.replicated:  # a tombstone that beats every version of the entry
            gone = pb.QueryEntry(
                subscription_id=req.subscription_id, version=limits.DELETED_FOREVER
            )
            return self._placed(
                pb.EntryRecord(key=req.index_id, entry=gone, deleted=ctx.store.clock())
            )
        if ctx.index.holds(req.index_id, req.subscription_id):
            ctx.index.remove(req.index_id, lambda e: e.subscription_id == req.subscription_id)
        return pb.IndexReply(owner=True)

    def _placed(self, record: pb.EntryRecord) -> Op:
        """An owner's change to its entries, copied to its replicas before it is acknowledged."""
        self.ctx.store.put_entry(record.key, record.entry, record.deleted)
        done = yield from self.copy(pb.Records(entries=[record]))
        return pb.IndexReply(owner=True, replicas=done)
