"""The engine node: query indexing, announcement, resolution and alerts, free of I/O.

`EngineNode` rides on a ChordNode: it answers the Engine service's requests from local
state (`handle`) and does everything that talks to other nodes as operations (generators
of Calls, like the ring's own) run by whichever shell hosts it. A request whose handling
needs more messages (an announcement to forward, matches to deliver) hands an operation to
`spawn`, which the simulator queues and a live node runs as a task.

The unit of work is a batch of documents published through one node, their DN (a batch of
one is the paper's protocol). The DN stores them for resolution and announces each as one
run of ids (cqengine.core.announce); every hop splits the runs by next hop and sends one
announcement per next hop for the whole batch. A QN that holds runs of the batch takes
the queries indexed under its ids, prunes them and resolves the rest with the DN
(`resolve_together`), one request per round for the batch, and reports its matches in one
message; for each report the DN sends every subscriber home node one batch of alerts. A
home node puts each (subscription, docno) on its stream once.

An optional observer (cqengine.core.observer) is told what happens at named points; nothing
here depends on it.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from inspect import isgenerator
from itertools import chain, groupby
from typing import Any, Callable, Generator, Sequence

import mmh3
import numpy as np

from chord.ids import in_open_closed
from chord.node import Call, ChordNode, Op, PeerUnreachable, Refused
from chord.proto import chord_pb2 as chord_pb
from chord.routing import NodeRef
from cqengine.core import checks
from cqengine.core.announce import (
    Announced,
    Knowledge,
    Run,
    announced,
    announcement,
    knowledge,
    route_runs,
)
from cqengine.core.bloom import BloomFilter
from cqengine.core.homes import Subscription, home_record, token_hash
from cqengine.core.indexing import chooser
from cqengine.core.journal import AlertDoc, Journal
from cqengine.core.observer import Observer
from cqengine.core.postings import InvertedIndex, member
from cqengine.core.replication import DELETED_FOREVER, RecordStore, in_range
from cqengine.core.resolution import FEW, Resolver, pack_bits, unpack_many
from cqengine.core.settings import Settings
from cqengine.core.synopsis import Synopsis
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze, term_id

log = logging.getLogger("cqengine.core.engine")

ENGINE_SERVICE = pb.DESCRIPTOR.services_by_name["Engine"]
MAX_QUERY_TERMS = checks.MAX_QUERY_TERMS
MAX_DOCNO = checks.MAX_DOCNO
SNIPPET = 200
HOP_LIMIT = checks.HOP_LIMIT  # an announcement past this many hops is processed where it is
PLACE_ATTEMPTS = 5  # lookups to place or remove a query while ownership moves
DOC_CACHE = 20_000  # documents a DN keeps for resolution
# Why alerts are lost, counted apart (Stats.dropped_by): nothing is lost silently.
DROP_REASONS = {
    "document_gone": "the DN no longer held the document (evicted from its cache)",
    "dn_failed": "a QN could not resolve with the DN or report to it (unreachable, bad answer)",
    "home_unreachable": "the DN could not reach the subscriber's home node",
    "mailbox_full": "a subscriber's mailbox overflowed and dropped its oldest alert",
    "reports_missing": "documents (not alerts) of a batch delivered without the reports of "
    "nodes that failed under each of its announcements: their alerts are lost",
}
ANNOUNCE_AGAIN = 3  # times a DN announces a batch again while reports are missing
STALE_AFTER = 5  # reconcile periods after which a copy of a batch its owner no longer has goes
RETRY_FIRST = 0.25  # s before an alert batch is tried again (then twice as long each time)
GC_AFTER = 30.0  # s a replica keeps records no owner has reconciled with it (at least)
LEAVING = "this node is stopping; send it to another node of the ring"
WHOLE = checks.WHOLE  # a batch's share, divided along its announcement tree
PEERS = 4096  # node references kept by address (peer_at)


NO_TOKEN = bytes(32)  # compared with when no subscription has the id: no token hashes to it


class EngineError(Exception):
    """A request the engine refuses; `code` names the gRPC status it maps to."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Document:
    """A document ready to publish: its docno, its analyzed terms (and their ids, if known
    already), and what its alerts carry."""

    docno: str
    terms: Sequence[str]
    title: str = ""
    snippet: str = ""
    ids: frozenset[int] | None = None


def prepare(docno: str, text: bytes, title: str, limit: int) -> Document:
    """A document fit to publish, analyzed; EngineError says why one is not. Pure: a live
    node runs it off its event loop."""
    size = len(text) + len(title.encode("utf-8"))
    if size > limit:
        raise EngineError(
            "INVALID_ARGUMENT", f"document {docno} has {size} bytes; the limit is {limit}"
        )
    try:
        body = text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EngineError(
            "INVALID_ARGUMENT", f"document {docno} is not UTF-8 (bad byte at offset {e.start})"
        ) from None
    terms = analyze(f"{title}\n{body}")
    return Document(docno, terms, title, snippet(body), frozenset(map(term_id, terms)))


def snippet(body: str) -> str:
    """The body's first SNIPPET characters, its whitespace runs made single spaces. Only a
    prefix of the body is normalized: a normalized prefix is a prefix of the normalized whole."""
    size = 2 * SNIPPET
    while True:
        out = " ".join(body[:size].split())
        if len(out) >= SNIPPET or size >= len(body):
            return out[:SNIPPET]
        size *= 4


@dataclass
class PublishedDoc:
    """A document its DN holds for resolution: what Term Dialogue and filters ask of it,
    and what its alerts carry."""

    key: int
    docno: str
    title: str
    snippet: str
    ids: frozenset[int]
    _bloom: bytes | None = None
    _sorted: np.ndarray | None = None

    @property
    def alert(self) -> AlertDoc:
        return self.docno, self.title, self.snippet

    def bloom(self, bits: int, hashes: int) -> bytes:
        if self._bloom is None:
            self._bloom = BloomFilter.of(self.ids, bits, hashes).to_bytes()
        return self._bloom

    def holds(self, ids) -> Sequence[bool]:
        """Which of these ids the document has (Term Dialogue's answer)."""
        if len(ids) <= FEW:
            return [y in self.ids for y in ids]
        if self._sorted is None:
            self._sorted = np.array(sorted(self.ids), dtype=np.uint64)
        return member(np.array(ids, dtype=np.uint64), self._sorted)


@dataclass
class Heard:
    """An announcement as a QN holds it: its DN and, for each of its documents with runs
    in the QN's region, those runs."""

    dn: NodeRef
    docs: list[Announced]
    batch: int = 0  # the DN's name of the batch, and the share its report brings back
    share: int = 0  # (0: the DN counts no reports, the paper's protocol)


# a DN's alerts: (home address, home key) -> document key -> the document, its subscriptions
Alerts = dict[tuple[str, int], dict[int, tuple[PublishedDoc, list[int]]]]


@dataclass
class Gathering:
    """A DN's batch whose reports are still coming: the share of the batch they brought back
    (all of it: every node the batch reached has reported), and their alerts so far; the
    batch as announced, and how many times it was announced again."""

    batch: list[Announced]
    again: int = 0
    got: int = 0
    alerts: Alerts = field(default_factory=dict)


def _mine(ids: np.ndarray | list[int]) -> tuple[list[int], list[None]]:
    """Every id processed here: an announcement past the hop limit."""
    return [0] * len(ids), [None]


@lru_cache(maxsize=PEERS)
def peer_at(address: str) -> NodeRef:
    """The node at an address, its id unknown (0): one object per address for every node
    of a process (a simulated ring's thousand send alert batches to the same homes)."""
    return NodeRef(0, address)


@lru_cache(maxsize=64)  # every QN of a document hears the same filter
def received_filter(bits: int, hashes: int, data: bytes) -> BloomFilter:
    """A document's filter as a QN received it; shared, so never added to."""
    return BloomFilter(bits, hashes, data)


def alert_batch(docs: Sequence[tuple[AlertDoc, list[int]]]) -> pb.AlertBatch:
    """The alerts of these documents, each with its subscriptions: a DN's for one home node,
    or a home node's on a stream."""
    batch = pb.AlertBatch(docnos=[doc[0] for doc, _ in docs])
    if any(doc[1] for doc, _ in docs):
        batch.titles.extend(doc[1] for doc, _ in docs)
    if any(doc[2] for doc, _ in docs):
        batch.snippets.extend(doc[2] for doc, _ in docs)
    for _, subs in docs:
        batch.subscription_ids.extend(subs)
    if len(docs) > 1:
        batch.counts.extend(len(subs) for _, subs in docs)
    return batch


def per_document(counts, total: int, documents: int, what: str) -> list[int]:
    """How many of `total` items each of `documents` documents has: `counts`, or all of
    them for a batch of one (which sends no counts)."""
    got = list(counts) if counts else ([total] if documents == 1 else [])
    if len(got) != documents or sum(got) != total:
        raise EngineError(
            "INVALID_ARGUMENT", f"{total} {what} do not split as {got} over {documents} documents"
        )
    return got


class EngineNode:
    services = [ENGINE_SERVICE]

    def __init__(
        self,
        chord: ChordNode,
        settings: Settings,
        spawn: Callable[[Op], None],
        now: Callable[[], float] = time.monotonic,
        observer: Observer | None = None,
        gather: Callable[["EngineNode", Heard], None] | None = None,
        later: Callable[[float, Callable[[], None]], None] | None = None,
        hold: float = 0.0,
        ids: Callable[[], int] | None = None,
        journal: Journal | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`gather`: where a shell that hosts many QNs (the simulator) collects what they
        heard, to resolve it together once an announcement has run its course
        (resolve_together); None: each announcement is resolved as it is heard.
        `later(seconds, fn)`: a shell's timer. `hold`: seconds at most a DN holds the
        matches reported for a batch of its own while reports are still to come; it
        delivers them, one alert batch per home node, when every node the batch reached has
        reported (0: each report's at once, the paper's protocol); and how long it keeps
        trying a home it cannot reach. `ids`: where subscription
        ids and document keys come from (None: `secrets`, so that nobody guesses them and a
        node restarted at its old address never hands one out again; the simulator's are
        seeded, for runs that repeat). `journal`: told every change of what must outlive
        the process (cqengine.core.journal); None: nothing is kept. `clock`: wall time,
        which tombstones carry (cqengine.core.replication)."""
        self.chord = chord
        self.settings = settings
        self.spawn = spawn
        self.observer = observer
        self.gather = gather
        self.later, self.hold = later, hold
        self.gathering: dict[int, Gathering] = {}  # my batches whose reports are still coming
        # (home, alert batch, s waited, the batch of mine it is of): alerts to try again
        self.retrying: list[tuple[str, pb.AlertBatch, float, int | None]] = []
        self.unsent: dict[int, int] = {}  # a batch of mine -> its deliveries not yet ended
        df = settings.df
        self.index = InvertedIndex((lambda y, t: df.get(t, 0)) if df is not None else None)
        self.subscriptions: dict[int, Subscription] = {}
        # inverted lists (and, replicated, home records and held documents) follow key ownership
        self.store = RecordStore(self.index, self.subscriptions, settings.replicas, clock)
        chord.store = self.store
        chord.items_problem = lambda items: checks.items_problem(self, items)
        self.confirmed: dict[
            tuple[int, int], float
        ] = {}  # a range an owner reconciled with me: when
        self.in_sync: dict[NodeRef, bool] = {}  # replica -> did the last reconciliation end agreed
        self.replicas_were: list[NodeRef] = []  # my replica set when I last looked
        self.started = now()
        self.born = clock()  # wall time: a batch of mine made before is of an earlier life
        self.homes_at: OrderedDict[int, str] = OrderedDict()  # home key -> where it was found
        self.own: dict[int, list[NodeRef]] = {}  # my unresolved batches -> their copies
        self.reconciling = False
        self.stopping = False  # the node stops: it takes on no new work
        chord.region_listeners.append(self._region_changed)
        chord.successor_listeners.append(self._successors_changed)
        self.region_listeners: list[Callable[[], None]] = []  # told my region changed
        self.synopsis = Synopsis(settings.synopsis_k, settings.synopsis_y, settings.synopsis_hashes)
        self.gossiped_to: dict[
            NodeRef, int
        ] = {}  # neighbour -> synopsis clock it was last gossiped
        self.indexed_with: frozenset[int] = (
            frozenset()
        )  # the popular set entries were last placed by
        self.retiring: list[
            tuple[float, int, pb.QueryEntry]
        ] = []  # (until, old key, entry) after a move
        self.now = now
        fixed = settings.popular_ids
        self.choose = chooser(
            settings.strategy,
            settings.seed,
            settings.df,
            (lambda: fixed) if fixed is not None else self.synopsis.popular,
        )
        self.new_id = ids if ids is not None else (lambda: secrets.randbits(64))
        self.journal = journal
        self.docs: OrderedDict[int, PublishedDoc] = OrderedDict()
        self.counters: Counter[str] = Counter()
        self.alert_listeners: list[
            Callable[[list[int]], None]
        ] = []  # told the subscriptions alerted
        self.handlers = {
            "GetConfig": lambda req: self.settings.to_pb(),
            "Index": self._on_index,
            "Unindex": self._on_unindex,
            "Announce": self._on_announce,
            "GetBloom": self._on_get_bloom,
            "TermDialogue": self._on_term_dialogue,
            "Matched": self._on_matched,
            "Deliver": self._on_deliver,
            "Gossip": self._on_gossip,
            "Replicate": self._on_replicate,
            "Reconcile": self._on_reconcile,
            "Repair": self._on_repair,
            "Release": self._on_release,
        }

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n
        if self.observer is not None:
            self.observer.on_count(self, name, n)

    @property
    def me(self) -> NodeRef:
        return self.chord.me

    def handle(self, method: str, request):
        handler = self.handlers.get(method)
        if handler is None:
            return self.chord.handle(method, request)
        why = checks.invalid(self, method, request)
        if why is not None:
            self.count("messages_refused")
            raise Refused(f"{method}: {why}")
        return handler(request)

    def peer(self, address: str) -> NodeRef:
        me = self.me
        return me if address == me.address else peer_at(address)

    @property
    def journal(self) -> Journal | None:
        return self._journal

    @journal.setter
    def journal(self, journal: Journal | None) -> None:
        """Whatever changes what must outlive the process tells this journal."""
        self._journal = self.index.journal = self.store.journal = journal

    @property
    def replicated(self) -> bool:
        return self.settings.replicas > 1

    def replica_set(self) -> list[NodeRef]:
        """The nodes that hold copies of what I own: my next R-1 successors."""
        return [s for s in self.chord.table.successors if s != self.me][
            : self.settings.replicas - 1
        ]

    def serves(self, key: int) -> bool:
        """Do I serve this home key now: do I own it, knowing my region, and has what the
        ring held for my region while I was away come back to me?"""
        t = self.chord.table
        if t.alone():
            return True
        if not self.chord.settled:
            return False
        if t.predecessor is None:  # my own key is mine whatever came before it
            return key == t.me.id
        return in_open_closed(key, t.predecessor.id, t.me.id)

    # ---- subscribing -------------------------------------------------------------------

    def subscribe(self, text: str) -> Op:
        size = len(text.encode("utf-8"))
        if size > self.settings.max_query_bytes:  # before the work of analyzing it
            raise EngineError(
                "INVALID_ARGUMENT",
                f"the query has {size} bytes; the limit is {self.settings.max_query_bytes}",
            )
        return (yield from self.subscribe_terms(analyze(text)))

    def subscribe_terms(self, terms: list[str]) -> Op:
        """Subscribe a query already analyzed (by `analyze`, here or in a Spark job)."""
        if self.stopping:
            raise EngineError("UNAVAILABLE", LEAVING)
        if not terms:
            raise EngineError(
                "INVALID_ARGUMENT",
                "the query has no terms left after stop-word removal and stemming",
            )
        if len(terms) > MAX_QUERY_TERMS:
            raise EngineError(
                "INVALID_ARGUMENT",
                f"the query has {len(terms)} terms; at most {MAX_QUERY_TERMS} are allowed",
            )
        pairs = sorted((term_id(t), t) for t in terms)
        sub_id = self.new_id()
        while sub_id in self.subscriptions:  # never two alike here (64 random bits: never)
            sub_id = self.new_id()
        x, index_term = pairs[self.choose(pairs, sub_id)]
        key = self.me.id if self.replicated else 0  # its home key: mine
        entry = pb.QueryEntry(
            subscription_id=sub_id,
            term_ids=[p[0] for p in pairs],
            terms=[p[1] for p in pairs],
            index_id=x,
            home=self.me.address,
            home_id=key,
        )
        token = secrets.token_hex(16)
        sub = Subscription(sub_id, token_hash(token), terms, x, index_term, key=key)
        self.subscriptions[sub_id] = sub  # before placing: an alert may come at once
        try:
            yield from self._at_owner(x, "Index", pb.IndexRequest(entry=entry))
        except BaseException:
            del self.subscriptions[sub_id]
            raise
        if self.replicated:  # the home's replicas take over if it fails
            yield from self._copy(pb.Records(homes=[home_record(sub)]))
        if self.journal is not None:  # placed: from now on it must outlive the process
            self.journal.subscribed(sub)
        return pb.SubscribeReply(
            subscription_id=sub_id,
            token=token,
            terms=terms,
            index_term=index_term,
            home=self.me.address,
            home_id=key,
            contacts=[s.address for s in self.chord.table.successors if s != self.me],
        )

    def unsubscribe(self, sub_id: int, token: str) -> Op:
        sub = self.authorized(sub_id, token)
        if self.replicated:  # a tombstone, for the replicas too
            self.store.unsubscribe(sub_id, sub.key)
            yield from self._copy(
                pb.Records(
                    homes=[
                        pb.HomeRecord(
                            key=sub.key, subscription_id=sub_id, deleted=self.store.gone[sub_id][1]
                        )
                    ]
                )
            )
        else:
            del self.subscriptions[sub_id]  # no alert reaches it from now on
            if self.journal is not None:
                self.journal.unsubscribed(sub_id, 0, 0.0)
        # a gossiped synopsis may have moved the entry under any of the query's terms
        keys = sorted({term_id(t) for t in sub.terms}) if self.settings.gossiped else [sub.index_id]
        for key in keys:
            yield from self._at_owner(
                key, "Unindex", pb.UnindexRequest(index_id=key, subscription_id=sub_id)
            )
        return pb.UnsubscribeReply()

    def authorized(self, sub_id: int, token: str) -> Subscription:
        """The subscription, if its token is right and I serve it (its home, not a replica).
        An unknown id and a wrong token get the same answer, in the same time: a guesser
        learns nothing of which ids exist."""
        sub = self.subscriptions.get(sub_id)
        kept = sub.token_hash if sub is not None else NO_TOKEN
        if not hmac.compare_digest(kept, token_hash(token)) or sub is None:
            raise EngineError(
                "NOT_FOUND", f"no subscription {sub_id:016x} with this token at {self.me.address}"
            )
        if sub.key and not self.serves(sub.key):
            raise EngineError(
                "UNAVAILABLE",
                f"subscription {sub_id:016x} is served by another node now: look up its home "
                f"key {sub.key:016x}",
            )
        return sub

    def _at_owner(self, key: int, method: str, request) -> Op:
        """Send an index change to the key's owner, looking again while ownership moves."""
        for _ in range(PLACE_ATTEMPTS):
            owner, _ = yield from self.chord.lookup(key, verify=True)
            try:
                reply = yield Call(owner, method, request)
            except PeerUnreachable:
                continue
            if reply.owner:
                return owner
        raise EngineError("UNAVAILABLE", "the ring's ownership kept changing; try again")

    def _on_index(self, req: pb.IndexRequest) -> pb.IndexReply | Op:
        e = req.entry
        if not self.chord.table.owns(e.index_id):
            return pb.IndexReply(owner=False)
        if self.replicated:
            return self._placed(pb.EntryRecord(key=e.index_id, entry=e))
        self.index.replace(e.index_id, e)
        return pb.IndexReply(owner=True)

    def _on_unindex(self, req: pb.UnindexRequest) -> pb.IndexReply | Op:
        if not self.chord.table.owns(req.index_id):
            return pb.IndexReply(owner=False)
        if self.replicated:  # a tombstone that beats every version of the entry
            gone = pb.QueryEntry(subscription_id=req.subscription_id, version=DELETED_FOREVER)
            return self._placed(
                pb.EntryRecord(key=req.index_id, entry=gone, deleted=self.store.clock())
            )
        if self.index.holds(req.index_id, req.subscription_id):
            self.index.remove(req.index_id, lambda e: e.subscription_id == req.subscription_id)
        return pb.IndexReply(owner=True)

    def _placed(self, record: pb.EntryRecord) -> Op:
        """An owner's change to its entries, copied to its replicas before it is acknowledged."""
        self.store.put_entry(record.key, record.entry, record.deleted)
        done = yield from self._copy(pb.Records(entries=[record]))
        return pb.IndexReply(owner=True, replicas=done)

    # ---- publishing and announcing -----------------------------------------------------

    def publish(self, docno: str, text: bytes, title: str = "") -> Op:
        """Analyze and publish one document, a batch of one; EngineError if refused."""
        doc = prepare(docno, text, title, self.settings.max_document_bytes)
        return (yield from self.publish_terms(doc.docno, doc.terms, doc.title, doc.snippet))

    def publish_terms(
        self, docno: str, terms: Sequence[str], title: str = "", snippet: str = ""
    ) -> Op:
        """Publish one document already analyzed (by `analyze`, here or in a Spark job)."""
        (reply,) = yield from self.publish_batch([Document(docno, terms, title, snippet)])
        if isinstance(reply, EngineError):
            raise reply
        return reply

    def publish_batch(self, docs: Sequence[Document]) -> Op:
        """Store every document of the batch fit to publish (replicated: and copy them to my
        successor, which finishes the batch if I fail), and have them announced together
        (an operation handed to `spawn`). Per document, its PublishReply or the EngineError
        that refused it: a document is accepted once its DN holds it (and a replica)."""
        if self.stopping:
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
        if (yield from self._send_out([doc for doc in stored if doc.ids])):
            return out
        refused = EngineError("UNAVAILABLE", "no successor took a copy of the document; try again")
        for doc in stored:
            self.docs.pop(doc.key, None)
        return [refused if isinstance(r, pb.PublishReply) else r for r in out]

    def _send_out(self, stored: list[PublishedDoc]) -> Op:
        """Announce documents I hold as one batch of mine; replicated, once my successor
        holds a copy (False: no successor took one)."""
        if not stored:
            return True
        name = stored[0].key
        if self.replicated:
            held = pb.HeldBatch(key=self.me.id, batch=name, dn=self.me.address)
            for doc in stored:
                held.documents.add(
                    key=doc.key,
                    docno=doc.docno,
                    title=doc.title,
                    snippet=doc.snippet,
                    ids=sorted(doc.ids),
                )
            took = yield from self._hold(held)
            if not took and not self.chord.table.alone():
                return False
            self.store.hold(held)  # a leave hands it over with the rest
            self.own[name] = took
        batch = [Announced(doc.key, max(doc.ids), [Run.whole(sorted(doc.ids))]) for doc in stored]
        share = 0
        if self.hold > 0 and self.later is not None:  # count the reports of the batch
            share = WHOLE
            self._gather(name, batch)
        self.spawn(self._announce(self.me, batch, 0, name if share else 0, share))
        return True

    def _gather(self, name: int, batch: list[Announced], again: int = 0) -> None:
        self.gathering[name] = Gathering(batch, again)
        self.later(self.hold, lambda: self._hold_over(name))

    def _hold_over(self, name: int) -> None:
        """The hold of my batch is over. If reports are missing (a node it reached failed
        before it reported), replicated, I announce it again: the queries of the failed
        node are on its replicas, and homes take each alert once. Else, or after
        ANNOUNCE_AGAIN times (nodes failing one after another under it), I deliver what
        came, and count its documents as delivered with reports missing."""
        g = self.gathering.get(name)
        if g is None:
            return
        if g.got >= WHOLE or g.again >= ANNOUNCE_AGAIN or not self.replicated:
            if g.got < WHOLE and self.replicated:
                self.count("dropped:reports_missing", len(g.batch))
            self._deliver_gathered(name)
            return
        del self.gathering[name]
        if g.alerts:
            self.spawn(self._deliver(g.alerts))
        self.count("batches_announced_again")
        log.warning(
            "batch %016x: reports missing after %.0fs; announcing it again", name, self.hold
        )
        self._gather(name, g.batch, again=g.again + 1)
        self.spawn(self._announce(self.me, g.batch, 0, name, WHOLE))

    def _hold(self, held: pb.HeldBatch) -> Op:
        """Copies of my batch to my replicas (the successors after them, for those that do
        not answer): which took one."""
        took = []
        for peer in list(self.chord.table.successors):
            if peer == self.me or len(took) == self.settings.replicas - 1:
                break
            try:
                yield Call(peer, "Replicate", pb.Records(batches=[held]))
                took.append(peer)
            except PeerUnreachable:
                self.chord.forget(peer)
        return took

    def _release(self, batch: int) -> None:
        """My batch is resolved: its copies are needed no more."""
        self.store.release(batch)
        # and my replicas now: a node that joined before them since was handed a copy
        for peer in dict.fromkeys([*self.own.pop(batch, ()), *self.replica_set()]):
            self.spawn(self._tell(peer, "Release", pb.ReleaseRequest(batch=batch)))

    def _tell(self, peer: NodeRef, method: str, request) -> Op:
        try:
            yield Call(peer, method, request)
        except PeerUnreachable:
            pass  # a copy left behind goes with the oldest (RecordStore.hold)

    def _take_over(self) -> Op:
        """Batches held for DNs whose key is mine now: their DN failed or left (a live DN
        owns its own key) before it finished them, or was I, before I restarted (its copies
        came back to me with my region). I announce them again as their DN (homes take
        each alert once: those already sent are not repeated), and the other copies go."""
        region = self.region()
        if region is None:
            return
        for held in list(self.store.held.values()):
            if not in_range(held.key, *region) or held.batch in self.own:
                continue
            if held.key == self.me.id and self.store.held_since[held.batch] >= self.born:
                # mine, made since I started, and resolved: a copy whose release missed
                # its holder came back to me with my region
                self._release(held.batch)
                self.count("stale_copies_released")
                continue
            self.store.release(held.batch)
            for peer in self.replica_set():
                self.spawn(self._tell(peer, "Release", pb.ReleaseRequest(batch=held.batch)))
            stored = [self._keep(d) for d in held.documents]
            self.count("documents_taken_over", len(stored))
            log.warning(
                "taking over batch %016x of %s (%d documents): its DN is gone",
                held.batch,
                held.dn,
                len(stored),
            )
            yield from self._send_out(stored)

    def _keep(self, d: pb.HeldDocument) -> PublishedDoc:
        """A document held for a DN, kept so that I answer for it as the DN would."""
        doc = self.docs.get(d.key)
        if doc is None:
            doc = self.docs[d.key] = PublishedDoc(
                d.key, d.docno, d.title, d.snippet, frozenset(d.ids)
            )
            while len(self.docs) > DOC_CACHE:
                self.docs.popitem(last=False)
        return doc

    def _store(self, doc: Document) -> PublishedDoc:
        """Keep the document for resolution (the DN answers for it) and count it in the synopsis."""
        docno = doc.docno.strip()
        if not docno or len(docno) > MAX_DOCNO:
            raise EngineError(
                "INVALID_ARGUMENT", f"a document needs a docno of 1-{MAX_DOCNO} characters"
            )
        ids = doc.ids if doc.ids is not None else frozenset(map(term_id, doc.terms))
        kept = PublishedDoc(self.new_id(), docno, doc.title, doc.snippet, ids)
        self.docs[kept.key] = kept
        if self.settings.gossiped:
            self.synopsis.add_document(
                docno, kept.ids
            )  # the DN stores, so counts, what it announces
        while len(self.docs) > DOC_CACHE:
            self.docs.popitem(last=False)
        self.count("documents_published")
        if self.observer is not None:
            self.observer.on_published(self, kept)
        return kept

    def _on_announce(self, msg: pb.Announcement) -> pb.AnnounceReply:
        try:
            docs = announced(msg)
        except ValueError as e:
            raise EngineError("INVALID_ARGUMENT", str(e)) from None
        if msg.share and self._idle(docs, msg.hops):  # its share goes back with the reply,
            return pb.AnnounceReply(share=msg.share)  # not in a report of nothing
        dn = NodeRef(msg.dn_id, msg.dn) if msg.dn_id else self.peer(msg.dn)
        self.spawn(self._announce(dn, docs, msg.hops, msg.batch, msg.share, msg.owner))
        return pb.AnnounceReply()

    def _all_mine(self, todo: list[tuple[int, Run]]) -> bool:
        """Does my table say every id of these runs is mine?"""
        ids = np.unique(np.fromiter((y for _, run in todo for y in run.ids), np.uint64))
        places, routes = self.chord.table.routes(ids)
        return all(routes[p] is None for p in np.unique(places).tolist())

    def _idle(self, docs: list[Announced], hops: int) -> bool:
        """Would this announcement stop here (every id mine) and find no query (no list
        under any id)? Then this node has nothing to pass on, resolve or report."""
        if hops >= HOP_LIMIT:
            return False
        ids = np.unique(np.fromiter((y for d in docs for r in d.runs for y in r.ids), np.uint64))
        places, routes = self.chord.table.routes(ids)
        if any(routes[p] is not None for p in np.unique(places).tolist()):
            return False
        return not self.index.lists(ids)

    def _announce(
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
        k = self.settings.piggyback
        kept = share
        local: dict[int, list[Run]] = {}  # place in the batch -> my runs of that document
        todo = [(i, run) for i, doc in enumerate(docs) for run in doc.runs]
        router = self.chord.table.routes if hops < HOP_LIMIT else _mine
        if owner and hops < HOP_LIMIT and not self._all_mine(todo):
            yield from self.chord.check_predecessor()  # it may be gone
            if self.chord.table.predecessor is None:  # gone: its keys are mine now
                router = _mine
        while todo:
            # each id's next hop by the table as it is now (a failed hop changes it); None: mine
            by_hop = route_runs(todo, router, k)
            router = self.chord.table.routes if hops < HOP_LIMIT else _mine
            for i, runs in by_hop.pop(None, {}).items():
                local.setdefault(i, []).extend(runs)
            todo = []
            part = kept // (len(by_hop) + 1)
            if by_hop and kept and not part:
                # too little left to give every hop some (a routing loop halves it at each
                # hop): a hop given none would work uncounted, and the shares back could
                # make the whole without it. Burnt, the whole is never made: the DN's hold
                # ends and it announces the batch again.
                self.count("shares_burnt")
                kept = 0
            for hop, parts in by_hop.items():
                out = announcement(
                    dn.address,
                    hops + 1,
                    ((docs[i].key, docs[i].max_id, runs) for i, runs in parts.items()),
                )
                if share:
                    out.batch, out.share = batch, part
                if self.replicated:  # where its documents are when the DN is gone,
                    out.dn_id = dn.id  # and whether I know the ids to be the hop's
                    out.owner = all(
                        in_open_closed(y, self.me.id, hop.id)
                        for runs in parts.values()
                        for run in runs
                        for y in run.ids
                    )
                if self.observer is not None:
                    self.observer.on_announce(self, out)
                kept -= part
                try:
                    reply = yield Call(hop, "Announce", out)
                    kept += reply.share  # handed back: nothing there to report
                except PeerUnreachable:
                    # forgotten by the lookup layer: regroup around it; and if it was my
                    # successor, the next one owns its keys once I tell it (at once)
                    todo += [(i, run) for i, runs in parts.items() for run in runs]
                    if hop == self.chord.table.successor:
                        self.spawn(self.chord.stabilize())
                    self.chord.forget(hop)
                    kept += part
        mine = [
            Announced(docs[i].key, docs[i].max_id, runs)
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
        if hops >= HOP_LIMIT and self.replicated:
            # processed where it stopped, maybe not at its ids' owner (tables in flux): the
            # share stays out, so its DN announces the batch again once its hold is over
            kept = 0
        heard = Heard(dn, mine, batch, kept)
        if self.observer is not None:
            self.observer.on_heard(self, heard)
        if self.gather is not None:
            self.gather(self, heard)
        else:
            yield from self.resolve_alone(heard)

    # ---- resolving (QN side) -----------------------------------------------------------

    def region(self) -> tuple[int, int] | None:
        """(predecessor, me]: where Observation 1 holds; None while my predecessor is unknown
        (unless I am alone: then the whole circle)."""
        pred = self.chord.table.predecessor
        if pred is not None:
            return pred.id, self.me.id
        return (self.me.id, self.me.id) if self.chord.table.alone() else None

    def knowledge(self, doc: Announced) -> Knowledge:
        """What my runs of a document tell me of it (Observations 1-2, Algorithm 4)."""
        return knowledge(doc.runs, doc.max_id, self.region(), self.settings.piggyback)

    def resolve_alone(self, heard: Heard) -> Op:
        """Resolve what I heard by myself (a live node's way): resolve_together's calls,
        all mine, made one after another."""
        together = resolve_together([(self, heard)])
        reply: Any = None
        error: PeerUnreachable | None = None
        while True:
            try:
                _, call = together.throw(error) if error is not None else together.send(reply)
            except StopIteration:
                return
            reply, error = None, None
            try:
                reply = yield call
            except PeerUnreachable as e:
                error = e

    # ---- answering resolution (DN side) ------------------------------------------------

    def _on_get_bloom(self, req: pb.BloomRequest) -> pb.BloomReply:
        s = self.settings
        docs = [self.docs.get(key) for key in req.doc_keys]
        return pb.BloomReply(
            found=[doc is not None for doc in docs],
            bits=b"".join(doc.bloom(s.bloom_bits, s.bloom_hashes) for doc in docs if doc),
        )

    def _on_term_dialogue(self, req: pb.DialogueRequest) -> pb.DialogueReply:
        keys, ids = req.doc_keys, req.ids
        counts = per_document(req.counts, len(ids), len(keys), "ids")
        docs = [self.docs.get(key) for key in keys]
        found = [doc is not None for doc in docs]
        if len(docs) == 1:
            doc = docs[0]
            return pb.DialogueReply(
                found=found, present=pack_bits(doc.holds(ids) if doc else [False] * len(ids))
            )
        flags, start = [], 0
        for doc, n in zip(docs, counts):
            part = ids[start : start + n]
            flags.append(
                np.asarray(doc.holds(part), dtype=bool) if doc else np.zeros(n, dtype=bool)
            )
            start += n
        flat = np.concatenate(flags) if flags else np.zeros(0, dtype=bool)
        return pb.DialogueReply(found=found, present=np.packbits(flat, bitorder="little").tobytes())

    def _on_matched(self, req: pb.MatchedRequest) -> pb.Ack:
        """Alerts for the matches a QN reports: at once, or, for a batch of mine whose
        reports I count, when every node it reached has reported."""
        docs = [self.docs.get(key) for key in req.doc_keys]
        by_home: Alerts = {}
        lost = 0
        for m in req.matches:
            if m.doc >= len(docs):
                raise EngineError("INVALID_ARGUMENT", f"a match of document {m.doc} of {len(docs)}")
            doc = docs[m.doc]
            if doc is None:
                lost += 1  # no longer held here: nothing to alert with
                continue
            per_doc = by_home.setdefault((m.home, m.home_id), {})
            per_doc.setdefault(doc.key, (doc, []))[1].append(m.subscription_id)
        if lost:
            self.count("dropped:document_gone", lost)
        gathering = self.gathering.get(req.batch) if req.share else None
        if gathering is None:  # not counted, or given up on: at once
            if by_home:
                self.spawn(self._deliver(by_home))
            return pb.Ack()
        for home, per_doc in by_home.items():
            waiting = gathering.alerts.setdefault(home, {})
            for key, (doc, subs) in per_doc.items():
                waiting.setdefault(key, (doc, []))[1].extend(subs)
        gathering.got += req.share
        if gathering.got >= WHOLE:
            self._deliver_gathered(req.batch)
        return pb.Ack()

    def _deliver_gathered(self, batch: int, done: bool = True) -> None:
        """Every report of a batch is in, or the hold is over (a QN failed or is slow):
        deliver what was gathered; reports that come later are delivered as they come.
        Not `done` (I am stopping): the copies stay, for my successor to finish it."""
        gathering = self.gathering.pop(batch, None)
        if gathering is not None:
            self.spawn(self._deliver(gathering.alerts, batch if done else None))

    def flush(self) -> None:
        """Deliver at once what is held (the node stops): no report's matches stay behind,
        and alerts waiting to be tried again get one last try. Nothing new is taken on."""
        self.stopping = True
        for batch in list(self.gathering):
            self._deliver_gathered(batch, done=False)
        retrying, self.retrying = self.retrying, []
        for home, batch, _, done in retrying:
            self.spawn(self._send_alerts(home, batch, self.hold, done))

    def _deliver(self, alerts: Alerts, done: int | None = None) -> Op:
        """One batch of alerts to each home node: its subscriptions of each document. Then,
        once every home took its alerts (or they were counted lost), my batch `done` needs
        its copies no more (while a home is tried again, they stay: should I fail, my
        successor announces it again)."""
        self._unsent(done, 1)  # until the last home is tried, whatever its retries do
        for (home, key), per_doc in sorted(alerts.items()):
            batch = alert_batch([(doc.alert, subs) for doc, subs in per_doc.values()])
            batch.home_id = key
            yield from self._send_alerts(home, batch, 0.0, done)
        self._unsent(done, -1)

    def _unsent(self, done: int | None, n: int) -> None:
        """Deliveries of my batch `done` begun (n > 0) or ended (n < 0): when none is left,
        its copies go."""
        if done is None:
            return
        left = self.unsent[done] = self.unsent.get(done, 0) + n
        if left <= 0:
            del self.unsent[done]
            self._release(done)

    def _send_alerts(
        self, home: str, batch: pb.AlertBatch, waited: float, done: int | None = None
    ) -> Op:
        """Deliver an alert batch; a home that cannot be reached (restarting, say) is tried
        again, each wait twice the last, for `hold` s in all, and only then are its alerts
        counted lost. A home takes a batch twice harmlessly: a docno enters a mailbox once.
        Replicated, the batch goes to whichever node serves its home key: where it was
        last found, else the key's owner, looked up (a replica took over from the home).
        The delivery of my batch `done` has ended when the home took it or it is lost."""
        key = batch.home_id
        at = self.homes_at.get(key, home) if key else home
        for _ in range(2):
            if at != home and not batch.owner:
                found = pb.AlertBatch()
                found.CopyFrom(batch)
                found.owner, found.home = True, home  # the ring says the key is its now
                batch = found
            try:
                reply = yield Call(self.peer(at), "Deliver", batch)
                if not reply.moved:
                    if key and at != home:
                        self._found_home(key, at)
                    if waited:  # a retry: the delivery ends here
                        self._unsent(done, -1)
                    return
            except PeerUnreachable:
                pass
            if not key:
                break
            owner, _ = yield from self.chord.lookup(key, verify=True)
            if owner.address == at:
                break  # it is there but does not serve the key yet: wait for it
            at = owner.address
        wait = max(waited, RETRY_FIRST)
        if self.later is None or waited + wait > self.hold:
            self.count("dropped:home_unreachable", len(batch.subscription_ids))
            if waited:
                self._unsent(done, -1)
            return
        self.count("alerts_retried", len(batch.subscription_ids))
        if not waited:  # a delivery of the batch goes on after `_deliver` is through
            self._unsent(done, 1)
        retry = (home, batch, waited + wait, done)
        self.retrying.append(retry)
        self.later(wait, lambda: self._retry(retry))

    def _found_home(self, key: int, address: str) -> None:
        self.homes_at[key] = address
        self.homes_at.move_to_end(key)
        while len(self.homes_at) > PEERS:
            self.homes_at.popitem(last=False)

    def _retry(self, retry: tuple[str, pb.AlertBatch, float, int | None]) -> None:
        if retry in self.retrying:  # not already sent by flush
            self.retrying.remove(retry)
            self.spawn(self._send_alerts(*retry))

    # ---- alerts (home side) ------------------------------------------------------------

    def _on_deliver(self, batch: pb.AlertBatch) -> pb.DeliverReply | Op:
        n = len(batch.docnos)
        per_document(batch.counts, len(batch.subscription_ids), n, "subscriptions")  # checked
        if len(batch.titles) not in (0, n) or len(batch.snippets) not in (0, n):
            raise EngineError(
                "INVALID_ARGUMENT",
                f"an alert batch of {n} documents with "
                f"{len(batch.titles)} titles and {len(batch.snippets)} snippets",
            )
        if batch.home_id and not self.serves(batch.home_id):
            if batch.owner and batch.home and self.chord.settled:
                return self._delivered_if_mine(batch)
            return pb.DeliverReply(moved=True)
        return self._delivered(batch)

    def _delivered_if_mine(self, batch: pb.AlertBatch) -> Op:
        """The ring's lookup says the batch's home key is mine, and my predecessor says not.
        If its home is gone for sure (no longer my predecessor, and it refuses connections:
        a home only slow to answer still numbers its alerts, and two numberings would
        clash), the key is mine: my predecessor went with it, and I hold the copies of its
        subscriptions. A live predecessor other than the home (one that joined between
        us) owns the key: taking the alerts here would hide them where no stream looks."""
        pred = self.chord.table.predecessor
        if pred is not None and pred.address == batch.home:
            # it notified me (back from a restart, say) and serves the key; a refusal may be
            # my channel to it still backing off. Gone, my table drops it soon: the DN retries
            return pb.DeliverReply(moved=True)
        others = [] if pred is None else [pred.address]
        for address in [batch.home, *others]:
            try:
                yield Call(self.peer(address), "Ping", chord_pb.Empty())
                return pb.DeliverReply(moved=True)
            except PeerUnreachable as e:
                if not e.refused:
                    return pb.DeliverReply(moved=True)
        if self.chord.table.predecessor != pred:
            # a node came before me while I asked (the home back from a restart, say): it
            # may number the alerts now, with the records I handed it; two numberings clash
            return pb.DeliverReply(moved=True)
        reply = self._delivered(batch)
        if isgenerator(reply):
            reply = yield from reply
        return reply

    def _delivered(self, batch: pb.AlertBatch) -> pb.DeliverReply | Op:
        """The batch's alerts into the mailboxes of the subscriptions I serve (a batch
        checked already)."""
        subs = batch.subscription_ids
        n = len(batch.docnos)
        counts = per_document(batch.counts, len(subs), n, "subscriptions")
        titles, snippets = batch.titles or [""] * n, batch.snippets or [""] * n
        start = 0
        subscriptions = self.subscriptions
        kept: list[tuple[int, int, AlertDoc]] = []  # (subscription, its alert's number, document)
        unknown = False  # a subscription whose record has not reached me yet
        for doc, c in zip(zip(batch.docnos, titles, snippets), counts):
            for sub_id in subs[start : start + c]:
                sub = subscriptions.get(sub_id)  # None: unsubscribed meanwhile, or not here yet
                if sub is not None:
                    if sub.mailbox.offer(doc, self.settings.mailbox_bytes):
                        kept.append((sub_id, sub.mailbox.next - 1, doc))
                elif batch.home_id and sub_id not in self.store.gone:
                    unknown = True
            start += c
        # the DN tries the batch again later (those taken now it finds seen), while
        # reconciliation brings me the records of my region that I lack
        reply = pb.DeliverReply(moved=unknown)
        if kept and self.replicated:
            return self._shown_once_copied(kept, reply)
        self._alerted(kept)
        return reply

    def _shown_once_copied(
        self, kept: list[tuple[int, int, AlertDoc]], reply: pb.DeliverReply
    ) -> Op:
        """New alerts go to the replicas of their homes first, and only then on a stream
        (and into the journal): whichever replica serves next knows every alert numbered."""
        spans: dict[int, list[int]] = {}
        subs = {sub_id: self.subscriptions[sub_id] for sub_id, _, _ in kept}
        for sub_id, seq, _ in kept:
            span = spans.setdefault(sub_id, [seq, seq + 1])
            span[0], span[1] = min(span[0], seq), max(span[1], seq + 1)
            subs[sub_id].mailbox.pending.add(seq)
        records = [home_record(subs[s], lo, hi) for s, (lo, hi) in spans.items()]
        try:
            yield from self._copy(pb.Records(homes=records))
        finally:  # however it ends: alerts held back for good would block their streams
            for sub_id, seq, _ in kept:
                subs[sub_id].mailbox.pending.discard(seq)
            # not those unsubscribed or handed over meanwhile
            self._alerted([a for a in kept if self.subscriptions.get(a[0]) is subs[a[0]]])
        return reply

    def _alerted(self, kept: list[tuple[int, int, AlertDoc]]) -> None:
        if not kept:
            return
        if self.journal is not None:
            self.journal.alerted(kept)
        alerted = [sub_id for sub_id, _, _ in kept]
        self.count("alerts_delivered", len(alerted))
        for listener in self.alert_listeners:
            listener(alerted)

    def acknowledge(self, sub: Subscription, next_seq: int) -> None:
        """The subscriber has every alert of this subscription numbered below next_seq:
        they leave its mailbox (and its replicas' copies)."""
        box = sub.mailbox
        n = min(next_seq, box.shown) - box.first
        if n > 0:
            box.pop(n)
            if self.journal is not None:
                self.journal.acknowledged(sub.id, box.first)
            if self.replicated:
                self.spawn(self._copy(pb.Records(homes=[home_record(sub, start=box.next)])))

    # ---- replication -------------------------------------------------------------------

    def _copy(self, records: pb.Records) -> Op:
        """Records I changed, to every node of my replica set (a replica that does not
        answer is repaired by reconciliation); where each was copied. A replica that lacks
        alerts before those sent (or the subscription) is sent what it lacks."""
        done = []
        for peer in self.replica_set():
            try:
                reply = yield Call(peer, "Replicate", records)
                for sub_id, since in zip(reply.behind, reply.since):
                    sub = self.subscriptions.get(sub_id)
                    if sub is not None:
                        whole = home_record(sub, since or None)
                        yield Call(peer, "Replicate", pb.Records(homes=[whole]))
                done.append(peer.address)
            except PeerUnreachable:
                self.in_sync[peer] = False
        return done

    def _on_replicate(self, records: pb.Records) -> pb.ReplicateReply:
        reply = pb.ReplicateReply()
        for r in records.entries:
            self.store.put_entry(r.key, r.entry, r.deleted)
        for r in records.homes:
            got = self.store.put_home(r, self.serves(r.key))
            lacks_record = not r.deleted and r.subscription_id not in self.subscriptions
            if lacks_record and r.subscription_id not in self.store.gone:
                reply.behind.append(r.subscription_id)
                reply.since.append(0)
            elif got is not True and got is not False:
                reply.behind.append(r.subscription_id)
                reply.since.append(got)
        region = self.region()
        for b in records.batches:
            if self.store.hold(b):
                for d in b.documents:
                    self._keep(d)
                if b.key != self.me.id and region is not None and in_range(b.key, *region):
                    self.spawn(self._take_over())  # its DN has left me its key already
        return reply

    def _on_reconcile(self, req: pb.ReconcileRequest) -> pb.ReconcileReply:
        self.confirmed[(req.lo, req.hi)] = self.now()  # its owner counts on me for this range
        # copies that came after the owner's request was made may be of batches it has not
        # counted yet: only those older than a few periods go
        before = self.store.clock() - STALE_AFTER * self.settings.reconcile_period
        stale = self.store.release_stale(req.lo, req.hi, set(req.batches), before)
        self.count("stale_copies_released", stale)
        return self.store.differing(req)

    def _on_repair(self, records: pb.Records) -> pb.Ack:
        self.count("repairs", self.store.merge(records, self.serves))
        return pb.Ack()

    def _on_release(self, req: pb.ReleaseRequest) -> pb.Ack:
        self.store.release(req.batch)
        return pb.Ack()

    def reconcile(self) -> Op:
        """Reconcile my range with each of my replicas: my digests, their records where
        they differ, mine where they lack them. Then collect what nobody counts on me for."""
        self._collect()
        region = self.region()
        if not self.replicated or region is None or self.chord.table.alone() or self.reconciling:
            return
        self.reconciling = True
        try:
            yield from self._reconcile(*region)
        finally:
            self.reconciling = False

    def _reconcile(self, lo: int, hi: int) -> Op:
        entries, homes = self.store.digests(lo, hi)
        request = pb.ReconcileRequest(
            lo=lo, hi=hi, entries=entries, homes=homes, batches=list(self.own)
        )
        replicas = self.replica_set()
        for peer in replicas:
            try:
                reply = yield Call(peer, "Reconcile", request)
                why = checks.records_problem(self, reply.records)
                if why is not None:  # a reply is checked as a request is: it changes nothing
                    self.count("messages_refused")
                    log.warning("a Reconcile reply from %s refused: %s", peer.address, why)
                    self.in_sync[peer] = False
                    continue
                if reply.entry_buckets or reply.home_buckets:
                    mine = self.store.merge(reply.records, self.serves)
                    lacked = self.store.lacking(lo, hi, reply)
                    if lacked.entries or lacked.homes:
                        yield Call(peer, "Repair", lacked)
                    self.count("repairs", mine + len(lacked.entries) + len(lacked.homes))
                self.in_sync[peer] = True
            except PeerUnreachable:
                self.in_sync[peer] = False
        self.in_sync = {p: ok for p, ok in self.in_sync.items() if p in replicas}

    def copies(self) -> int:
        """Copies of my range the last reconciliation found whole: mine and each replica's
        that agreed with it."""
        return 1 + sum(self.in_sync.get(p, False) for p in self.replica_set())

    def _collect(self) -> None:
        """Collect old tombstones, and the records no owner has counted on me for lately
        (I am no longer among the R-1 successors of their owner)."""
        self.store.expire()
        now = self.now()
        horizon = max(GC_AFTER, 10 * self.settings.reconcile_period)
        self.confirmed = {r: t for r, t in self.confirmed.items() if now - t <= horizon}
        region = self.region()
        if region is None or self.chord.table.alone() or now - self.started < horizon:
            return
        self.count("collected", self.store.drop_outside([region, *self.confirmed]))

    def _region_changed(self, old: NodeRef | None, new: NodeRef | None) -> None:
        """My predecessor changed: my range with it."""
        if not self.replicated:
            return
        if new is not None:  # my range is new: batches of DNs gone may be mine to finish,
            self.spawn(self._take_over())  # and my replicas need to agree on it at once
            self.spawn(self.reconcile())
        for listener in self.region_listeners:
            listener()

    def _successors_changed(self) -> None:
        """My successors changed: if my replica set did, it reconciles with me at once (a
        replica back from a restart, or a new one, is brought up to date now)."""
        if not self.replicated:
            return
        replicas = self.replica_set()
        if replicas != self.replicas_were:
            self.replicas_were = replicas
            self.spawn(self.reconcile())

    # ---- what outlives the process -------------------------------------------------------

    def restore(
        self,
        subscriptions: Sequence[Subscription],
        entries: Sequence[tuple[int, pb.QueryEntry]],
        tombstones: Sequence[tuple[int, int, int, float]] = (),
        gone: Sequence[tuple[int, int, float]] = (),
    ) -> None:
        """Take back what a journal kept (a restarted node, before it rejoins the ring): the
        subscriptions homed (or replicated) here with their mailboxes, the entries held here
        and the tombstones ((key, subscription, version, when); unsubscribed: (subscription,
        home key, when)). Keys no longer mine pass on as on any join."""
        store = self.store
        journals = self.index.journal, store.journal
        self.index.journal = store.journal = None  # it holds these already
        try:
            for sub in subscriptions:
                self.subscriptions[sub.id] = sub
            for key, entry in entries:
                self.index.replace(key, entry)
            for key, sub_id, version, when in tombstones:
                store.tombstones[(key, sub_id)] = (version, when)
            for sub_id, key, when in gone:
                store.gone[sub_id] = (key, when)
        finally:
            self.index.journal, store.journal = journals

    def durable(self) -> None:
        """Commit what the journal was told (a shell calls this once per batch of changes:
        after each request it handled and each operation it ran)."""
        if self.journal is not None:
            self.journal.commit()

    # ---- synopsis gossip and re-indexing (paper section 8) ------------------------------

    def gossip(self) -> Op:
        """Push to each successor and finger what changed since it was last told."""
        for nb in self.chord.table.neighbors():
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

    def _on_gossip(self, req: pb.GossipRequest) -> pb.Ack:
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
        yield from self._retire()
        if not self.settings.gossiped or self.synopsis.popular() == self.indexed_with:
            return
        self.indexed_with = self.synopsis.popular()
        leaving = {id(e) for _, _, e in self.retiring}
        owns = self.chord.table.owns
        for key in self.index.keys():
            if self.replicated and not owns(key):
                continue  # a replica's: its owner moves it
            for e in self.index.get(key):
                if id(e) in leaving:
                    continue
                pairs = list(zip(e.term_ids, e.terms))
                new_key = pairs[self.choose(pairs, e.subscription_id)][0]
                if new_key == key:
                    continue
                moved = pb.QueryEntry()
                moved.CopyFrom(e)
                moved.index_id = new_key
                moved.version = e.version + 1  # where it may come back, it beats its tombstone
                try:
                    yield from self._at_owner(new_key, "Index", pb.IndexRequest(entry=moved))
                except EngineError:
                    continue  # ownership in flux: it stays where it is, still found
                self.retiring.append((self.now() + self.settings.reindex_grace, key, e))
                self.count("reindexed")
        yield from self._retire()

    def _retire(self) -> Op:
        """Drop moved entries whose grace period is over (the very object: a newer entry
        for the same subscription at that key stays); replicated, as tombstones of their
        version, copied to my replicas."""
        due = self.now()
        keep, gone = [], pb.Records()
        for until, key, e in self.retiring:
            if until > due:
                keep.append((until, key, e))
            elif not self.replicated:
                self.index.remove(key, lambda old, e=e: old is e)
            elif self.store.delete_entry(key, e.subscription_id, e.version):
                tomb = pb.QueryEntry(subscription_id=e.subscription_id, version=e.version)
                gone.entries.add(key=key, entry=tomb, deleted=self.store.clock())
        self.retiring = keep
        if gone.entries:
            yield from self._copy(gone)

    def periodic(self) -> list[tuple[Callable[[], Op], float]]:
        """Operations a live node runs on a timer, with their periods."""
        s = self.settings
        return [(self.gossip, s.gossip_period)] * s.gossiped + [
            (self.reconcile, s.reconcile_period)
        ] * self.replicated

    # ---- stats -------------------------------------------------------------------------

    def stats(self, ledger) -> pb.StatsReply:
        c = self.counters
        dropped = {why: c[f"dropped:{why}"] for why in DROP_REASONS if c[f"dropped:{why}"]}
        full = sum(s.mailbox.dropped for s in self.subscriptions.values())
        if full:
            dropped["mailbox_full"] = full
        replica_homes = sum(
            1 for s in self.subscriptions.values() if s.key and not self.serves(s.key)
        )
        region = self.region()
        primary = (
            sum(len(self.index.get(k)) for k in self.index.keys_in(*region))
            if region is not None
            else len(self.index)
        )
        return pb.StatsReply(
            node=self.me.address,
            node_id=self.me.id,
            ledger=[
                pb.Count(kind=k, messages=v.messages, bytes=v.bytes)
                for k, v in ledger.snapshot().items()
            ],
            index_entries=len(self.index),
            subscriptions=len(self.subscriptions) - replica_homes,
            documents_published=c["documents_published"],
            candidates=c["candidates"],
            matches=c["matches"],
            alerts_delivered=c["alerts_delivered"],
            alerts_dropped=sum(dropped.values()),
            dropped_by=dropped,
            config=self.settings.to_pb(values=False),
            synopsis_size=len(self.synopsis.entries),
            synopsis_digest=self.synopsis.digest(),
            reindexed=c["reindexed"],
            alerts_retried=c["alerts_retried"],
            primary_entries=primary,
            replica_entries=len(self.index) - primary,
            repairs=c["repairs"],
            copies=self.copies() if self.replicated else 1,
            replica_homes=replica_homes,
            alerts_waiting=sum(
                len(s.mailbox.queue)
                for s in self.subscriptions.values()
                if not s.key or self.serves(s.key)
            ),
            held_documents=self.store.held_documents,
            messages_refused=self.chord.refused + c["messages_refused"],
            state_digest=self.state_digest(),
            batches_in_flight=self.batches_in_flight(),
        )

    def batches_in_flight(self) -> int:
        """My batches not through yet: their reports still coming, or their alerts still
        going to homes (retries waiting included)."""
        unreplicated = sum(1 for *_, done in self.retrying if done is None)
        return len(self.gathering.keys() | self.unsent.keys()) + unreplicated

    def state_digest(self) -> int:
        """A fingerprint of what this node holds, not of when: its index and home records
        as reconciliation digests them, its subscriptions' mailboxes, the batches it holds
        and its neighbours. A call that changes nothing leaves it as it was."""
        t = self.chord.table
        whole = self.store.digests(self.me.id, self.me.id)  # lo == hi: the whole circle
        boxes = sorted((s.id, s.mailbox.first, s.mailbox.next) for s in self.subscriptions.values())
        held = sorted(self.store.held)
        parts = (whole, boxes, held, len(self.index), t.predecessor, t.successors)
        return mmh3.hash64(repr(parts).encode(), signed=False)[0]


# ---- resolution, for one QN or many at once ----------------------------------------------

Together = Generator[tuple[EngineNode, Call], Any, None]  # yields a call with the node making it


def local_ids(doc: Announced) -> list[int]:
    """The ids of a document's runs at a QN, ascending: the keys whose lists it consults."""
    return sorted(set(chain.from_iterable(run.ids for run in doc.runs)))


def resolve_together(heard: Sequence[tuple[EngineNode, Heard]]) -> Together:
    """Resolve what these QNs heard, all at once: one node's announcement (a live node) or
    every QN's of a document (the simulator). Each document a QN holds queries for is a
    part of one resolution (cqengine.core.resolution.Resolver), pruned by what the QN knows of
    it; each QN asks the DN of each announcement it heard one Term Dialogue request per
    round for all its documents in it (and first, resolving by filter, one request for
    their filters), and reports their matches in one message. A QN whose DN fails loses
    those documents' alerts, counted."""
    parts: list[tuple[int, int]] = []  # (which announcement, place of the document in it)
    inputs = []
    for g, (node, h) in enumerate(heard):
        for d, doc in enumerate(h.docs):
            lists = node.index.lists(local_ids(doc))
            if lists:
                parts.append((g, d))
                inputs.append((lists, node.knowledge(doc)))
    matched: list[list[list[pb.QueryEntry]]] = [[[] for _ in h.docs] for _, h in heard]
    if parts:
        yield from _resolve_parts(heard, parts, inputs, matched)
    for g, (node, h) in enumerate(heard):
        if node.observer is not None:
            node.observer.on_matched(node, h, matched[g])
        yield from _report(node, h, matched[g])


def _resolve_parts(
    heard: Sequence[tuple[EngineNode, Heard]],
    parts: list[tuple[int, int]],
    inputs: list,
    matched: list[list[list[pb.QueryEntry]]],
) -> Together:
    """The rounds of resolve_together: a filter first (resolving by filter), then Term
    Dialogue until every part's queries are decided; fills `matched`."""
    s = heard[0][0].settings  # the ring's
    step = Resolver.knowing(inputs, s.dialogue_batch)
    for (g, _), n in zip(parts, step.candidates.tolist()):
        heard[g][0].count("candidates", n)
    failed = np.zeros(len(parts), dtype=bool)

    def drop(ps: list[int], why: str, reason: str) -> None:
        """These parts' DN failed them: their queries' alerts are lost, counted."""
        if not ps:
            return
        pending, found = step.pending(), step.matched()
        for p in ps:
            if not failed[p]:
                failed[p] = True
                g, d = parts[p]
                node, h = heard[g]
                node.count(f"dropped:{reason}", int(pending[p]) + len(found[p]))
                log.warning(
                    "resolution of document %016x with %s failed: %s",
                    h.docs[d].key,
                    h.dn.address,
                    why,
                )

    def ask(ps: list[int], rpc: str, request) -> Together:
        """The call of these parts' QN to their DN (they share both); None if it failed."""
        node, h = heard[parts[ps[0]][0]]
        try:
            reply = yield node, Call(h.dn, rpc, request)
        except PeerUnreachable as e:
            reply = yield from _again(node, h, rpc, request)
            if reply is None:
                drop(ps, str(e), "dn_failed")
                return None
        if len(reply.found) != len(ps):
            drop(ps, f"{rpc} answered {len(reply.found)} documents of {len(ps)}", "dn_failed")
            return None
        if node.observer is not None:
            node.observer.on_resolution_call(node, h, rpc, request, reply)
        drop(
            [p for p, found in zip(ps, reply.found) if not found],
            "the DN no longer holds it",
            "document_gone",
        )
        return reply

    def key(p: int) -> int:
        g, d = parts[p]
        return heard[g][1].docs[d].key

    def by_announcement(ps) -> list[list[int]]:
        """Parts, in order, in runs of one announcement each (a part's are consecutive)."""
        return [list(run) for _, run in groupby(ps, key=lambda p: parts[p][0])]

    if s.resolution == "bf":  # the filters first, for every part with queries left to ask about
        width = s.bloom_bits // 8
        filters: list[tuple[int, BloomFilter | None]] = []
        for ps in by_announcement(np.flatnonzero(step.pending()).tolist()):
            reply = yield from ask(ps, "GetBloom", pb.BloomRequest(doc_keys=[key(p) for p in ps]))
            at = 0
            for i, p in enumerate(ps):  # a part whose DN failed learns every unknown term absent
                got = reply is not None and reply.found[i] and len(reply.bits) >= at + width
                filters.append(
                    (
                        p,
                        received_filter(s.bloom_bits, s.bloom_hashes, reply.bits[at : at + width])
                        if got
                        else None,
                    )
                )
                at += width if got else 0
        step.rule_out(step.passes(filters))
    while asked := step.questions():  # (part, where its ids are among the terms, the ids)
        vectors, counts = [], []  # each request's answer (none where the DN failed), and its ids
        for run in by_announcement(range(len(asked))):
            ps = [asked[i][0] for i in run]
            ids = asked[run[0]][2] if len(run) == 1 else [y for i in run for y in asked[i][2]]
            request = pb.DialogueRequest(doc_keys=[key(p) for p in ps], ids=ids)
            if len(run) > 1:
                request.counts.extend(len(asked[i][2]) for i in run)
            reply = yield from ask(ps, "TermDialogue", request)
            vectors.append(bytes((len(ids) + 7) // 8) if reply is None else reply.present)
            counts.append(len(ids))
        step.learn(np.concatenate([at for _, at, _ in asked]), unpack_many(vectors, counts))
    for p, found in enumerate(step.matched()):
        if not failed[p]:
            g, d = parts[p]
            matched[g][d] = found


def _report(node: EngineNode, h: Heard, matched: list[list[pb.QueryEntry]]) -> Together:
    """One report to the DN of the matches of an announcement's documents (with my share of
    the batch, even if nothing matched, when the DN counts reports)."""
    found = [(d, entries) for d, entries in enumerate(matched) if entries]
    if not found and not h.share:
        return
    n = sum(len(entries) for _, entries in found)
    node.count("matches", n)
    request = pb.MatchedRequest(
        doc_keys=[h.docs[d].key for d, _ in found], batch=h.batch, share=h.share
    )
    add = request.matches.add  # in place: a built Match would be copied in
    for i, (_, entries) in enumerate(found):
        for e in entries:
            add(subscription_id=e.subscription_id, home=e.home, home_id=e.home_id, doc=i)
    try:
        yield node, Call(h.dn, "Matched", request)
    except PeerUnreachable as e:
        if (yield from _again(node, h, "Matched", request)) is None:
            node.count("dropped:dn_failed", n)
            log.warning("reporting matches to %s failed: %s", h.dn.address, e)


def _again(node: EngineNode, h: Heard, rpc: str, request) -> Together:
    """A call to a DN that did not answer, made again where its documents are now: the
    owner of its key, the successor that holds copies (replicated). Its reply, or None."""
    if not node.replicated or not h.dn.id:
        return None
    owner, _ = yield from _as(node, node.chord.lookup(h.dn.id, verify=True))
    if owner.address == h.dn.address:
        return None
    h.dn = owner  # the rest of the resolution, and the report, go there too
    try:
        return (yield node, Call(owner, rpc, request))
    except PeerUnreachable:
        return None


def _as(node: EngineNode, op: Op) -> Together:
    """A node's operation run as part of a resolution: its calls, made by that node."""
    reply: Any = None
    error: PeerUnreachable | None = None
    while True:
        try:
            call = op.throw(error) if error is not None else op.send(reply)
        except StopIteration as stop:
            return stop.value
        reply, error = None, None
        try:
            reply = yield node, call
        except PeerUnreachable as e:
            error = e
