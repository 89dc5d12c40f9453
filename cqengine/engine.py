"""The engine node: query indexing, announcement, resolution and alerts, free of I/O.

`EngineNode` rides on a ChordNode: it answers the Engine service's requests from local
state (`handle`) and does everything that talks to other nodes as operations — generators
of Calls, like the ring's own — run by whichever shell hosts it. A request whose handling
needs more messages (an announcement to forward, matches to deliver) hands an operation to
`spawn`, which the simulator queues and a live node runs as a task.

A document's path: the publishing node (DN) analyzes it, stores it for resolution, and
announces it as one run of ids (cqengine.announce) that every hop splits by next hop. A QN
gathers the queries indexed under its local ids, prunes them, resolves the rest with the
DN (cqengine.resolution) and reports matches to the DN, which sends one alert batch per
subscriber home node. Home nodes put each (subscription, docno) on the stream once.

Experiments measure several settings in one pass (cqengine.evaluation.runs): a QN also
resolves as the other method would (shadow resolution), as shallower piggyback depths
would (shadow depths) and for other strategies' indexes (ShadowIndex). Those shadows are
measured, not sent: see Meter.
"""

from __future__ import annotations

import hmac
import logging
import time
import random
import secrets
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator, Sequence

import numpy as np

from chord.node import Call, ChordNode, Op, PeerUnreachable
from chord.routing import NodeRef
from chord.transport import REPLY, ledger_kind
from cqengine.analysis import analyze, term_id
from cqengine.announce import Knowledge, Run, Told, announcement, bytes_saved, group_runs, may_match
from cqengine.bloom import BloomFilter
from cqengine.config import Settings
from cqengine.indexing import chooser
from cqengine.postings import Block, InvertedIndex, any_per_query, member
from cqengine.proto import cqengine_pb2 as pb
from cqengine.resolution import (FEW, SMALL, InStep, Resolution, SmallResolution, Stack, Truth, pack_bits, resolution,
                                  unpack_bits, unpack_many)
from cqengine.synopsis import Synopsis
from cqengine.wire import alert_batch_size, bloom_sizes, dialogue_sizes, matched_size

log = logging.getLogger("cqengine.engine")

ENGINE_SERVICE = pb.DESCRIPTOR.services_by_name["Engine"]
MAX_QUERY_TERMS = 64
MAX_DOCNO = 256
SNIPPET = 200
HOP_LIMIT = 160      # an announcement still travelling after this many hops is processed where it is
PLACE_ATTEMPTS = 5   # lookups to place or remove a query while ownership moves
DOC_CACHE = 20_000   # documents a DN keeps for resolution
MAILBOX = 10_000     # undelivered alerts kept per subscription
STACK = 10_000       # queries recorded by the meters settled as one stack
PEERS = 4096         # node references kept by address (peer_at)


MEASURE = "measure"  # the tag of what a QN asks to measure its shadows (Meter): no run reads it
ACK = pb.Ack().ByteSize()  # an Ack's bytes: it is empty

Sent = dict[tuple[str, str], list[int]]  # resolution calls: (method, rpc) -> [calls, request bytes, reply bytes]
Unsent = dict[str, list[int]]  # calls measured, not sent: ledger kind -> [calls, request bytes, reply bytes]


def unsent_counts(unsent: Unsent) -> Iterator[tuple[str, int]]:
    """The counters of calls measured instead of sent, as a run alone would have sent
    them: echo:KIND messages and echo_bytes:KIND bytes, requests then replies."""
    for kind, (calls, request, reply) in unsent.items():
        yield from zip(_echo_names(kind), (calls, request, calls, reply))


def _note(sent: Sent, call: tuple[str, str], n: int, request: int, reply: int) -> None:
    noted = sent.setdefault(call, [0, 0, 0])
    noted[0] += n
    noted[1] += request
    noted[2] += reply


def _require(found: bool, msg: pb.Announcement) -> None:
    if not found:
        raise LookupError(f"the publishing node no longer holds document {msg.doc_key:016x}")


@lru_cache(maxsize=None)  # asked per QN, index and depth: few distinct answers
def depth_tag(d: int, index: str = "") -> str:
    """The tag a shadow piggyback depth's messages and counters carry (INDEX/kD for a
    depth of a shadow index)."""
    return "/".join(t for t in (index, f"k{d}") if t)


@lru_cache(maxsize=None)  # asked for every resolution call: few distinct answers
def resolution_tag(depth: str, method: str, own: str) -> str:
    """The ledger tag of resolving by `method` under a depth's tag on a ring that resolves
    by `own`: kD, METHOD or kD/METHOD (the ring's own method and depth: none)."""
    return "/".join(t for t in (depth, "" if method == own else method) if t)


@lru_cache(maxsize=None)
def _call_kind(rpc: str, tag: str, method: str, own: str) -> str:
    """The ledger kind of a resolution call by `method` under a depth's tag."""
    return ledger_kind(rpc, resolution_tag(tag, method, own))


@lru_cache(maxsize=None)
def _echo_names(kind: str) -> tuple[str, str, str, str]:
    """The counters of a kind's echoes: messages and bytes, requests then replies."""
    return tuple(f"{what}:{k}" for k in (kind, kind + REPLY) for what in ("echo", "echo_bytes"))


@lru_cache(maxsize=64)  # every QN of a document hears the same filter
def _received_filter(bits: int, hashes: int, data: bytes) -> BloomFilter:
    """A document's filter as a QN received it; shared, so never added to."""
    return BloomFilter(bits, hashes, data)


@lru_cache(maxsize=64)  # every QN of a document hears the same answer
def _told_truth(data: bytes) -> Truth:
    """The answers a DocumentReply gives (shared, so never written but for its caches)."""
    return Truth(np.array(pb.DocumentReply.FromString(data).ids, dtype=np.uint64))


def _state(keep: np.ndarray, present: np.ndarray) -> tuple[bytes, bytes]:
    """What decides a resolution of a block's queries: which it keeps, and which of the
    block's terms the QN knows present."""
    return keep.tobytes(), present.tobytes()


@dataclass
class ShadowIndex:
    """Another strategy's index of the same subscriptions, hosted beside the node's own
    for measurement (the evaluation's pass over a workload): every QN resolves its lists
    too, at each of `depths`, measured (Meter) under the index's name (NAME/kD: kinds
    and counters), with the report of its matches and the alert batches they would set
    off (NAME:Matched, NAME:Deliver)."""
    index: InvertedIndex
    depths: tuple[int, ...]


@dataclass
class Measured:
    """A shadow's resolution of a block of candidates by one method, recorded to be
    worked out with the rest of its document's (Meter.settle), and counted under each of `tags`:
    its own, then those of every shadow that echoes it."""
    block: Block
    keep: np.ndarray | None  # the block's candidates (None: all of it)
    present: np.ndarray  # per term of the block: known present before asking
    method: str
    held: np.ndarray     # per term of the block: does the document hold it (the truth)?
    matches: np.ndarray  # per candidate: does the document hold all its terms?
    tags: list[str]


@dataclass
class Outcome:
    """What resolving a block's candidates in one state sends: the calls made (the
    engine's own resolution) and the resolutions measured; a shadow left in the same
    state counts them again under its own tag (an echo)."""
    calls: Sent = field(default_factory=dict)
    measured: list[Measured] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.calls or self.measured)


class Meter:
    """What a QN measures its shadows with (the shadow method, shadow depths and shadow
    indexes of a measurement pass): the document as the DN holds it (its term ids and
    what its alerts carry) and, if a shadow resolves by Bloom filter, its filter. Each is
    asked of the DN once per announcement, when a shadow first needs it, under the
    `measure:` tag, which no run reads. A shadow's matches are then known at once (the
    queries whose terms the document all holds), and its dialogue is recorded (`measure`)
    to be worked out with every other the QN records for the document (and, where a
    shell hosts many QNs, the simulator, with the other QNs'), by the same Resolution, all
    at once and round by round (`settle`, `settle_meters`): its messages, and the alerts
    its matches would set off, are counted as its run alone would have sent them, instead
    of being sent. The DN would have answered each round from the same document
    (tests/test_evaluation.py checks runs measured so against runs made alone)."""

    def __init__(self, msg: pb.Announcement, dn: NodeRef) -> None:
        self.msg, self.dn = msg, dn
        self._document: pb.DocumentReply | None = None
        self._truth: Truth | None = None
        self._filter: BloomFilter | None = None
        self._matches: dict[int, tuple[Block, np.ndarray, np.ndarray]] = {}  # id(block) -> it, held, its matches
        self.measured: list[Measured] = []

    def document(self) -> Op:
        if self._document is None:
            reply = yield Call(self.dn, "GetDocument", pb.DocumentRequest(doc_key=self.msg.doc_key), MEASURE)
            _require(reply.found, self.msg)
            self._document = reply
        return self._document

    def truth(self) -> Op:
        if self._truth is None:
            self._truth = _told_truth((yield from self.document()).SerializeToString())
        return self._truth

    def filter(self, bits: int, hashes: int) -> Op:
        if self._filter is None:
            reply = yield Call(self.dn, "GetBloom", pb.BloomRequest(doc_key=self.msg.doc_key), MEASURE)
            _require(reply.found, self.msg)
            self._filter = _received_filter(bits, hashes, reply.bits)
        return self._filter

    def measure(self, block: Block, keep: np.ndarray | None, present: np.ndarray, methods: Sequence[str],
                tag: str, outcome: Outcome, bits: int, hashes: int) -> Op:
        """Record the resolution of the block's candidates (`keep`; None: all) by each
        method, to be counted under `tag` (and noted in `outcome`); returns the queries
        they match."""
        truth = self._truth or (yield from self.truth())
        if "bf" in methods and self._filter is None:
            yield from self.filter(bits, hashes)
        got = self._matches.get(id(block))
        if got is None:  # worked out once per block, whichever depths resolve it
            held = truth.mask(block.terms)
            got = self._matches[id(block)] = (block, held, ~any_per_query(~held[block.codes]))
        _, held, full = got
        matches = full if keep is None else full[keep]
        for method in methods:
            outcome.measured.append(Measured(block, keep, present, method, held, matches, [tag]))
        self.measured += outcome.measured[-len(methods):]
        return block.entries[full if keep is None else full & keep].tolist()

    @staticmethod
    def settle(meters: Sequence["Meter"], batch: int, bits: int) -> Iterator[tuple["Meter", Measured, Sent, bool]]:
        """Work out every resolution these meters recorded (all of one document: the QNs
        it reached), all at once (cqengine.resolution.Stack): each with its meter, the
        calls it would have made, and whether it matched what the truth says it should."""
        parts = [(meter, m) for meter in meters for m in meter.measured]
        for meter in meters:
            meter.measured = []
        key = meters[0].msg.doc_key if meters else 0
        if any(meter.msg.doc_key != key for meter in meters):
            raise ValueError("meters of different documents settle apart")
        if len(parts) == 1 or sum(len(m.matches) for _, m in parts) <= SMALL:  # nothing to share, or little
            for meter, m in parts:
                yield meter, m, *meter._settle_one(m, batch, bits)
            return
        bloom = next((meter._filter for meter, m in parts if m.method == "bf"), None)  # the document's
        stack = Stack([(m.block, m.keep, m.present, m.method == "bf") for _, m in parts], batch, bloom)
        pending, rounds, matched = stack.settle(np.concatenate([m.held for _, m in parts]))
        bloomed = pending & np.array([m.method == "bf" for _, m in parts])  # asked for the filter
        wrong = np.bincount(stack.query_part[matched != np.concatenate([m.matches for _, m in parts])],
                            minlength=len(parts))
        asked = np.unique(rounds)
        request, reply = (np.zeros(int(asked[-1]) + 1 if len(asked) else 1, dtype=np.int64) for _ in range(2))
        for n in asked[asked > 0].tolist():
            request[n], reply[n] = dialogue_sizes(key, n)
        calls, requests, replies = (rounds > 0).sum(axis=0), request[rounds].sum(axis=0), reply[rounds].sum(axis=0)
        fetched = bloom_sizes(key, bits)
        for (meter, m), bf, n, req, rep, bad in zip(parts, bloomed.tolist(), calls.tolist(), requests.tolist(),
                                                     replies.tolist(), wrong.tolist()):
            sent: Sent = {}
            if bf:
                _note(sent, (m.method, "GetBloom"), 1, *fetched)
            if n:
                _note(sent, (m.method, "TermDialogue"), n, req, rep)
            yield meter, m, sent, not bad

    def _settle_one(self, m: Measured, batch: int, bits: int) -> tuple[Sent, bool]:
        """One resolution worked out alone: the stack's fixed costs buy nothing for one,
        and for a few queries SmallResolution's Python beats numpy."""
        key = self.msg.doc_key
        candidates = m.block if m.keep is None else m.block.select(m.keep)
        res = resolution(candidates, m.present, batch)
        sent: Sent = {}
        if m.method == "bf" and res.pending:
            res.apply_bloom(self._filter)
            _note(sent, (m.method, "GetBloom"), 1, *bloom_sizes(key, bits))
        if isinstance(res, Resolution):
            sizes = [len(at) for at in res.rounds(m.held)]
        else:
            sizes, held = [], self._truth.ids
            while question := res.question():
                res.answer(question, [y in held for y in question])
                sizes.append(len(question))
        for n in sizes:
            _note(sent, (m.method, "TermDialogue"), 1, *dialogue_sizes(key, n))
        return sent, {id(e) for e in res.matched} == {id(e) for e in candidates.entries[m.matches]}


def settle_meters(pending: Sequence[tuple["EngineNode", Meter]]) -> None:
    """Settle the shadows the QNs' meters recorded (Meter.settle), each document's in
    stacks across its QNs (`_stacks`), and have each QN count what its shadows would have
    sent: a shell that runs many QNs (the simulator) settles a document's once it has run
    its course."""
    by_doc: dict[int, list[tuple[EngineNode, Meter]]] = {}
    for node, meter in pending:
        if meter.measured:
            by_doc.setdefault(meter.msg.doc_key, []).append((node, meter))
    for group in by_doc.values():
        node_of = {id(meter): node for node, meter in group}
        s = group[0][0].settings  # the ring's: every node's
        for meters in _stacks([meter for _, meter in group]):
            for meter, m, calls, agrees in Meter.settle(meters, s.dialogue_batch, s.bloom_bits):
                node_of[id(meter)]._count_settled(meter, m, calls, agrees)


def _stacks(meters: list[Meter]) -> Iterator[list[Meter]]:
    """Meters in runs of about STACK queries recorded: a stack's arrays then stay in the
    processor's cache, which one of a whole document's (400,000 queries) does not."""
    run, size = [], 0
    for meter in meters:
        run.append(meter)
        size += sum(len(m.matches) for m in meter.measured)
        if size >= STACK:
            yield run
            run, size = [], 0
    if run:
        yield run


def resolve_together(pending: Sequence[tuple["EngineNode", pb.Announcement, list[Run]]],
                     run: Callable[["EngineNode", Op], object]) -> None:
    """The QNs' own resolutions of the announcements handed over to the shell
    (EngineNode.together: a shell that runs many QNs, the simulator, once a document has
    run its course), in step (InStep); `run` drives an operation at a node. Each QN prunes
    as alone, asks its DN in each round just what its own dialogue would (the very
    messages: one per QN and round, by EngineNode._ask) and reports its matches as alone
    (EngineNode._matched); only the order of the QNs' messages differs. What a round
    works out is then worked out once for all of them, not once per QN."""
    parts: list[tuple[EngineNode, pb.Announcement, NodeRef]] = []
    lists: list[tuple[list[Block], Knowledge]] = []  # each part's blocks, and what it knows of the document
    for node, msg, local in pending:
        ids, told, dn = node._told(msg, local)
        mine = node.index.lists(ids)
        if mine:
            parts.append((node, msg, dn))
            lists.append((mine, told.at(node.settings.piggyback)))
    if not parts:
        return
    s = parts[0][0].settings  # the ring's
    step = InStep(lists, s.dialogue_batch)
    for (node, _, _), n in zip(parts, step.candidates.tolist()):
        node.count("candidates", n)
    failed: set[int] = set()

    def ask(p: int, rpc: str, request):
        """Part p's call to its DN; None if it failed (its queries' alerts are then dropped)."""
        node, msg, dn = parts[p]
        try:
            reply = run(node, node._ask(dn, rpc, request, s.resolution, None))
            _require(reply.found, msg)
            return reply
        except (PeerUnreachable, LookupError) as e:
            node.count("alerts_dropped", int(step.pending()[p]) + len(step.matched()[p]))
            log.warning("resolution of document %016x with %s failed: %s", msg.doc_key, msg.dn, e)
            failed.add(p)
            return None

    if s.resolution == "bf":  # a filter first, for every QN with queries left to ask about
        filters = []
        for p in np.flatnonzero(step.pending()).tolist():
            reply = ask(p, "GetBloom", pb.BloomRequest(doc_key=parts[p][1].doc_key))
            # a QN whose DN failed learns every unknown term absent: its queries end here
            filters.append((p, None if reply is None else _received_filter(s.bloom_bits, s.bloom_hashes, reply.bits)))
        step.rule_out(step.passes(filters))
    while asked := step.questions():
        present: list[bytes] = []  # each reply's bits; none (every id absent) where the DN failed
        for p, _, ids in asked:
            reply = ask(p, "TermDialogue", pb.DialogueRequest(doc_key=parts[p][1].doc_key, ids=ids))
            present.append(bytes((len(ids) + 7) // 8) if reply is None else reply.present)
        step.learn(np.concatenate([at for _, at, _ in asked]), unpack_many(present, [len(ids) for _, _, ids in asked]))
    for p, matched in enumerate(step.matched()):
        if p in failed:
            continue
        node, msg, dn = parts[p]
        try:
            run(node, node._matched(msg, dn, matched))
        except (PeerUnreachable, LookupError) as e:
            node.count("alerts_dropped", len(matched))
            log.warning("reporting matches of document %016x to %s failed: %s", msg.doc_key, msg.dn, e)


class EngineError(Exception):
    """A request the engine refuses; `code` names the gRPC status it maps to."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class PublishedDoc:
    key: int
    docno: str
    title: str
    snippet: str
    ids: frozenset[int]
    _bloom: bytes | None = None
    _sorted: np.ndarray | None = None
    _told: pb.DocumentReply | None = None

    def told(self) -> pb.DocumentReply:
        """The document as measurement asks it (GetDocument): made once, asked by every QN."""
        if self._told is None:
            self._told = pb.DocumentReply(found=True, ids=sorted(self.ids), docno=self.docno, title=self.title,
                                          snippet=self.snippet)
        return self._told

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


@lru_cache(maxsize=PEERS)
def peer_at(address: str) -> NodeRef:
    """The node at an address, its id unknown (0): one object per address for every node
    of a process (a simulated ring's thousand send alert batches to the same homes)."""
    return NodeRef(0, address)


@dataclass
class Mailbox:
    """A subscription's undelivered alerts; each docno enters once, ever."""

    limit: int = MAILBOX
    queue: deque = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)
    dropped: int = 0

    def offer(self, alert: pb.Alert) -> bool:
        if alert.docno in self.seen:
            return False
        self.seen.add(alert.docno)
        if len(self.queue) >= self.limit:
            self.queue.popleft()
            self.dropped += 1
        self.queue.append(alert)
        return True

    def take(self) -> list[pb.Alert]:
        out = list(self.queue)
        self.queue.clear()
        return out


@dataclass
class Subscription:
    id: int
    token: str
    terms: list[str]
    index_id: int
    index_term: str
    mailbox: Mailbox = field(default_factory=Mailbox)


class EngineNode:
    services = [ENGINE_SERVICE]

    def __init__(self, chord: ChordNode, settings: Settings, spawn: Callable[[Op], None],
                 now: Callable[[], float] = time.monotonic, tally: Counter | None = None,
                 unsent: Unsent | None = None, meters: list[tuple["EngineNode", Meter]] | None = None,
                 together: list[tuple["EngineNode", pb.Announcement, list[Run]]] | None = None) -> None:
        self.chord = chord
        self.settings = settings
        self.spawn = spawn
        df = settings.df
        self.index = InvertedIndex((lambda y, t: df.get(t, 0)) if df is not None else None)
        chord.store = self.index  # inverted lists move with key ownership
        self.synopsis = Synopsis(settings.synopsis_k, settings.synopsis_y, settings.synopsis_hashes)
        self.told: dict[NodeRef, int] = {}  # neighbour -> synopsis clock it was last gossiped
        self.indexed_with: frozenset[int] = frozenset()  # the popular set entries were last placed by
        self.retiring: list[tuple[float, int, pb.QueryEntry]] = []  # (until, old key, entry) after a move
        self.now = now
        fixed = settings.popular_ids
        self.choose = chooser(settings.strategy, settings.seed, settings.df,
                              (lambda: fixed) if fixed is not None else self.synopsis.popular)
        self.rng = random.Random(settings.seed ^ chord.me.id)
        self.docs: OrderedDict[int, PublishedDoc] = OrderedDict()
        self.subscriptions: dict[int, Subscription] = {}
        self.counters: Counter[str] = Counter()
        self.tally = tally  # the simulator's ring-wide sum of every node's counters
        # what this node measured instead of sending, summed before it is counted: here,
        # once the node is done with a document, unless the shell sums it ring-wide
        self.unsent: Unsent = {} if unsent is None else unsent
        self._counts_unsent = unsent is None
        self.meters = meters  # where my QN's meters go to be settled by the shell (None: by me, at once)
        # where my QN's own resolutions go to be resolved by the shell in step with the other
        # QNs' (resolve_together; None: by me, at once); only when I measure no shadows
        self.together = together
        self.alert_listeners: list[Callable[[int], None]] = []  # told the subscription id
        self.shadow_indexes: dict[str, ShadowIndex] = {}  # name -> index; see ShadowIndex
        self.shadow_listeners: list[Callable[[str, list[int]], None]] = []  # told a shadow index's matches
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
            "GetDocument": self._on_get_document,
        }

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n
        if self.tally is not None:
            self.tally[name] += n

    @property
    def me(self) -> NodeRef:
        return self.chord.me

    def handle(self, method: str, request):
        handler = self.handlers.get(method)
        return handler(request) if handler else self.chord.handle(method, request)

    def _peer(self, address: str) -> NodeRef:
        me = self.me
        return me if address == me.address else peer_at(address)

    # ---- subscribing -------------------------------------------------------------------

    def subscribe(self, text: str) -> Op:
        return (yield from self.subscribe_terms(analyze(text)))

    def subscribe_terms(self, terms: list[str]) -> Op:
        """Subscribe a query already analyzed (by `analyze`, here or in a Spark job)."""
        if not terms:
            raise EngineError("INVALID_ARGUMENT", "the query has no terms left after stop-word "
                                                  "removal and stemming")
        if len(terms) > MAX_QUERY_TERMS:
            raise EngineError("INVALID_ARGUMENT", f"the query has {len(terms)} terms; at most "
                                                  f"{MAX_QUERY_TERMS} are allowed")
        pairs = sorted((term_id(t), t) for t in terms)
        sub_id = self.rng.getrandbits(64)
        x, index_term = pairs[self.choose(pairs, sub_id)]
        entry = pb.QueryEntry(subscription_id=sub_id, term_ids=[p[0] for p in pairs],
                              terms=[p[1] for p in pairs], index_id=x, home=self.me.address)
        sub = Subscription(sub_id, secrets.token_hex(16), terms, x, index_term)
        self.subscriptions[sub_id] = sub  # before placing: an alert may come at once
        try:
            yield from self._at_owner(x, "Index", pb.IndexRequest(entry=entry))
        except BaseException:
            del self.subscriptions[sub_id]
            raise
        return pb.SubscribeReply(subscription_id=sub_id, token=sub.token, terms=terms,
                                 index_term=index_term, home=self.me.address)

    def unsubscribe(self, sub_id: int, token: str) -> Op:
        sub = self.authorized(sub_id, token)
        del self.subscriptions[sub_id]  # no alert reaches it from now on
        # a gossiped synopsis may have moved the entry under any of the query's terms
        keys = sorted({term_id(t) for t in sub.terms}) if self.settings.gossiped else [sub.index_id]
        for key in keys:
            yield from self._at_owner(key, "Unindex", pb.UnindexRequest(index_id=key, subscription_id=sub_id))
        return pb.UnsubscribeReply()

    def authorized(self, sub_id: int, token: str) -> Subscription:
        sub = self.subscriptions.get(sub_id)
        if sub is None:
            raise EngineError("NOT_FOUND", f"no subscription {sub_id:016x} at {self.me.address}")
        if not hmac.compare_digest(sub.token.encode(), token.encode()):
            raise EngineError("PERMISSION_DENIED", f"wrong token for subscription {sub_id:016x}")
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

    def _on_index(self, req: pb.IndexRequest) -> pb.IndexReply:
        e = req.entry
        if not self.chord.table.owns(e.index_id):
            return pb.IndexReply(owner=False)
        self.index.replace(e.index_id, e)
        return pb.IndexReply(owner=True)

    def _on_unindex(self, req: pb.UnindexRequest) -> pb.IndexReply:
        if not self.chord.table.owns(req.index_id):
            return pb.IndexReply(owner=False)
        if self.index.holds(req.index_id, req.subscription_id):
            self.index.remove(req.index_id, lambda e: e.subscription_id == req.subscription_id)
        return pb.IndexReply(owner=True)

    # ---- publishing and announcing -----------------------------------------------------

    def publish(self, docno: str, text: bytes, title: str = "") -> Op:
        body = self._admit(docno, text, title)
        return (yield from self.publish_terms(docno, analyze(f"{title}\n{body}"), title,
                                              " ".join(body.split())[:SNIPPET]))

    def publish_terms(self, docno: str, terms: list[str], title: str = "", snippet: str = "") -> Op:
        """Publish a document already analyzed (by `analyze`, here or in a Spark job)."""
        docno = docno.strip()
        if not docno or len(docno) > MAX_DOCNO:
            raise EngineError("INVALID_ARGUMENT", f"a document needs a docno of 1-{MAX_DOCNO} characters")
        doc = self._store(docno, frozenset(term_id(t) for t in terms), title, snippet)
        self.count("documents_published")
        if doc.ids:
            ids = sorted(doc.ids)
            yield from self._announce(pb.Announcement(doc_key=doc.key, dn=self.me.address,
                                                      max_id=ids[-1]), [Run.whole(ids)], hops=0)
        return pb.PublishReply(accepted=True, terms=len(doc.ids), doc_key=doc.key)

    def _admit(self, docno: str, text: bytes, title: str) -> str:
        """The text of a document fit to publish, or the reason it is not."""
        size = len(text) + len(title.encode("utf-8"))
        if size > self.settings.max_document_bytes:
            raise EngineError("INVALID_ARGUMENT", f"document {docno} has {size} bytes; the limit "
                                                  f"is {self.settings.max_document_bytes}")
        try:
            body = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EngineError("INVALID_ARGUMENT", f"document {docno} is not UTF-8 (bad byte at "
                                                  f"offset {e.start})") from None
        return body

    def _store(self, docno: str, ids: frozenset[int], title: str, snippet: str) -> PublishedDoc:
        """Keep the document for resolution (the DN answers for it) and count it in the synopsis."""
        doc = PublishedDoc(self.rng.getrandbits(64), docno, title, snippet, ids)
        self.docs[doc.key] = doc
        if self.settings.gossiped:
            self.synopsis.add_document(docno, ids)  # the DN stores, so counts, what it announces
        while len(self.docs) > DOC_CACHE:
            self.docs.popitem(last=False)
        return doc

    def _on_announce(self, msg: pb.Announcement) -> pb.Ack:
        self.spawn(self._announce(msg, [Run.from_pb(r) for r in msg.runs], msg.hops))
        return pb.Ack()

    def _announce(self, msg: pb.Announcement, runs: list[Run], hops: int) -> Op:
        """Algorithms 2 and 3: forward sub-runs per next hop, then process my own."""
        k, depths = self.settings.piggyback, self.settings.shadow_piggyback
        saved = [0] * len(depths)  # announcement bytes each shadow depth would not have sent
        local: list[Run] = []
        while runs:
            # each id's next hop by the table as it is now (a failed hop changes it); None: mine
            groups = group_runs(runs, self.chord.table.router() if hops < HOP_LIMIT else (lambda x: None), k)
            runs = []
            local += groups.pop(None, [])
            for hop, hop_runs in groups.items():
                out = announcement(msg.doc_key, msg.dn, msg.max_id, hop_runs, hops + 1)
                if depths:
                    saved = [a + b for a, b in zip(saved, bytes_saved(out.runs, depths))]
                try:
                    yield Call(hop, "Announce", out)
                except PeerUnreachable:
                    runs += hop_runs  # forgotten by the lookup layer: regroup around it
                    self.chord.table.forget(hop)
        for d, n in zip(depths, saved):
            if n:
                self.count(f"{depth_tag(d)}:announce_bytes_saved", n)
        if local and self.together is not None and not self._measures():
            self.together.append((self, msg, local))
        elif local:
            try:
                yield from self._resolve(msg, local)
            finally:
                self._flush_unsent()

    def _measures(self) -> bool:
        """Do my QNs measure shadows (a measurement pass: see Meter)?"""
        s = self.settings
        return bool(s.shadow_resolution or s.shadow_piggyback or self.shadow_indexes)

    # ---- resolving (QN side) -----------------------------------------------------------

    def _told(self, msg: pb.Announcement, local: list[Run]) -> tuple[list[int], Told, NodeRef]:
        """My local ids, what the runs tell me of the document, and its DN."""
        ids = sorted({x for run in local for x in run.ids})
        pred = self.chord.table.predecessor
        region = (pred.id, self.me.id) if pred is not None else \
            ((self.me.id, self.me.id) if self.chord.table.alone() else None)
        s = self.settings
        return ids, Told(local, msg.max_id, region, s.piggyback, s.obs1, s.obs2), self._peer(msg.dn)

    def _own(self, block: Block, told: Told) -> tuple[np.ndarray, Block | None, np.ndarray]:
        """The block's queries my own depth keeps (Observations 1-2, Algorithm 4), them as
        candidates (None: none; counted), and which of the block's terms I know present."""
        know = told.at(self.settings.piggyback)
        keep = may_match(block, know.absent_in(block.terms))
        return keep, self._candidates(block, keep), member(block.terms, know.present_array)

    def _resolve(self, msg: pb.Announcement, local: list[Run]) -> Op:
        ids, told, dn = self._told(msg, local)
        meter = Meter(msg, dn) if self._measures() else None
        # an index whose queries here are another's (17% of Skew's blocks: strategies
        # often agree) resolves the very same states: its depths echo them
        shared: dict[bytes, tuple[Block, dict]] = {}
        try:
            block, resolved = self._shared(shared, self.index, ids)
            yield from self._resolve_own(block, msg, told, dn, meter, resolved)
            for name, shadow in self.shadow_indexes.items():
                block, resolved = self._shared(shared, shadow.index, ids)
                if block is None:
                    continue
                try:
                    matched = yield from self._shadow_depths(block, told, meter, shadow.depths, name, resolved)
                    yield from self._matched(msg, dn, matched, name, meter)
                except (PeerUnreachable, LookupError) as e:
                    log.warning("shadow index %s: resolution of document %016x with %s failed: %s",
                                name, msg.doc_key, msg.dn, e)
        finally:
            if meter is not None and self.meters is not None:  # the shell settles it with other QNs'
                self.meters.append((self, meter))
            elif meter is not None:
                settle_meters([(self, meter)])

    def _shared(self, shared: dict[bytes, tuple[Block, dict]], index: InvertedIndex, ids: list[int]
                ) -> tuple[Block | None, dict]:
        """The queries the index holds under these local ids, as one block (None: none),
        with what its states resolved to: those of an index here that holds the same
        queries, in the same order, if one came before."""
        block = index.blocks(ids)
        if block is None or not self.shadow_indexes:  # no other index to share with
            return block, {}
        return shared.setdefault(block.subscriptions(), (block, {}))

    def _resolve_own(self, block: Block | None, msg: pb.Announcement, told: Told, dn: NodeRef,
                     meter: "Meter | None", resolved: dict) -> Op:
        """Resolve my own candidates with the DN, and measure my shadow method and depths;
        `resolved` then holds what my state sent (for shadows in it to echo)."""
        if block is None:
            return
        s = self.settings
        keep, candidates, present = self._own(block, told)
        res = resolution(candidates, present, s.dialogue_batch) if candidates is not None else None
        own = Outcome()  # what my resolution sends, for shadow depths and indexes to echo
        echoed = bool(s.shadow_piggyback or self.shadow_indexes)  # else nothing can echo my state
        try:
            if res is not None:
                yield from self._dialogue(res, s.resolution, msg, dn, own.calls if echoed else None)
        except (PeerUnreachable, LookupError) as e:
            self.count("alerts_dropped", res.pending + len(res.matched))
            log.warning("resolution of document %016x with %s failed: %s", msg.doc_key, msg.dn, e)
            return
        matched = res.matched if res is not None else []
        try:  # measuring what others would send must not cost the matches found
            if candidates is not None and s.shadow_resolution:
                self._agree((yield from meter.measure(candidates, None, present, (s.shadow_resolution,), "", own,
                                                      s.bloom_bits, s.bloom_hashes)), matched)
            if echoed:
                resolved[_state(keep, present)] = (own, matched)
            if s.shadow_piggyback:
                yield from self._shadow_depths(block, told, meter, s.shadow_piggyback, "", resolved, matched)
        except (PeerUnreachable, LookupError) as e:
            log.warning("measuring shadows of document %016x with %s failed: %s", msg.doc_key, msg.dn, e)
        try:
            yield from self._matched(msg, dn, matched)
        except (PeerUnreachable, LookupError) as e:
            self.count("alerts_dropped", len(matched))
            log.warning("reporting matches of document %016x to %s failed: %s", msg.doc_key, msg.dn, e)

    def _matched(self, msg: pb.Announcement, dn: NodeRef, matched: list[pb.QueryEntry], index: str = "",
                 meter: Meter | None = None) -> Op:
        """Report the matches to the DN, which alerts their subscribers; a shadow index's
        are measured instead (`_measure_alerts`)."""
        if not matched:
            return
        self.count(f"{index}:matches" if index else "matches", len(matched))
        if index:
            yield from self._measure_alerts(matched, index, meter)
            return
        request = pb.MatchedRequest(doc_key=msg.doc_key)
        add = request.matches.add  # in place: a built Match would be copied in
        for e in matched:
            add(subscription_id=e.subscription_id, home=e.home)
        yield Call(dn, "Matched", request)

    def _measure_alerts(self, matched: list[pb.QueryEntry], index: str, meter: Meter) -> Op:
        """Count, under INDEX: echo kinds, the report a shadow index's run would send the DN
        and the alert batches the DN would send for it, one per home node (none that stays
        on a node: it never crosses the wire), and tell the listeners; alert no one."""
        doc = yield from meter.document()
        dn = meter.dn.address
        if dn != self.me.address:
            self._count_echo(ledger_kind("Matched", index), 1,
                             matched_size(meter.msg.doc_key, [(e.subscription_id, e.home) for e in matched]), ACK)
        homes = Counter(e.home for e in matched)
        sizes = [alert_batch_size(doc.docno, doc.title, doc.snippet, n) for home, n in homes.items() if home != dn]
        if sizes:
            self._count_echo(ledger_kind("Deliver", index), len(sizes), sum(sizes), len(sizes) * ACK)
        for listener in self.shadow_listeners:
            listener(index, [e.subscription_id for e in matched])

    def _candidates(self, block: Block, keep: np.ndarray) -> Block | None:
        """The queries of the block it keeps (None: none left), counted."""
        n = self._count_candidates(keep, "")
        return (block if n == len(block) else block.select(keep)) if n else None

    def _count_candidates(self, keep: np.ndarray, tag: str) -> int:
        """Count the queries kept as candidates (TAG:candidates for a shadow depth)."""
        n = int(np.count_nonzero(keep))
        self.count(f"{tag}:candidates" if tag else "candidates", n)
        return n

    def _shadow_depths(self, block: Block, told: Told, meter: "Meter", wanted: tuple[int, ...], index: str,
                       resolved: dict[tuple, tuple[Outcome, list[pb.QueryEntry]]],
                       matched: list[pb.QueryEntry] | None = None) -> Op:
        """Prune and resolve the block as each wanted depth would have (the runs cut
        short), measured (Meter) and counted under kD: kinds and counters (INDEX/kD: for a
        shadow index); every depth must find the same matches (`matched`, the engine's
        own; for a shadow index its first depth's), which it returns. What each depth
        knows of the block's terms is worked out for all depths at once (`Told.depths`),
        unless one depth is wanted.

        `resolved` holds what each state of the block already resolved here sent and
        matched (the engine's own first, and those of every index before that holds the
        same queries). A depth left in the same state, the same candidates knowing the
        same of their terms (often: the ids a depth adds seldom touch the block), would ask
        the same questions and hear the same answers, so its messages are counted as
        echoes of those instead of being worked out again."""
        s = self.settings
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
            n = self._count_candidates(keep, tag)
            if state in resolved:
                self._echo(resolved[state][0], tag)
                found = resolved[state][1]
            else:
                outcome = Outcome()
                found = []
                if n:
                    methods = tuple(m for m in (s.resolution, s.shadow_resolution) if m)
                    found = yield from meter.measure(block, keep if n < len(block) else None, present, methods,
                                                     tag, outcome, s.bloom_bits, s.bloom_hashes)
                resolved[state] = (outcome, found)
            if matched is None:
                matched = found
            else:
                self._agree(found, matched)
        return matched if matched is not None else []

    def _dialogue(self, res: Resolution | SmallResolution, method: str, msg: pb.Announcement,
                  dn: NodeRef, sent: Sent | None = None) -> Op:
        """Resolve with the DN by `method`: for bf a filter first, then Term Dialogue."""
        s = self.settings
        if method == "bf" and res.pending:
            reply = yield from self._ask(dn, "GetBloom", pb.BloomRequest(doc_key=msg.doc_key), method, sent)
            _require(reply.found, msg)
            res.apply_bloom(_received_filter(s.bloom_bits, s.bloom_hashes, reply.bits))
        while question := res.question():
            reply = yield from self._ask(dn, "TermDialogue", pb.DialogueRequest(doc_key=msg.doc_key, ids=question),
                                         method, sent)
            _require(reply.found, msg)
            res.answer(question, unpack_bits(reply.present, len(question)))

    def _ask(self, dn: NodeRef, rpc: str, request, method: str, sent: Sent | None) -> Op:
        """One resolution call, noted in `sent` when shadow depths may echo it (unless to
        myself: that never crosses the wire, so no ledger counts it)."""
        reply = yield Call(dn, rpc, request)
        if sent is not None and dn != self.me:
            _note(sent, (method, rpc), 1, request.ByteSize(), reply.ByteSize())
        return reply

    def _echo(self, outcome: Outcome, tag: str) -> None:
        """Count what a state already resolved here sends, as resolving it again at depth
        tag `tag` would have: its calls now, its measured resolutions once settled."""
        self._count_calls(outcome.calls, tag)
        for m in outcome.measured:
            m.tags.append(tag)

    def _count_settled(self, meter: Meter, m: Measured, calls: Sent, agrees: bool) -> None:
        """Count what a shadow my meter recorded would have sent, once settled (none to
        myself: that never crosses the wire)."""
        if not agrees:
            self.count("shadow_disagreements")
        if calls and meter.dn != self.me:
            for tag in m.tags:
                self._count_calls(calls, tag)

    def _count_calls(self, calls: Sent, tag: str) -> None:
        """Count resolution calls that were not sent as a run resolving under depth tag
        `tag` would have sent them."""
        own = self.settings.resolution
        for (method, rpc), (n, request, reply) in calls.items():
            self._count_echo(_call_kind(rpc, tag, method, own), n, request, reply)

    def _count_echo(self, kind: str, calls: int, request: int, reply: int) -> None:
        """Count calls of a ledger kind that a run alone would have sent (see unsent_counts)."""
        got = self.unsent.get(kind)
        if got is None:
            self.unsent[kind] = [calls, request, reply]
        else:
            got[0] += calls
            got[1] += request
            got[2] += reply

    def _flush_unsent(self) -> None:
        if self._counts_unsent:
            for name, n in unsent_counts(self.unsent):
                self.count(name, n)
            self.unsent.clear()

    def _agree(self, found: list[pb.QueryEntry], matched: list[pb.QueryEntry]) -> None:
        """Count a shadow that matched other queries than the engine's own resolution."""
        if {id(e) for e in found} != {id(e) for e in matched}:  # the block's very entries
            self.count("shadow_disagreements")

    # ---- answering resolution (DN side) ------------------------------------------------

    def _on_get_bloom(self, req: pb.BloomRequest) -> pb.BloomReply:
        doc = self.docs.get(req.doc_key)
        if doc is None:
            return pb.BloomReply(found=False)
        return pb.BloomReply(found=True, bits=doc.bloom(self.settings.bloom_bits, self.settings.bloom_hashes))

    def _on_term_dialogue(self, req: pb.DialogueRequest) -> pb.DialogueReply:
        doc = self.docs.get(req.doc_key)
        if doc is None:
            return pb.DialogueReply(found=False)
        return pb.DialogueReply(found=True, present=pack_bits(doc.holds(req.ids)))

    def _on_get_document(self, req: pb.DocumentRequest) -> pb.DocumentReply:
        doc = self.docs.get(req.doc_key)
        return pb.DocumentReply(found=False) if doc is None else doc.told()

    def _on_matched(self, req: pb.MatchedRequest) -> pb.Ack:
        doc = self.docs.get(req.doc_key)
        if doc is not None:
            self.spawn(self._deliver(doc, list(req.matches)))
        return pb.Ack()

    def _batches(self, doc: PublishedDoc, matches) -> list[tuple[NodeRef, pb.AlertBatch]]:
        """The alert batches for these matches: one per subscriber home node."""
        by_home: dict[str, list[int]] = {}
        for m in matches:
            by_home.setdefault(m.home, []).append(m.subscription_id)
        return [(self._peer(home), pb.AlertBatch(docno=doc.docno, title=doc.title, snippet=doc.snippet,
                                                 subscription_ids=subs))
                for home, subs in sorted(by_home.items())]

    def _deliver(self, doc: PublishedDoc, matches: list[pb.Match]) -> Op:
        for home, batch in self._batches(doc, matches):
            try:
                yield Call(home, "Deliver", batch)
            except PeerUnreachable:
                self.count("alerts_dropped", len(batch.subscription_ids))

    # ---- alerts (home side) ------------------------------------------------------------

    def _on_deliver(self, batch: pb.AlertBatch) -> pb.Ack:
        docno, title, snippet = batch.docno, batch.title, batch.snippet  # read off the message once
        delivered = 0
        for sub_id in batch.subscription_ids:
            sub = self.subscriptions.get(sub_id)
            if sub is None:
                continue  # unsubscribed meanwhile
            if sub.mailbox.offer(pb.Alert(subscription_id=sub_id, docno=docno, title=title, snippet=snippet)):
                delivered += 1
                for listener in self.alert_listeners:
                    listener(sub_id)
        if delivered:
            self.count("alerts_delivered", delivered)
        return pb.Ack()

    # ---- synopsis gossip and re-indexing (paper section 8) ------------------------------

    def gossip(self) -> Op:
        """Push to each successor and finger what changed since it was last told."""
        for nb in self.chord.table.neighbors():
            delta = self.synopsis.since(self.told.get(nb, 0))
            if not delta:
                continue
            msg = pb.GossipRequest(term_ids=[t for t, _ in delta], hashes=self.synopsis.hashes,
                                   values=b"".join(bytes(v) for _, v in delta))
            clock = self.synopsis.clock
            try:
                yield Call(nb, "Gossip", msg)
                self.told[nb] = clock
            except PeerUnreachable:
                self.told.pop(nb, None)
        yield from self.reindex()

    def _on_gossip(self, req: pb.GossipRequest) -> pb.Ack:
        h = req.hashes or 1
        values = req.values
        self.synopsis.merge((t, tuple(values[i * h:(i + 1) * h])) for i, t in enumerate(req.term_ids))
        return pb.Ack()

    def reindex(self) -> Op:
        """Move the entries held here whose SAP-MHI term changed with the synopsis.

        The entry is placed at its new key first and leaves the old one only after
        `reindex_grace` seconds: a document whose announcement reached the new owner before
        the entry and reaches the old one after the move still finds it. Meanwhile both
        copies may match; the home node drops the second alert.
        """
        self._retire()
        if not self.settings.gossiped or self.synopsis.popular() == self.indexed_with:
            return
        self.indexed_with = self.synopsis.popular()
        leaving = {id(e) for _, _, e in self.retiring}
        for key in self.index.keys():
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
                try:
                    yield from self._at_owner(new_key, "Index", pb.IndexRequest(entry=moved))
                except EngineError:
                    continue  # ownership in flux: it stays where it is, still found
                self.retiring.append((self.now() + self.settings.reindex_grace, key, e))
                self.count("reindexed")
        self._retire()

    def _retire(self) -> None:
        """Drop moved entries whose grace period is over (the very object: a newer entry
        for the same subscription at that key stays)."""
        due = self.now()
        keep = []
        for until, key, e in self.retiring:
            if until <= due:
                self.index.remove(key, lambda old, e=e: old is e)
            else:
                keep.append((until, key, e))
        self.retiring = keep

    def periodic(self) -> list[tuple[Callable[[], Op], float]]:
        """Operations a live node runs on a timer, with their periods."""
        return [(self.gossip, self.settings.gossip_period)] if self.settings.gossiped else []

    # ---- stats -------------------------------------------------------------------------

    def stats(self, ledger) -> pb.StatsReply:
        c = self.counters
        return pb.StatsReply(
            node=self.me.address, node_id=self.me.id,
            ledger=[pb.Count(kind=k, messages=v.messages, bytes=v.bytes)
                    for k, v in ledger.snapshot().items()],
            index_entries=len(self.index), subscriptions=len(self.subscriptions),
            documents_published=c["documents_published"], candidates=c["candidates"],
            matches=c["matches"], alerts_delivered=c["alerts_delivered"],
            alerts_dropped=c["alerts_dropped"] + sum(s.mailbox.dropped for s in self.subscriptions.values()),
            config=self.settings.to_pb(), synopsis_size=len(self.synopsis.entries),
            synopsis_digest=self.synopsis.digest(), reindexed=c["reindexed"])
