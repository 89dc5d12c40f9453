"""The QN: what a node does with the runs of a batch that stopped in its region (paper
sections 5-6).

It takes the queries of its inverted lists under each document's ids here, prunes those
with a term it knows absent (cqengine.core.resolution.knowledge), resolves the rest with the DN
(Term Dialogue, after a Bloom filter when the ring resolves by filter) and reports their
matches to the DN in one message. A `Resolution` is the I/O-free part: the requests of
each round, and what their answers decide, for one QN's announcement or for many at once
(the simulator resolves every QN of a document together, through the same steps). A QN
whose DN fails loses those documents' alerts, counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import numpy as np

from chord.protocol.calls import Call, Op, PeerUnreachable
from cqengine.core.frame.context import Context
from cqengine.core.resolution import matches
from cqengine.core.resolution.conditions import Conditions, questions_in
from cqengine.core.resolution.conditions import request as request_of
from cqengine.core.resolution.knowledge import Knowledge, knowledge
from cqengine.core.resolution.resolution import Resolver, unpack_many
from cqengine.core.resolution.runs import Announced, Heard
from cqengine.core.state.postings import Block
from cqengine.core.terms import presence
from cqengine.core.terms.bloom import BloomFilter, received_filter
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.qn.qn")


class QN:
    def __init__(self, ctx: Context, gather: Callable[[Heard], None] | None = None) -> None:
        """`gather(h)`: where a shell that hosts many QNs (the simulator) collects what they
        heard, to resolve it together once an announcement has run its course
        (Resolution); None: each announcement is resolved as it is heard."""
        self.ctx, self.gather = ctx, gather

    def knowledge(self, doc: Announced) -> Knowledge:
        """What my runs of a document tell me of it (Observations 1-2, Algorithm 4), and
        its term-presence header if it came with one."""
        s = self.ctx.settings
        hot = s.hot_ids
        header = (
            None if doc.presence is None else (hot[presence.places_of(doc.presence, len(hot))], hot)
        )
        return knowledge(doc.runs, doc.max_id, self.ctx.region(), s.piggyback, header=header)

    def heard(self, h: Heard) -> Op:
        """Runs of a batch stopped here: resolve them (or have the shell resolve them with
        other QNs')."""
        ctx = self.ctx
        if ctx.observer is not None:
            ctx.observer.on_heard(ctx, h)
        if self.gather is not None:
            self.gather(h)
        else:
            yield from self.resolve(h)

    def resolve(self, h: Heard) -> Op:
        """Resolve what I heard by myself (a live node's way), then report."""
        resolution = Resolution([(self, h)])
        while asks := resolution.asks():
            for ask in asks:
                try:
                    resolution.answer(ask, (yield from self.ask(h, ask.rpc, ask.request)))
                except PeerUnreachable as e:
                    resolution.answer(ask, None, str(e))
        yield from self.resolved(h, resolution.matched()[0])

    def ask(self, h: Heard, rpc: str, request: object) -> Op:
        """A resolution request to the DN of `h`; if the DN does not answer, to where its
        documents are now (replicated: the owner of its key, the successor that holds its
        copies). Its reply; PeerUnreachable if neither answered."""
        try:
            return (yield Call(h.dn, rpc, request))
        except PeerUnreachable as e:
            reply = yield from self._again(h, rpc, request)
            if reply is None:
                raise e
            return reply

    def resolved(self, h: Heard, matched: list[list[pb.QueryEntry]]) -> Op:
        """The queries each document of `h` matched: one report to the DN (with my share of
        the batch, even if nothing matched, when the DN counts reports)."""
        ctx = self.ctx
        if ctx.observer is not None:
            ctx.observer.on_matched(ctx, h, matched)
        found = [(d, _one_each(entries)) for d, entries in enumerate(matched) if entries]
        if not found and not h.share:
            return
        n = sum(len(entries) for _, entries in found)
        ctx.count("matches", n)
        request = pb.MatchedRequest(
            doc_keys=[h.docs[d].key for d, _ in found], batch=h.batch, share=h.share
        )
        matches.report(request, [entries for _, entries in found], ctx.chord.uses("columns"))
        try:
            yield from self.ask(h, "Matched", request)
        except PeerUnreachable as e:
            ctx.count("dropped:dn_failed", n)
            log.warning("reporting matches to %s failed: %s", h.dn.address, e)

    def _again(self, h: Heard, rpc: str, request: object) -> Op:
        """A call to a DN that did not answer, made again where its documents are now. Its
        reply, or None."""
        ctx = self.ctx
        if not ctx.replicated or not h.dn.id:
            return None
        owner, _ = yield from ctx.chord.lookup(h.dn.id, verify=True)
        if owner.address == h.dn.address:
            return None
        h.dn = owner  # the rest of the resolution, and the report, go there too
        try:
            return (yield Call(owner, rpc, request))
        except PeerUnreachable:
            return None


def _short(req: pb.DialogueRequest, reply: pb.DialogueReply) -> bool:
    """Does a last round's reply answer fewer ids or phrases than were asked (a DN that
    knows no phrase questions, say)?"""
    ids, phrases = questions_in(req)
    return len(reply.present) * 8 < ids or len(reply.phrases) * 8 < phrases


def _one_each(entries: list[pb.QueryEntry]) -> list[pb.QueryEntry]:
    """One entry per subscription: a document that matches two alternatives of a query is
    one alert (a home also takes each document once)."""
    if len(entries) < 2 or len({e.subscription_id for e in entries}) == len(entries):
        return entries
    return list({e.subscription_id: e for e in entries}.values())


@dataclass
class Ask:
    """A request of a round: one QN's to the DN of one announcement it heard, about those
    of its documents (parts) that ask."""

    qn: QN
    heard: Heard
    parts: list[int]
    rpc: str
    request: Any
    reply: Any = None  # None: not answered yet, or the DN failed
    answered: bool = False
    conditions: bool = False  # the last round's: negated terms and phrases


class Resolution:
    """The resolution of what some QNs heard, all at once and free of I/O. Each document a
    QN holds queries for is a part of one resolver (cqengine.core.resolution.resolution.Resolver),
    pruned by what the QN knows of it. Each round, `asks` gives one request per QN and
    announcement (resolving by filter, first one for their filters; then one Term Dialogue
    request per round) and `answer` takes each reply (None: the DN failed); once `asks`
    gives none, `matched` has each announcement's matches."""

    def __init__(self, heard: Sequence[tuple[QN, Heard]]) -> None:
        self.heard = list(heard)
        self.parts: list[tuple[int, int]] = []  # (which announcement, its document)
        inputs: list[tuple[list[Block], Knowledge]] = []
        for g, (qn, h) in enumerate(self.heard):
            for d, doc in enumerate(h.docs):
                lists = qn.ctx.index.lists(doc.local_ids())
                if lists:
                    self.parts.append((g, d))
                    inputs.append((lists, qn.knowledge(doc)))
        self.knows = [know for _, know in inputs]
        self.filters: dict[int, BloomFilter | None] = {}  # per part, the DN's (by filter)
        self.conditions: Conditions | None = None  # once every part's terms are settled
        self.step: Resolver | None = None  # None: no part (no request is ever made)
        self._filters = False  # asked first: the filters (the ring resolves by filter)
        if self.parts:
            settings = self.heard[0][0].ctx.settings  # the ring's
            self.step = Resolver.knowing(inputs, settings.dialogue_batch)
            for (g, _), n in zip(self.parts, self.step.candidates.tolist()):
                self.heard[g][0].ctx.count("candidates", n)
            self._counted = self.step.candidates.copy()  # per part, the candidates counted
            self._filters = settings.resolution == "bf"
        self.failed = np.zeros(len(self.parts), dtype=bool)
        self._round: list[Ask] = []  # this round's requests, answered or not
        self._asked: list[tuple[int, np.ndarray, list[int]]] = []  # Resolver.questions

    def asks(self) -> list[Ask]:
        """The next round's requests, once the last round's answers are all in; none when
        every part is decided."""
        self._learn()
        step = self.step
        if step is None:
            return []
        if self._filters:  # the filters first, for every part with queries left to ask about
            self._filters = False
            asks = [
                self._ask(ps, "GetBloom", pb.BloomRequest(doc_keys=[self._key(p) for p in ps]))
                for ps in self._by_announcement(np.flatnonzero(step.pending()).tolist())
            ]
            if asks:
                self._round = asks
                return asks
            step.rule_out(step.passes([]))  # none to ask: none ruled out
        self._asked = asked = step.questions()  # (part, where its ids are among the terms, ids)
        if not asked:
            return self._condition_asks(step)
        asks = []
        for run in self._by_announcement(range(len(asked)), lambda i: asked[i][0]):
            ps = [asked[i][0] for i in run]
            ids = asked[run[0]][2] if len(run) == 1 else [y for i in run for y in asked[i][2]]
            request = pb.DialogueRequest(doc_keys=[self._key(p) for p in ps], ids=ids)
            if len(run) > 1:
                request.counts.extend(len(asked[i][2]) for i in run)
            asks.append(self._ask(ps, "TermDialogue", request))
        self._round = asks
        return asks

    def answer(self, ask: Ask, reply: Any, failure: str = "") -> None:
        """The reply to a request of this round; None (why: `failure`) if the DN failed."""
        if reply is None:
            self._drop(ask.parts, failure, "dn_failed")
        elif len(reply.found) != len(ask.parts) or (ask.conditions and _short(ask.request, reply)):
            why = f"{ask.rpc} answered {len(reply.found)} documents of {len(ask.parts)}"
            if len(reply.found) == len(ask.parts):
                why = "the last round's answer is shorter than its questions"
            self._drop(ask.parts, why, "dn_failed")
            reply = None
        else:
            ctx = ask.qn.ctx
            if ctx.observer is not None:
                ctx.observer.on_resolution_call(ctx, ask.heard, ask.rpc, ask.request, reply)
            gone = [p for p, found in zip(ask.parts, reply.found) if not found]
            self._drop(gone, "the DN no longer holds it", "document_gone")
        ask.reply, ask.answered = reply, True

    def matched(self) -> list[list[list[pb.QueryEntry]]]:
        """Per announcement, per document: the queries it matched."""
        out: list[list[list[pb.QueryEntry]]] = [[[] for _ in h.docs] for _, h in self.heard]
        if self.step is not None:
            for p, found in enumerate(self.step.matched()):
                if not self.failed[p]:
                    g, d = self.parts[p]
                    out[g][d] = found if self.conditions is None else self.conditions.kept(p, found)
        return out

    def _condition_asks(self, step: Resolver) -> list[Ask]:
        """The last round, once: the negated terms and phrases of the entries matched that
        have any, asked where not known (cqengine.core.resolution.conditions)."""
        if self.conditions is not None:
            return []
        found = [[] if failed else f for f, failed in zip(step.matched(), self.failed)]
        self.conditions = conditions = Conditions(found, self.knows, self.filters)
        asked = {p: (ids, phrases) for p, ids, phrases in conditions.questions()}
        asks: list[Ask] = []
        for run in self._by_announcement(sorted(asked)):
            ask = self._ask(
                run,
                "TermDialogue",
                request_of([self._key(p) for p in run], [asked[p] for p in run]),
            )
            ask.conditions = True
            ctx = ask.qn.ctx
            ctx.count("asked:negated", sum(len(asked[p][0]) for p in run))
            ctx.count("asked:phrases", sum(len(asked[p][1]) for p in run))
            asks.append(ask)
        self._round = asks
        return asks

    def _learn(self) -> None:
        """What the last round's answers decide, for every part at once."""
        round_, self._round = self._round, []
        if not round_:
            return
        if not all(ask.answered for ask in round_):
            raise RuntimeError("a resolution went on with requests of its round unanswered")
        step = self._resolver()
        if round_[0].conditions:
            for ask in round_:
                if ask.reply is not None:
                    self._conditions_answered(ask)
            return
        if round_[0].rpc == "GetBloom":
            step.rule_out(step.passes(self._received(round_)))
            return
        vectors = [
            bytes((len(ask.request.ids) + 7) // 8) if ask.reply is None else ask.reply.present
            for ask in round_
        ]
        counts = [len(ask.request.ids) for ask in round_]
        step.learn(np.concatenate([at for _, at, _ in self._asked]), unpack_many(vectors, counts))
        self._count_candidates(step)  # merged queries split: their members are candidates too

    def _resolver(self) -> Resolver:
        """The resolver, for what answers to requests do: a request is of a part, and a
        resolution with parts has one."""
        if self.step is None:
            raise RuntimeError("a resolution of no documents was answered")
        return self.step

    def _count_candidates(self, step: Resolver) -> None:
        """Count each part's candidates not counted yet."""
        more = step.candidates - self._counted
        for p in np.flatnonzero(more).tolist():
            self.heard[self.parts[p][0]][0].ctx.count("candidates", int(more[p]))
        self._counted += more

    def _conditions_answered(self, ask: Ask) -> None:
        """A conditions round's reply: each part's share of its ids and phrases."""
        req, reply = ask.request, ask.reply
        conditions = self.conditions
        assert conditions is not None  # made before the round that asks of them
        n, phrases = questions_in(req)
        present = unpack_many([reply.present], [n]) if n else np.zeros(0, dtype=bool)
        found = unpack_many([reply.phrases], [phrases]) if phrases else np.zeros(0, dtype=bool)
        at = pat = 0
        for p in ask.parts:
            a = conditions.asking[p]
            k, m = len(a.ids), len(a.phrases)
            conditions.answer(p, present[at : at + k].tolist(), found[pat : pat + m].tolist())
            at, pat = at + k, pat + m

    def _received(self, round_: list[Ask]) -> list[tuple[int, BloomFilter | None]]:
        """Each asking part's filter as its DN sent it; None where none came (its DN failed:
        every term it does not know present is absent)."""
        filters: list[tuple[int, BloomFilter | None]] = []
        for ask in round_:
            reply, at = ask.reply, 0
            s = ask.qn.ctx.settings  # the ring's: the filter's bits and hashes
            width = s.bloom_bits // 8
            for i, p in enumerate(ask.parts):
                got = reply is not None and reply.found[i] and len(reply.bits) >= at + width
                bits = reply.bits[at : at + width] if got else b""
                filters.append(
                    (p, received_filter(s.bloom_bits, s.bloom_hashes, bits) if got else None)
                )
                self.filters[p] = filters[-1][1]
                at += width if got else 0
        return filters

    def _ask(self, ps: list[int], rpc: str, request: object) -> Ask:
        qn, h = self.heard[self.parts[ps[0]][0]]
        return Ask(qn, h, ps, rpc, request)

    def _key(self, p: int) -> int:
        g, d = self.parts[p]
        return self.heard[g][1].docs[d].key

    def _by_announcement(
        self, items: Iterable[int], part: Callable[[int], int] = lambda p: p
    ) -> list[list[int]]:
        """Items (parts, or what names a part: `part`), in order, in runs of one
        announcement each (a part's are consecutive)."""
        return [list(run) for _, run in groupby(items, key=lambda i: self.parts[part(i)][0])]

    def _drop(self, ps: list[int], why: str, reason: str) -> None:
        """These parts' DN failed them: their queries' alerts are lost, counted."""
        if not ps:
            return
        step = self._resolver()
        pending, found = step.pending(), step.matched()
        for p in ps:
            if not self.failed[p]:
                self.failed[p] = True
                g, d = self.parts[p]
                qn, h = self.heard[g]
                qn.ctx.count(f"dropped:{reason}", int(pending[p]) + len(found[p]))
                log.warning(
                    "resolution of document %016x with %s failed: %s",
                    h.docs[d].key,
                    h.dn.address,
                    why,
                )
