"""What an entry asks of a document besides its terms (cqengine.core.terms.queries): terms it must
not hold, phrases it must or must not hold. Settled, free of I/O, for the entries the
rounds of resolution matched (their terms all present), in one last Term Dialogue round.

A negated term is settled without asking where the QN knows it (Observations 1-2 and
Algorithm 4 tell absent ids; its runs' ids are present) and, resolving by filter, where
the DN's filter rules it out: a filter proves a term absent, never present, so a "maybe"
is asked. A negated phrase holds if one of its terms is known absent. Whether a phrase's
terms stand in a row only the DN can tell, from the document's term sequence: every
phrase left is asked. Each part (a QN's document) asks each id and phrase once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cqengine.core.resolution.knowledge import Knowledge
from cqengine.core.terms.bloom import BloomFilter
from cqengine.core.terms.queries import conditional
from cqengine.proto import cqengine_pb2 as pb

Phrase = tuple[int, ...]


@dataclass
class Asking:
    """One part's conditional entries, what is known of their ids and phrases, and the
    questions left (`ids`, `phrases`, in the order asked)."""

    entries: list[pb.QueryEntry]
    absent: set[int] = field(default_factory=set)
    present: set[int] = field(default_factory=set)
    ids: list[int] = field(default_factory=list)
    phrases: list[Phrase] = field(default_factory=list)
    found: set[Phrase] = field(default_factory=set)


class Conditions:
    """The conditions of some parts' matched entries: `asking` per part with questions
    left, `answer` for each, then `kept` per part."""

    def __init__(
        self,
        matched: Sequence[list[pb.QueryEntry]],
        knows: Sequence[Knowledge],
        filters: dict[int, BloomFilter | None],
    ) -> None:
        self.asking: dict[int, Asking] = {}
        for p, found in enumerate(matched):
            entries = [e for e in found if conditional(e)]
            if entries:  # with or without questions left: `kept` reads it
                self.asking[p] = self._known(entries, knows[p], filters.get(p))

    @staticmethod
    def _known(entries: list[pb.QueryEntry], know: Knowledge, bloom: BloomFilter | None) -> Asking:
        """What the QN knows of their ids, and what is left to ask."""
        a = Asking(entries)
        ids = sorted({y for e in entries for y in e.not_ids} | _negated_phrase_ids(entries))
        if ids:
            array = np.array(ids, dtype=np.uint64)
            absent = know.absent_in(array)
            if bloom is not None:  # what the DN's filter rules out is absent
                absent |= ~np.array([y in bloom for y in ids], dtype=bool)
            a.absent = set(array[absent].tolist())
            a.present = {y for y in ids if y in know.present}
        for e in entries:
            if _settled(e, a) is not None:
                continue
            a.ids += [y for y in e.not_ids if y not in a.absent and y not in a.present]
            for p in e.phrases:
                if not (p.negated and a.absent.intersection(p.ids)):
                    a.phrases.append(tuple(p.ids))
        a.ids = sorted(set(a.ids))
        a.phrases = list(dict.fromkeys(a.phrases))
        return a

    def answer(self, part: int, present: Sequence[bool], phrases: Sequence[bool]) -> None:
        """The DN's answers to a part's questions, in the order asked."""
        a = self.asking[part]
        for y, there in zip(a.ids, present):
            (a.present if there else a.absent).add(y)
        a.found = {p for p, there in zip(a.phrases, phrases) if there}
        a.ids, a.phrases = [], []

    def kept(self, part: int, found: list[pb.QueryEntry]) -> list[pb.QueryEntry]:
        """Of a part's matched entries, those whose conditions hold."""
        a = self.asking.get(part)
        if a is None:
            return found
        return [e for e in found if not conditional(e) or _settled(e, a, True)]

    def questions(self) -> list[tuple[int, list[int], list[Phrase]]]:
        """(part, ids, phrases) of each part with questions left."""
        return [(p, a.ids, a.phrases) for p, a in self.asking.items() if a.ids or a.phrases]


def _negated_phrase_ids(entries: list[pb.QueryEntry]) -> set[int]:
    return {y for e in entries for p in e.phrases if p.negated for y in p.ids}


def _settled(e: pb.QueryEntry, a: Asking, final: bool = False) -> bool | None:
    """Do the entry's conditions hold (None: not known yet; `final`: every question has
    its answer, so an unanswered phrase is one not found)?"""
    if any(y in a.present for y in e.not_ids):
        return False
    undecided = any(y not in a.absent for y in e.not_ids)
    for p in e.phrases:
        ids = tuple(p.ids)
        if p.negated and a.absent.intersection(ids):
            continue
        if ids in a.found:
            if p.negated:
                return False
            continue
        if final:
            if not p.negated:
                return False
            continue
        undecided = True
    return None if undecided else True


def questions_in(req: pb.DialogueRequest) -> tuple[int, int]:
    """How many of a request's ids are asked of alone (they come first), and how many
    phrases follow them."""
    return len(req.ids) - sum(req.phrase_lengths), len(req.phrase_lengths)


def request(doc_keys: list[int], asked: list[tuple[list[int], list[Phrase]]]) -> pb.DialogueRequest:
    """One Term Dialogue request for the questions of several parts of one announcement
    (their documents' keys, in order): every part's ids, then every part's phrases."""
    req = pb.DialogueRequest(doc_keys=doc_keys)
    for ids, _ in asked:
        req.ids.extend(ids)
    if len(asked) > 1:
        req.counts.extend(len(ids) for ids, _ in asked)
    for d, (_, phrases) in enumerate(asked):
        for p in phrases:
            req.ids.extend(p)
            req.phrase_lengths.append(len(p))
            req.phrase_docs.append(d)
    return req
