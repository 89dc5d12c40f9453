"""Documents: as a publisher gives them, and as their DN holds them for resolution.

A document is analyzed once, by its DN (`prepare`; a live node does it off its event loop),
into its terms and their ids. The DN keeps it (`Documents`) until its queries are resolved:
every QN's Term Dialogue questions and Bloom filter requests about it are answered here,
and its alerts carry its docno, title and snippet. A copy held for another DN (replicated)
is kept the same way, so that this node answers for it should it take the batch over.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cqengine.core.alerts.mailboxes import AlertDoc
from cqengine.core.basis import limits
from cqengine.core.basis.errors import EngineError
from cqengine.core.frame.checks import per_document
from cqengine.core.resolution.conditions import questions_in
from cqengine.core.resolution.resolution import Flags, pack_bits
from cqengine.core.state.postings import FEW, member
from cqengine.core.terms.bloom import BloomFilter
from cqengine.core.terms.settings import Settings
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze_sequence, term_id


@dataclass(frozen=True)
class Document:
    """A document ready to publish: its docno, its analyzed terms (and their ids, if known
    already), what its alerts carry, and its term sequence (what phrases match; None:
    unknown, so no phrase is found in it). `accepted`: the wall time its DN took it in (0:
    when it stores it), which its alerts carry to the home's latency histogram."""

    docno: str
    terms: Sequence[str]
    title: str = ""
    snippet: str = ""
    ids: frozenset[int] | None = None
    sequence: Sequence[str] | None = None
    accepted: float = 0.0


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
    sequence = analyze_sequence(f"{title}\n{body}")
    terms = list(dict.fromkeys(sequence))
    ids = frozenset(map(term_id, terms))
    return Document(docno, terms, title, snippet(body), ids, sequence)


def snippet(body: str) -> str:
    """The body's first SNIPPET characters, its whitespace runs made single spaces. Only a
    prefix of the body is normalized: a normalized prefix is a prefix of the normalized whole."""
    size = 2 * limits.SNIPPET
    while True:
        out = " ".join(body[:size].split())
        if len(out) >= limits.SNIPPET or size >= len(body):
            return out[: limits.SNIPPET]
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
    sequence: np.ndarray | None = None  # its term ids in order (uint64); None: unknown
    accepted: float = 0.0  # wall time its DN accepted it (0: not known, a held copy's)
    _bloom: bytes | None = None
    _sorted: np.ndarray | None = None

    @property
    def alert(self) -> AlertDoc:
        return self.docno, self.title, self.snippet

    def bloom(self, bits: int, hashes: int) -> bytes:
        if self._bloom is None:
            self._bloom = BloomFilter.of(self.ids, bits, hashes).to_bytes()
        return self._bloom

    def holds(self, ids: Sequence[int]) -> Flags:
        """Which of these ids the document has (Term Dialogue's answer)."""
        if len(ids) <= FEW:
            return [y in self.ids for y in ids]
        return member(np.array(ids, dtype=np.uint64), self.sorted_ids())

    def sorted_ids(self) -> np.ndarray:
        if self._sorted is None:
            self._sorted = np.array(sorted(self.ids), dtype=np.uint64)
        return self._sorted

    def has_phrase(self, ids: Sequence[int]) -> bool:
        """Do these term ids stand in a row in its term sequence?"""
        seq, n = self.sequence, len(ids)
        if seq is None or n > len(seq):
            return False
        at = np.flatnonzero(seq[: len(seq) - n + 1] == np.uint64(ids[0]))
        for j in range(1, n):
            at = at[seq[at + j] == np.uint64(ids[j])]
        return len(at) > 0

    def held_sequence(self) -> list[int]:
        """Its term sequence as places in its sorted ids (a held copy's)."""
        if self.sequence is None:
            return []
        places: list[int] = self.sorted_ids().searchsorted(self.sequence).tolist()
        return places


class Documents:
    """The documents this node holds as a DN, by key, the newest DOC_CACHE of them: those
    published through it, and copies of other DNs' batches (replicated)."""

    def __init__(self, new_id: Callable[[], int], settings: Settings) -> None:
        """`new_id`: where document keys come from; `settings`: the ring's (its filters'
        shape, read when a filter is asked for)."""
        self.new_id, self.settings = new_id, settings
        self.docs: OrderedDict[int, PublishedDoc] = OrderedDict()

    def get(self, key: int) -> PublishedDoc | None:
        return self.docs.get(key)

    def drop(self, key: int) -> None:
        self.docs.pop(key, None)

    def store(self, doc: Document) -> PublishedDoc:
        """Keep a document published through me (I answer for it), under a new key."""
        docno = doc.docno.strip()
        if not docno or len(docno) > limits.MAX_DOCNO:
            raise EngineError(
                "INVALID_ARGUMENT", f"a document needs a docno of 1-{limits.MAX_DOCNO} characters"
            )
        ids = doc.ids if doc.ids is not None else frozenset(map(term_id, doc.terms))
        sequence = None  # published as terms alone: no phrase is found in it
        if doc.sequence is not None:
            sequence = np.fromiter(map(term_id, doc.sequence), np.uint64, len(doc.sequence))
        kept = PublishedDoc(
            self.new_id(), docno, doc.title, doc.snippet, ids, sequence, doc.accepted
        )
        self._add(kept)
        return kept

    def keep(self, d: pb.HeldDocument) -> PublishedDoc:
        """A document held for a DN, kept so that I answer for it as the DN would."""
        doc = self.docs.get(d.key)
        if doc is None:
            doc = PublishedDoc(d.key, d.docno, d.title, d.snippet, frozenset(d.ids))
            if d.sequence:
                doc.sequence = np.array(d.ids, dtype=np.uint64)[list(d.sequence)]
            self._add(doc)
        return doc

    def keep_published(self, doc: PublishedDoc) -> PublishedDoc:
        """A document of mine kept again (the cache may have let it go): I answer for it."""
        self.docs.pop(doc.key, None)
        self._add(doc)
        return doc

    def _add(self, doc: PublishedDoc) -> None:
        self.docs[doc.key] = doc
        while len(self.docs) > limits.DOC_CACHE:
            self.docs.popitem(last=False)

    # ---- what QNs ask of them (resolution, DN side) -------------------------------------

    def on_get_bloom(self, req: pb.BloomRequest) -> pb.BloomReply:
        s = self.settings
        docs = [self.docs.get(key) for key in req.doc_keys]
        return pb.BloomReply(
            found=[doc is not None for doc in docs],
            bits=b"".join(doc.bloom(s.bloom_bits, s.bloom_hashes) for doc in docs if doc),
        )

    def on_term_dialogue(self, req: pb.DialogueRequest) -> pb.DialogueReply:
        docs = [self.docs.get(key) for key in req.doc_keys]
        if req.phrase_lengths:
            return _with_phrases(req, docs)
        return self.terms_present(req, docs)

    @staticmethod
    def terms_present(req: pb.DialogueRequest, docs: list[PublishedDoc | None]) -> pb.DialogueReply:
        """Which of its ids each document holds."""
        ids = req.ids
        found = [doc is not None for doc in docs]
        if len(docs) == 1:
            doc = docs[0]
            return pb.DialogueReply(
                found=found, present=pack_bits(doc.holds(ids) if doc else [False] * len(ids))
            )
        flags, start = [], 0
        for doc, n in zip(docs, per_document(req.counts, len(ids))):
            part = ids[start : start + n]
            flags.append(
                np.asarray(doc.holds(part), dtype=bool) if doc else np.zeros(n, dtype=bool)
            )
            start += n
        flat = np.concatenate(flags) if flags else np.zeros(0, dtype=bool)
        return pb.DialogueReply(found=found, present=np.packbits(flat, bitorder="little").tobytes())


def _with_phrases(req: pb.DialogueRequest, docs: list[PublishedDoc | None]) -> pb.DialogueReply:
    """A Term Dialogue request with phrase questions after its ids (the last round:
    cqengine.core.resolution.conditions): which ids each document holds, which phrases."""
    n, _ = questions_in(req)  # checked (cqengine.core.frame.checks)
    flags, at = [], n
    for d, length in zip(req.phrase_docs, req.phrase_lengths):
        doc = docs[d]
        flags.append(doc is not None and doc.has_phrase(req.ids[at : at + length]))
        at += length
    terms = pb.DialogueRequest(doc_keys=req.doc_keys, ids=req.ids[:n], counts=req.counts)
    reply = Documents.terms_present(terms, docs)
    reply.phrases = pack_bits(flags)
    return reply
