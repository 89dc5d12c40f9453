"""What a node checks of every Engine message before it acts on it.

Like chord.protocol.checks for the ring's own messages: a message that fails a check is refused
(chord.protocol.calls.Refused), counted (`messages_refused` in Stats) and changes nothing. The
checks are of shape and range only: every message a correct node sends, whatever the
ring is doing, passes them (tests/core/frame/test_checks.py runs whole simulated rings, replicated
and churning, with every message checked). They read the message and the ring-wide
settings, never the receiver's view of the ring nor the time; each costs O(size of the
message) and analyzes no text, since a simulated ring runs them on every message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from chord.protocol.checks import address_problem
from chord.protocol.routing import SUCCESSORS
from cqengine.core.basis import limits
from cqengine.core.resolution import matches
from cqengine.core.state.postings import FEW
from cqengine.core.terms import presence
from cqengine.core.terms.settings import Settings
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id


def entry_problem(e: pb.QueryEntry) -> str | None:
    """An inverted-list entry: its terms and their ids alike, sorted by id, at most
    MAX_QUERY_TERMS, indexed under one of them, with a real home address."""
    n = len(e.term_ids)
    if not 0 < n <= limits.MAX_QUERY_TERMS or len(e.terms) != n:
        return f"an entry of {n} term ids and {len(e.terms)} terms"
    if any(len(t.encode("utf-8")) > limits.MAX_TERM_BYTES for t in e.terms):
        return f"a term of more than {limits.MAX_TERM_BYTES} bytes"
    if list(e.term_ids) != sorted(e.term_ids) or any(
        term_id(t) != i for t, i in zip(e.terms, e.term_ids)
    ):
        return "an entry's term ids are not its terms', in order"
    if e.index_id not in e.term_ids:
        return "an entry indexed under none of its terms"
    why = conditions_problem(e)
    if why is not None:
        return why
    return address_problem(e.home) if e.home else None


def conditions_problem(e: pb.QueryEntry) -> str | None:
    """What an entry asks besides its terms (cqengine.core.terms.queries): negated terms and
    their ids alike, phrases of 2 or more terms and their ids alike, MAX_QUERY_TERMS of
    them at most all told (a DN asked about them refuses no less)."""
    phrased = sum(len(p.ids) for p in e.phrases)
    if len(e.not_ids) != len(e.not_terms) or len(e.not_ids) + phrased > limits.MAX_QUERY_TERMS:
        return (
            f"an entry of {len(e.not_ids)} negated ids, {len(e.not_terms)} negated terms "
            f"and {phrased} ids in phrases"
        )
    if any(term_id(t) != i for t, i in zip(e.not_terms, e.not_ids)):
        return "an entry's negated ids are not its negated terms'"
    for p in e.phrases:
        if len(p.ids) < 2 or len(p.ids) != len(p.terms):
            return f"a phrase of {len(p.ids)} ids and {len(p.terms)} terms"
        if any(term_id(t) != i for t, i in zip(p.terms, p.ids)):
            return "a phrase's ids are not its terms'"
    if any(len(t.encode("utf-8")) > limits.MAX_TERM_BYTES for t in e.not_terms):
        return f"a negated term of more than {limits.MAX_TERM_BYTES} bytes"
    return None


def documents_problem(n: int, least: int = 1) -> str | None:
    """The documents of one batch: `least` to MAX_BATCH_DOCS of them."""
    if not least <= n <= limits.MAX_BATCH_DOCS:
        return f"{n} documents; a batch has {least}-{limits.MAX_BATCH_DOCS}"
    return None


def split_problem(counts: Sequence[int], total: int, documents: int, what: str) -> str | None:
    """Per-document counts of `total` items, as per_document reads them: sent for a batch
    of several documents only, one per document, summing to the total."""
    if (len(counts) > 0) != (documents > 1) or (
        counts and (len(counts) != documents or sum(counts) != total)
    ):
        return f"{total} {what} do not split as {len(counts)} counts over {documents} documents"
    return None


def per_document(counts: Sequence[int], total: int) -> list[int]:
    """How many of `total` items each document of a checked message has (split_problem):
    its counts, or all of them for a batch of one (which sends none)."""
    return list(counts) if counts else [total]


def docnos_problem(docnos: Sequence[str]) -> str | None:
    """Docnos of 1-MAX_DOCNO characters (a DN publishes no other)."""
    if docnos and not 0 < min(map(len, docnos)) <= max(map(len, docnos)) <= limits.MAX_DOCNO:
        return f"a docno of 0 or more than {limits.MAX_DOCNO} characters"
    return None


def texts_problem(settings: Settings, texts: Sequence[str]) -> str | None:
    """Titles or snippets: each is part of its document, which has max_document_bytes at
    most (and a character takes a byte at least)."""
    limit = settings.max_document_bytes
    if texts and max(map(len, texts)) > limit:
        return f"a title or snippet longer than a document may be ({limit} bytes)"
    return None


def alerts_problem(
    settings: Settings, docnos: Sequence[str], titles: Sequence[str], snippets: Sequence[str]
) -> str | None:
    """Alerts' documents: titles and snippets none or one per docno."""
    n = len(docnos)
    if len(titles) not in (0, n) or len(snippets) not in (0, n):
        return f"{n} documents with {len(titles)} titles and {len(snippets)} snippets"
    why = docnos_problem(docnos) or texts_problem(settings, titles)
    return why or texts_problem(settings, snippets)


def when_problem(t: float) -> str | None:
    """When a record was deleted: unix seconds (0: it was not); or its age, seconds."""
    return None if math.isfinite(t) and t >= 0 else f"{t} is no time"


def largest_in_order(ids: Sequence[int]) -> int | None:
    """A run's largest id, if its ids are in ring order from the first (increasing, past
    zero at most once, each once); None if they are not."""
    if len(ids) <= FEW:
        v = list(ids)
        drops = sum(b <= a for a, b in zip(v, v[1:]))
        top = max(v)
    else:
        a = np.fromiter(ids, dtype=np.uint64, count=len(ids))
        drops = int(np.count_nonzero(a[1:] <= a[:-1]))
        top = int(a.max())
    return top if drops == 0 or (drops == 1 and ids[-1] < ids[0]) else None


def run_problem(r: pb.Run, documents: int, max_ids: Sequence[int], k: int) -> str | None:
    """A run of a document of the announcement: ids in ring order, none past the
    document's largest, and up to k piggybacked ids in increasing order."""
    if r.doc >= documents or not r.ids:
        return f"a run of document {r.doc} of {documents} with {len(r.ids)} ids"
    top = largest_in_order(r.ids)
    if top is None:
        return "a run's ids are not in ring order"
    succ = list(r.succ)
    if len(succ) > k or any(b <= a for a, b in zip(succ, succ[1:])):
        return f"{len(succ)} piggybacked ids, not increasing or more than {k}"
    if max(top, r.prev, r.next, *succ) > max_ids[r.doc]:
        return "a run's id past its document's largest"
    return None


def entry_record_problem(r: pb.EntryRecord) -> str | None:
    """An entry, under its index id; or a tombstone, whose entry has only its
    subscription and version."""
    why = when_problem(r.deleted) or when_problem(r.age)
    if why is not None:
        return why
    e = r.entry
    if r.deleted:
        if e.term_ids or e.terms or e.index_id or e.home or e.home_id:
            return "a tombstone carrying an entry"
        return None
    why = entry_problem(e)
    if why is None and r.key != e.index_id:
        return "an entry record under a key that is not its index id"
    return why


def home_record_problem(settings: Settings, h: pb.HomeRecord) -> str | None:
    """A subscription's record: whole (with its token's hash: a query indexed under one of
    its terms) or its alerts only; alerts numbered from `start`, none before `first`."""
    why = when_problem(h.deleted) or when_problem(h.age)
    if why is not None:
        return why
    if len(h.token_hash) not in (0, limits.TOKEN_HASH):
        return f"a token hash of {len(h.token_hash)} bytes"
    if len(h.terms) > limits.MAX_QUERY_TERMS:
        return f"a subscription of {len(h.terms)} terms; at most {limits.MAX_QUERY_TERMS}"
    if any(len(t.encode("utf-8")) > limits.MAX_TERM_BYTES for t in h.terms):
        return f"a term of more than {limits.MAX_TERM_BYTES} bytes"
    if h.token_hash and (h.index_term not in h.terms or term_id(h.index_term) != h.index_id):
        return "a subscription indexed under none of its terms"
    if h.start < h.first:
        return f"alerts from {h.start}, before the first kept ({h.first})"
    if len(h.seen) > limits.SEEN_KEPT:
        return f"{len(h.seen)} documents seen; {limits.SEEN_KEPT} are kept"
    return docnos_problem(h.seen) or alerts_problem(settings, h.docnos, h.titles, h.snippets)


def held_batch_problem(settings: Settings, b: pb.HeldBatch) -> str | None:
    """A DN's batch held for it: its documents, each with a docno and ids."""
    why = address_problem(b.dn) or documents_problem(len(b.documents))
    if why is not None:
        return why
    if not math.isfinite(b.age):  # seconds (a negative one is taken as new)
        return f"a copy {b.age} s old"
    for d in b.documents:
        if not d.ids:
            return f"a held document {d.docno[:40]!r} without ids"
        if d.sequence and max(d.sequence) >= len(d.ids):
            return f"a held document {d.docno[:40]!r} whose sequence is not of its ids"
        why = docnos_problem((d.docno,)) or texts_problem(settings, (d.title, d.snippet))
        if why is not None:
            return why
    return None


def records_problem(settings: Settings, records: pb.Records) -> str | None:
    for r in records.entries:
        why = entry_record_problem(r)
        if why is not None:
            return why
    for h in records.homes:
        why = home_record_problem(settings, h)
        if why is not None:
            return why
    for b in records.batches:
        why = held_batch_problem(settings, b)
        if why is not None:
            return why
    for a in records.alerts:
        why = _deliver(settings, a)
        if why is None and len(a.seqs) != len(a.subscription_ids):
            why = f"{len(a.seqs)} numbers for {len(a.subscription_ids)} alerts copied"
        if why is not None:
            return why
    acked = records.acknowledged
    if len(acked.firsts) != len(acked.subscription_ids):
        return f"{len(acked.firsts)} numbers for {len(acked.subscription_ids)} acknowledgements"
    return None


def items_problem(settings: Settings, items: list[tuple[int, bytes]]) -> str | None:
    """Keys handed over (a Leave's, a Notify reply's): each a record of this ring's kind
    (replicated: Records; else a query entry under its index id), whole and well formed."""
    for key, data in items:
        try:
            if settings.replicas > 1:
                why = records_problem(settings, pb.Records.FromString(data))
            else:
                entry = pb.QueryEntry.FromString(data)
                why = entry_problem(entry)
                if why is None and key != entry.index_id:
                    why = "an entry handed over under a key that is not its index id"
        except DecodeError:
            why = "a key handed over holds no record"
        if why is not None:
            return why
    return None


# ---- one check per method -----------------------------------------------------------------


def _anything(settings: Settings, req: Any) -> str | None:
    """Every value of its fields is one a correct node may send (ids, a batch's name)."""
    return None


def _index(settings: Settings, req: pb.IndexRequest) -> str | None:
    """One entry, or a batch's: up to MAX_BATCH_QUERIES of them and no single one."""
    n = len(req.entries)
    if not n:
        return entry_problem(req.entry)
    if req.HasField("entry"):
        return f"an entry and {n} entries besides"
    if n > limits.MAX_BATCH_QUERIES:
        return f"{n} entries; at most {limits.MAX_BATCH_QUERIES}"
    for e in req.entries:
        why = entry_problem(e)
        if why is not None:
            return why
    return None


def _announce(settings: Settings, msg: pb.Announcement) -> str | None:
    n = len(msg.doc_keys)
    why = documents_problem(n) or address_problem(msg.dn)
    if why is not None:
        return why
    if len(msg.max_ids) != n:
        return f"an announcement of {n} documents with {len(msg.max_ids)} largest ids"
    if not 0 < msg.hops <= limits.HOP_LIMIT:
        return f"{msg.hops} hops; 1-{limits.HOP_LIMIT}"
    if msg.share > limits.WHOLE:
        return "a share larger than its whole batch"
    k, max_ids = settings.piggyback, msg.max_ids
    for r in msg.runs:
        why = run_problem(r, n, max_ids, k)
        if why is not None:
            return why
    if msg.presence:  # a header must decode against this ring's hot terms, or be refused
        return presence.problem(msg.presence, n, settings.header_terms)
    return None


def _get_bloom(settings: Settings, req: pb.BloomRequest) -> str | None:
    return documents_problem(len(req.doc_keys))


def _term_dialogue(settings: Settings, req: pb.DialogueRequest) -> str | None:
    n = len(req.doc_keys)
    lengths, docs = req.phrase_lengths, req.phrase_docs
    phrased = sum(lengths)
    if len(docs) != len(lengths) or phrased > len(req.ids):
        return f"{len(lengths)} phrases of {phrased} ids do not fit {len(docs)} documents named"
    if lengths and (min(lengths) < 2 or max(docs) >= n):
        return "a phrase of fewer than 2 ids, or of a document not asked about"
    return documents_problem(n) or split_problem(req.counts, len(req.ids) - phrased, n, "ids")


def _matched(settings: Settings, req: pb.MatchedRequest) -> str | None:
    n = len(req.doc_keys)
    why = documents_problem(n, least=0)  # a share handed back alone names none
    if why is not None:
        return why
    if req.share > limits.WHOLE:
        return "a share larger than its whole batch"
    why = matches.problem(req, n)
    if why is not None:
        return why
    homes = set(req.homes)
    for m in req.matches:
        if m.doc >= n:
            return f"a match of document {m.doc} of {n}"
        homes.add(m.home)
    homes.discard("")  # as an entry's: none
    for home in homes:
        why = address_problem(home)
        if why is not None:
            return why
    return None


def _deliver(settings: Settings, batch: pb.AlertBatch) -> str | None:
    n, subs = len(batch.docnos), len(batch.subscription_ids)
    why = documents_problem(n) or split_problem(batch.counts, subs, n, "alerts")
    if why is not None:
        return why
    if len(batch.seqs) not in (0, subs):
        return f"{len(batch.seqs)} sequence numbers for {subs} alerts"
    if not math.isfinite(batch.accepted) or batch.accepted < 0:
        return f"an acceptance time of {batch.accepted} s since the epoch"
    why = address_problem(batch.home) if batch.home else None
    return why or alerts_problem(settings, batch.docnos, batch.titles, batch.snippets)


def _gossip(settings: Settings, req: pb.GossipRequest) -> str | None:
    s = settings
    n, values = len(req.term_ids), req.values
    if req.hashes != s.synopsis_hashes:
        return f"{req.hashes} registers per term; this ring's synopses have {s.synopsis_hashes}"
    if n > s.synopsis_k or len(values) != n * req.hashes:
        return f"{n} terms with {len(values)} registers; a synopsis keeps {s.synopsis_k}"
    if values and not 1 <= min(values) <= max(values) <= s.synopsis_y:
        return f"a coin-tossing register outside 1-{s.synopsis_y}"
    return None


def _records(settings: Settings, records: pb.Records) -> str | None:
    return records_problem(settings, records)


def _reconcile(settings: Settings, req: pb.ReconcileRequest) -> str | None:
    wants = len(req.want_entry_keys) + len(req.want_homes)
    if len(req.want_entry_keys) != len(req.want_entry_subs):
        return f"{len(req.want_entry_keys)} keys for {len(req.want_entry_subs)} entries asked"
    if wants > limits.MAX_BATCH_QUERIES:
        return f"{wants} records asked for; at most {limits.MAX_BATCH_QUERIES}"
    if wants:  # a second round: no digests
        return None
    for n in (len(req.entries), len(req.homes)):
        if n & (n - 1) or not limits.BUCKETS <= n <= limits.MAX_BUCKETS:
            return f"{n} digests; a power of two from {limits.BUCKETS} to {limits.MAX_BUCKETS}"
    return None


def _members_problem(members: Sequence[str]) -> str | None:
    if len(members) > 2 * SUCCESSORS:
        return f"a member set of {len(members)} nodes"
    for address in members:
        why = address_problem(address)
        if why is not None:
            return why
    return None


def _log_promise(settings: Settings, req: pb.LogPromise) -> str | None:
    return _members_problem(req.members) or (
        address_problem(req.candidate) if req.candidate else None
    )


def _log_append(settings: Settings, req: pb.LogAppend) -> str | None:
    """A leader's entries are kept as they came and read when a member derives its
    mailboxes: an entry of a kind no member knows would stop every one of them there."""
    for entry in req.entries:
        if entry.kind not in pb.LogKind.values():
            return f"a log entry of kind {entry.kind}"
        why = _members_problem(entry.members) or _members_problem(entry.previous)
        if why is not None:
            return why
    return None


def _log_leave(settings: Settings, req: pb.LogLeaveRequest) -> str | None:
    """A leaving member names itself, and the logs it is a member of: those a leader leads
    are a few per node, each started again in an epoch (a long list is no member's)."""
    if len(req.keys) > limits.LOG_LEAVE_KEYS:
        return f"{len(req.keys)} logs left at once (at most {limits.LOG_LEAVE_KEYS})"
    return address_problem(req.member)


CHECKS: dict[str, Callable[[Any, Any], str | None]] = {
    "Index": _index,
    "Unindex": _anything,
    "Announce": _announce,
    "GetBloom": _get_bloom,
    "TermDialogue": _term_dialogue,
    "Matched": _matched,
    "Deliver": _deliver,
    "Gossip": _gossip,
    "Replicate": _records,
    "Reconcile": _reconcile,
    "Repair": _records,
    "Release": _anything,
    "LogPromise": _log_promise,
    "LogAppend": _log_append,
    "LogFetch": _anything,
    "LogLeave": _log_leave,
    "Uptime": _anything,
}


def invalid(settings: Settings, method: str, request: Any) -> str | None:
    """Why a node of a ring with these settings refuses this request (None: it may act
    on it)."""
    check = CHECKS.get(method)
    return check(settings, request) if check is not None else None
