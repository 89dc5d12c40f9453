"""Placement of subscriptions (paper section 4): a query is homed at the node it was
subscribed through and indexed once, under one of its terms, at that term id's owner.

The indexing strategy (cqengine.core.terms.indexing) picks the term; the entry goes to the
owner, found by a lookup and looked up again while ownership moves. Replicated, the owner
copies an entry to its replicas before it acknowledges it, and the home copies the
subscription's record to its own (a replica takes the home's place if it fails).

A batch of queries is placed the same way, with fewer messages: one lookup per owner
region its keys fall in, one Index message per owner, one copy of the owner's new entries
and one of the home's new records to their replicas.

With the ring's home log on (Settings.home_log), a subscription is homed under a key of
the node's own log (cqengine.core.home.homes), and its record enters the log, not the
replicas' copies: it exists once the entry is committed, before its entries are placed.
"""

from __future__ import annotations

import hmac
import secrets
from bisect import bisect_right
from collections.abc import Sequence
from functools import partial
from inspect import isgenerator

from chord.protocol.calls import Call, Op, PeerUnreachable
from chord.protocol.routing import NodeRef
from cqengine.core.alerts.mailboxes import Subscription, home_record, token_hash
from cqengine.core.announcement.filters import Filters
from cqengine.core.basis import limits
from cqengine.core.basis.errors import LEAVING, MINORITY, EngineError
from cqengine.core.frame.context import Context
from cqengine.core.frame.handoffs import Copier
from cqengine.core.home.homes import Held, HomeLogs, Moved
from cqengine.core.terms.indexing import chooser
from cqengine.core.terms.queries import (
    Query,
    analyze_query,
    conjunction,
    entry_of,
    entry_slot,
    slot,
)
from cqengine.core.terms.settings import Settings
from cqengine.core.terms.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

NO_TOKEN = bytes(32)  # compared with when no subscription has the id: no token hashes to it
MOVING = "the ring's ownership kept changing; try again"
TAKING_OVER = "this node is taking over the logs of home keys it serves now; try again"
Analyzed = Query | EngineError  # a query analyzed, or why it was refused


def analyzed(settings: Settings, text: str) -> Query:
    """A query analyzed; refused before the work of analyzing it if its text is too long."""
    size = len(text.encode("utf-8"))
    limit = settings.max_query_bytes
    if size > limit:
        raise EngineError("INVALID_ARGUMENT", f"the query has {size} bytes; the limit is {limit}")
    return analyze_query(text, settings.max_alternatives)


def analyze_all(settings: Settings, texts: Sequence[str]) -> list[Analyzed]:
    """Each query analyzed, or why it is refused: what `subscribe_analyzed` takes (touching
    no node, so a live node runs it in a worker thread)."""
    out: list[Analyzed] = []
    for text in texts:
        try:
            out.append(analyzed(settings, text))
        except EngineError as e:
            out.append(e)
    return out


def terms_problem(terms: list[str]) -> EngineError | None:
    """Why a query of these terms is refused (None: it is not)."""
    if not terms:
        return EngineError(
            "INVALID_ARGUMENT", "the query has no terms left after stop-word removal and stemming"
        )
    if len(terms) > limits.MAX_QUERY_TERMS:
        return EngineError(
            "INVALID_ARGUMENT",
            f"the query has {len(terms)} terms; at most {limits.MAX_QUERY_TERMS} are allowed",
        )
    return None


def check_batch(n: int) -> None:
    """A batch of n queries is one call's worth (else INVALID_ARGUMENT)."""
    if not n:
        raise EngineError("INVALID_ARGUMENT", "a batch needs at least one query")
    if n > limits.MAX_BATCH_QUERIES:
        raise EngineError(
            "INVALID_ARGUMENT",
            f"a batch of {n} queries; at most {limits.MAX_BATCH_QUERIES} go in one call",
        )


class Placement:
    def __init__(
        self,
        ctx: Context,
        synopsis: Synopsis,
        replication: Copier,
        filters: Filters,
        logs: HomeLogs | None = None,
    ) -> None:
        """`synopsis`: whose popular term ids SAP-MHI avoids, as they are now (unless the
        ring fixed its list); `replication`: records changed here, to my replicas;
        `filters`: what an entry under a key new here waits for
        (cqengine.core.announcement.filters);
        `logs`: the home keys' logs, on the home log (None: records copied)."""
        self.ctx, self.replication, self.filters, self.logs = ctx, replication, filters, logs
        s = ctx.settings
        fixed = s.popular_ids
        self.choose = chooser(
            s.strategy, s.seed, s.df, (lambda: fixed) if fixed is not None else synopsis.popular
        )

    def index_term(self, entry: pb.QueryEntry) -> tuple[int, str]:
        """The (term id, term) the strategy files the entry under, as things are now."""
        pairs = list(zip(entry.term_ids, entry.terms))
        return pairs[self.choose(pairs, entry_slot(entry))]

    # ---- a subscriber's requests ---------------------------------------------------------

    def subscribe(self, text: str) -> Op:
        return (yield from self.subscribe_query(analyzed(self.ctx.settings, text)))

    def subscribe_terms(self, terms: list[str]) -> Op:
        """Subscribe a conjunction of terms already analyzed (by `analyze`, here or in a
        Spark job)."""
        why = terms_problem(terms)
        if why is not None:
            raise why
        return (yield from self.subscribe_query(conjunction(terms)))

    def subscribe_query(self, query: Query) -> Op:
        """Subscribe a query analyzed (`analyzed`): each of its alternatives indexed."""
        ctx = self.ctx
        if ctx.stopping:
            raise EngineError("UNAVAILABLE", LEAVING)
        key = yield from self._home_key()
        sub, entries, token = self._new(query, key)
        yield from self._homed(key, [sub])  # before placing: an alert may come at once
        try:
            if len(entries) == 1:
                request = pb.IndexRequest(entry=entries[0])
                yield from self.at_owner(entries[0].index_id, "Index", request)
            elif (yield from self.at_owners(entries)):
                raise EngineError("UNAVAILABLE", MOVING)
        except BaseException:
            self._abandon(sub, len(entries) > 1)
            raise
        if ctx.replicated and self.logs is None:  # the home's replicas take over if it fails
            yield from self.replication.copy(pb.Records(homes=[home_record(sub)]))
        if ctx.journal is not None and self.logs is None:  # placed: it must outlive the process
            ctx.journal.subscribed(sub)
        return self._reply(sub, query, token, self._contacts())

    def subscribe_many(self, texts: Sequence[str]) -> Op:
        """Subscribe a batch of queries (`subscribe_analyzed`, analyzing them here)."""
        check_batch(len(texts))
        return (yield from self.subscribe_analyzed(analyze_all(self.ctx.settings, texts)))

    def subscribe_analyzed(self, queries: Sequence[Analyzed]) -> Op:
        """Subscribe a batch of queries analyzed by `analyze_all`, each checked on its own;
        their entries go to their owners one Index message per owner, and (replicated)
        their records to my replicas in one copy. One result per query, in order: its
        reply, or the EngineError that refused it alone."""
        ctx = self.ctx
        if ctx.stopping:
            raise EngineError("UNAVAILABLE", LEAVING)
        check_batch(len(queries))
        results: list[pb.SubscribeReply | EngineError | None] = []
        new: dict[int, tuple[int, Subscription, list[pb.QueryEntry], str, Query]] = {}
        key = yield from self._home_key()
        for i, query in enumerate(queries):
            results.append(query if isinstance(query, EngineError) else None)  # placeholders
            if isinstance(query, Query):
                sub, entries, token = self._new(query, key)
                new[sub.id] = (i, sub, entries, token, query)
        yield from self._homed(key, [n[1] for n in new.values()])
        try:
            unplaced = yield from self.at_owners([e for n in new.values() for e in n[2]])
        except BaseException:
            for _, sub, _, _, _ in new.values():
                self._abandon(sub, True)
            raise
        for sub_id in dict.fromkeys(unplaced):
            i, sub, entries, _, _ = new.pop(sub_id)
            results[i] = EngineError("UNAVAILABLE", MOVING)
            self._abandon(sub, len(entries) > 1)
        placed = [n[1] for n in new.values()]
        if ctx.replicated and placed and self.logs is None:
            yield from self.replication.copy(pb.Records(homes=[home_record(sub) for sub in placed]))
        if ctx.journal is not None and self.logs is None:  # (on the log: its entry)
            for sub in placed:
                ctx.journal.subscribed(sub)
        contacts = self._contacts()
        for i, sub, _, token, query in new.values():
            results[i] = self._reply(sub, query, token, contacts)
        return results

    def _home_key(self) -> Op:
        """The home key of the subscriptions I make now: my own id (replicated), a key of my
        own log (the home log), or none."""
        ctx = self.ctx
        if self.logs is None:
            return ctx.me.id if ctx.replicated else 0
        try:
            return (yield from self.logs.own_key())
        except Held as e:  # (my region unknown yet, or no majority for a new log)
            raise EngineError("UNAVAILABLE", f"cannot home a subscription here now: {e}") from None
        except Moved:
            raise EngineError("UNAVAILABLE", MOVING) from None

    def _homed(self, key: int, subs: list[Subscription]) -> Op:
        """New subscriptions homed here: into my subscriptions, or (the home log) into the
        log of their key, there once committed."""
        if self.logs is None:
            for sub in subs:
                self.ctx.subscriptions[sub.id] = sub
            return
        if subs:
            yield from self._logged(key, pb.LOG_SUBSCRIBE, [home_record(sub) for sub in subs])

    def _logged(self, key: int, kind: pb.LogKind, records: list[pb.HomeRecord]) -> Op:
        """Records appended to a key's log, and committed."""
        entries = [pb.LogEntry(kind=kind, data=r.SerializeToString()) for r in records]
        assert self.logs is not None
        try:
            yield from self.logs.append(key, entries)
        except Held:
            raise EngineError("UNAVAILABLE", MINORITY) from None
        except Moved:
            raise EngineError("UNAVAILABLE", MOVING) from None

    def _new(self, query: Query, key: int) -> tuple[Subscription, list[pb.QueryEntry], str]:
        """A new subscription of this (checked) query, under this home key; its index
        entries (one per alternative) and token."""
        ctx = self.ctx
        sub_id = ctx.host.new_id()
        while sub_id in ctx.subscriptions:  # never two alike here (64 random bits: never)
            sub_id = ctx.host.new_id()
        entries, index_term = [], ""
        for i, alt in enumerate(query.alternatives):
            entry = entry_of(alt, i)
            entry.subscription_id, entry.home, entry.home_id = sub_id, ctx.me.address, key
            entry.index_id, term = self.index_term(entry)
            entries.append(entry)
            index_term = index_term or term  # the first alternative's
        token = secrets.token_hex(16)
        first = entries[0].index_id
        terms = list(query.terms)
        sub = Subscription(sub_id, token_hash(token), terms, first, index_term, key=key)
        if not query.plain:
            sub.query, sub.index_ids = query.text, tuple(e.index_id for e in entries)
        return sub, entries, token

    def _abandon(self, sub: Subscription, placed_some: bool) -> None:
        """A new subscription not placed goes; those of its entries that may have been
        placed (`placed_some`: another may have failed) are unindexed again."""
        if self.logs is None:
            del self.ctx.subscriptions[sub.id]
        else:
            gone = pb.HomeRecord(key=sub.key, subscription_id=sub.id, deleted=1.0)
            self.ctx.host.spawn(self._logged(sub.key, pb.LOG_UNSUBSCRIBE, [gone]))
        if placed_some:
            self.ctx.host.spawn(self._unindexed(sub))

    def _contacts(self) -> list[str]:
        """My successors: where a subscriber asks when I am gone."""
        me = self.ctx.me
        return [s.address for s in self.ctx.chord.table.successors if s != me]

    def _reply(
        self, sub: Subscription, query: Query, token: str, contacts: list[str]
    ) -> pb.SubscribeReply:
        ctx = self.ctx
        reply = pb.SubscribeReply(
            subscription_id=sub.id,
            token=token,
            terms=sub.terms,
            index_term=sub.index_term,
            home=ctx.me.address,
            home_id=sub.key,
            contacts=contacts,
            query=query.text,
            dropped=query.dropped,
        )
        for alt, (_, key) in zip(query.alternatives, sub.indexed()):
            index_term = next(t for t in alt.terms if term_id(t) == key)
            reply.alternatives.add(query=alt.show(), index_term=index_term)
        return reply

    def unsubscribe(self, sub_id: int, token: str) -> Op:
        ctx = self.ctx
        sub = self.authorized(sub_id, token)
        if self.logs is not None:  # it ends where the log's entries say
            gone = pb.HomeRecord(key=sub.key, subscription_id=sub_id, deleted=ctx.host.clock())
            yield from self._logged(sub.key, pb.LOG_UNSUBSCRIBE, [gone])
        elif ctx.replicated:  # a tombstone, for the replicas too
            ctx.store.homes.unsubscribe(sub_id, sub.key)
            yield from self.replication.copy(
                pb.Records(homes=[ctx.store.homes.gone_record(sub_id)])
            )
        else:
            del ctx.subscriptions[sub_id]  # no alert reaches it from now on
            if ctx.journal is not None:
                ctx.journal.unsubscribed(sub_id, 0, 0.0)
        yield from self._unindexed(sub)
        return pb.UnsubscribeReply()

    def _unindexed(self, sub: Subscription) -> Op:
        """Every entry of the subscription removed (tombstoned, replicated), one request
        per key."""
        by_key: dict[int, list[int]] = {}
        if self.ctx.settings.gossiped:  # a gossiped synopsis may have moved an entry under
            every = [i for i, _ in sub.indexed()]  # any of its query's terms
            for t in sub.terms:
                by_key[term_id(t)] = every
        else:
            for i, key in sub.indexed():
                by_key.setdefault(key, []).append(i)
        for key, alternatives in sorted(by_key.items()):
            request = pb.UnindexRequest(index_id=key, subscription_id=sub.id)
            if alternatives != [0]:
                request.alternatives.extend(alternatives)
            yield from self.at_owner(key, "Unindex", request)

    def authorized(self, sub_id: int, token: str, home_id: int = 0) -> Subscription:
        """The subscription, if its token is right and I serve it (its home, not a replica).
        An unknown id and a wrong token get the same answer, in the same time: a guesser
        learns nothing of which ids exist. `home_id`: its home key, if the client says."""
        ctx = self.ctx
        if ctx.stopping:  # (leaving, it may have handed the subscription on already)
            raise EngineError("UNAVAILABLE", LEAVING)
        sub = ctx.subscriptions.get(sub_id)
        kept = sub.token_hash if sub is not None else NO_TOKEN
        if not hmac.compare_digest(kept, token_hash(token)) or sub is None:
            logs = self.logs
            if logs is not None and (logs.taking_over() or logs.claim(home_id)):
                raise EngineError("UNAVAILABLE", TAKING_OVER)  # it may be in one of them
            if logs is not None and home_id and not ctx.serves(home_id):
                raise EngineError(
                    "UNAVAILABLE", f"home key {home_id:016x} is served by another node now"
                )
            raise EngineError(
                "NOT_FOUND", f"no subscription {sub_id:016x} with this token at {ctx.me.address}"
            )
        return self.served(sub)

    def served(self, sub: Subscription) -> Subscription:
        """The subscription, if I serve it now (its home key's, and its log has a
        majority); else UNAVAILABLE: the client looks its home key up."""
        ctx = self.ctx
        if ctx.stopping:
            raise EngineError("UNAVAILABLE", LEAVING)
        if self.logs is not None and self.logs.in_minority(sub.key):
            raise EngineError("UNAVAILABLE", MINORITY)
        if sub.key and not ctx.serves(sub.key):
            raise EngineError(
                "UNAVAILABLE",
                f"subscription {sub.id:016x} is served by another node now: look up its home "
                f"key {sub.key:016x}",
            )
        return sub

    def at_owner(self, key: int, method: str, request: pb.IndexRequest | pb.UnindexRequest) -> Op:
        """Send an index change to the key's owner, looking again while ownership moves."""
        for _ in range(limits.PLACE_ATTEMPTS):
            owner, _ = yield from self.ctx.chord.lookup(key, verify=True)
            try:
                reply = yield Call(owner, method, request)
            except PeerUnreachable:
                continue
            if reply.owner:
                return owner
        raise EngineError("UNAVAILABLE", MOVING)

    def at_owners(self, entries: list[pb.QueryEntry]) -> Op:
        """Place entries at the owners of their index ids, one Index message per owner (per
        MAX_BATCH_QUERIES entries: a batch's queries may have many alternatives each),
        looking again for those whose owner did not own their key (or did not answer);
        the subscriptions of those still not placed after PLACE_ATTEMPTS rounds."""
        left = entries
        most = limits.MAX_BATCH_QUERIES
        for _ in range(limits.PLACE_ATTEMPTS):
            if not left:
                break
            moved: list[pb.QueryEntry] = []
            groups = yield from self._by_owner(left)
            for owner, whole in groups.items():
                for group in (whole[i : i + most] for i in range(0, len(whole), most)):
                    try:
                        reply = yield Call(owner, "Index", pb.IndexRequest(entries=group))
                    except PeerUnreachable:
                        moved += group
                        continue
                    if reply.moved:
                        again = set(reply.moved)
                        moved += [e for e in group if e.subscription_id in again]
            left = moved
        return [e.subscription_id for e in left]

    def _by_owner(self, entries: list[pb.QueryEntry]) -> Op:
        """Entries grouped by the owner of their index ids, with a lookup per owner, not per
        key: the owner of the lowest key not yet grouped owns every key from it up to its
        own id, as no node lies between a key and its owner."""
        ordered = sorted(entries, key=lambda e: e.index_id)
        ids = [e.index_id for e in ordered]
        groups: dict[NodeRef, list[pb.QueryEntry]] = {}
        i = 0
        while i < len(ordered):
            owner, _ = yield from self.ctx.chord.lookup(ids[i], verify=True)
            # an owner whose id is below the key owns past zero: every key left is its own
            j = bisect_right(ids, owner.id, i) if owner.id >= ids[i] else len(ids)
            groups.setdefault(owner, []).extend(ordered[i:j])
            i = j
        return groups

    # ---- at the owner of an index term ---------------------------------------------------

    def on_index(self, req: pb.IndexRequest) -> pb.IndexReply | Op:
        if not self.filters.lease:
            return self._index(req)
        owns = self.ctx.chord.table.owns
        keys = {e.index_id for e in (req.entries or [req.entry]) if owns(e.index_id)}
        if not self.filters.hold(keys):
            return self._index(req)
        return self._settled(self._index(req), keys)

    def _settled(self, placed: pb.IndexReply | Op, keys: set[int]) -> Op:
        """The reply once entries under keys new here may be acknowledged."""
        reply = (yield from placed) if isgenerator(placed) else placed
        yield from self.filters.settle(keys)
        return reply

    def _index(self, req: pb.IndexRequest) -> pb.IndexReply | Op:
        if req.entries:
            return self._index_many(req.entries)
        e, ctx = req.entry, self.ctx
        if not ctx.chord.table.owns(e.index_id):
            return pb.IndexReply(owner=False)
        if ctx.replicated:
            return self._placed([pb.EntryRecord(key=e.index_id, entry=e)])
        ctx.index.replace(e.index_id, e)
        return pb.IndexReply(owner=True)

    def _index_many(self, entries: Sequence[pb.QueryEntry]) -> pb.IndexReply | Op:
        """A batch's entries: those under my keys placed (replicated: copied to my replicas
        in one message), the subscriptions of the others named in the reply."""
        ctx = self.ctx
        owns = ctx.chord.table.owns
        mine = [e for e in entries if owns(e.index_id)]
        moved = [e.subscription_id for e in entries if not owns(e.index_id)]
        if ctx.replicated and mine:
            return self._placed([pb.EntryRecord(key=e.index_id, entry=e) for e in mine], moved)
        for e in mine:
            ctx.index.replace(e.index_id, e)
        return pb.IndexReply(owner=not moved, moved=moved)

    def on_unindex(self, req: pb.UnindexRequest) -> pb.IndexReply | Op:
        ctx = self.ctx
        if not ctx.chord.table.owns(req.index_id):
            return pb.IndexReply(owner=False)
        slots = [slot(req.subscription_id, i) for i in req.alternatives or [0]]
        if ctx.replicated:  # tombstones that beat every version of the entries
            when = ctx.host.clock()  # a stamp for older nodes; their age starts at 0
            return self._placed(
                [
                    pb.EntryRecord(
                        key=req.index_id,
                        entry=pb.QueryEntry(subscription_id=s, version=limits.DELETED_FOREVER),
                        deleted=when,
                    )
                    for s in slots
                ]
            )
        for s in slots:
            if ctx.index.holds(req.index_id, s):
                ctx.index.remove(req.index_id, partial(_in_slot, s))
        return pb.IndexReply(owner=True)

    def _placed(self, records: list[pb.EntryRecord], moved: Sequence[int] = ()) -> Op:
        """An owner's changes to its entries, copied to its replicas before they are
        acknowledged (`moved`: of a batch, the subscriptions of entries not mine)."""
        for r in records:
            self.ctx.store.entries.put_entry(r.key, r.entry, self.ctx.store.ages.made(r))
        done = yield from self.replication.copy(pb.Records(entries=records))
        return pb.IndexReply(owner=not moved, replicas=done, moved=moved)


def _in_slot(slot: int, entry: pb.QueryEntry) -> bool:
    """Is the entry of this slot (the entries under a key an unindexing removes)?"""
    return entry_slot(entry) == slot
