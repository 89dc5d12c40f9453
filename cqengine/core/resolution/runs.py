"""Runs: what an announcement carries of a document, and how each hop splits them (paper
section 5, Algorithms 1 and 3), as pure functions.

An announcement carries *runs*: contiguous stretches of the document's term ids in ring
order, each with the document ids just before (`prev`) and just after (`next`) it, and up
to k piggybacked ids that follow its last id in increasing order (`succ`). The publishing
node starts from one run holding every id; each hop splits runs by next hop (Algorithms 1
and 3) and a sub-run inherits its neighbours as prev/next. What a QN then knows of the
document from its runs is cqengine.core.resolution.knowledge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

import numpy as np

from chord.protocol.routing import NodeRef
from cqengine.core.state.postings import FEW
from cqengine.core.terms import presence
from cqengine.proto import cqengine_pb2 as pb


@dataclass
class Run:
    ids: list[int]  # ring order from the first id; wraps past zero at most once
    prev: int
    next: int
    succ: list[int] = field(default_factory=list)

    @classmethod
    def whole(cls, sorted_ids: Sequence[int]) -> Run:
        """The document as one run: what the publishing node starts from."""
        return cls(list(sorted_ids), prev=sorted_ids[-1], next=sorted_ids[0])

    @classmethod
    def from_pb(cls, r: pb.Run) -> Run:
        return cls(list(r.ids), r.prev, r.next, list(r.succ))


@dataclass
class Announced:
    """A document of an announcement as a node holds it: the DN's key for it, its largest
    id (Observation 2) and its runs that reached the node."""

    key: int
    max_id: int
    runs: list[Run]
    # its term-presence header as the DN encoded it (cqengine.core.terms.presence.encode_one);
    # None: no header came
    presence: list[int] | None = None

    def local_ids(self) -> list[int]:
        """The ids of its runs here, ascending: the keys whose lists a QN consults."""
        return sorted(set(chain.from_iterable(run.ids for run in self.runs)))


@dataclass
class Heard:
    """An announcement as a QN holds it: its DN and, for each of its documents with runs
    in the QN's region, those runs."""

    dn: NodeRef
    docs: list[Announced]
    batch: int = 0  # the DN's name of the batch, and the share its report brings back
    share: int = 0  # (0: the DN counts no reports, the paper's protocol)


def announcement(
    dn: str,
    hops: int,
    docs: Iterable[tuple[int, int, Iterable[Run]]],
    headers: Sequence[Sequence[int]] | None = None,
) -> pb.Announcement:
    """The message carrying these documents' runs, (key, largest id, runs) each: the runs
    added in place, not built and then copied; with `headers`, each document's term-presence
    header as its DN encoded it."""
    out = pb.Announcement(dn=dn, hops=hops)
    add = out.runs.add
    for i, (key, max_id, runs) in enumerate(docs):
        out.doc_keys.append(key)
        out.max_ids.append(max_id)
        for r in runs:
            add(ids=r.ids, prev=r.prev, next=r.next, succ=r.succ, doc=i)
    if headers is not None:
        out.presence.extend(chain.from_iterable(headers))
    return out


def announced(msg: pb.Announcement) -> list[Announced]:
    """The documents of an announcement received, each with its runs (and its header)."""
    if len(msg.doc_keys) != len(msg.max_ids):
        raise ValueError(
            f"an announcement of {len(msg.doc_keys)} documents with {len(msg.max_ids)} largest ids"
        )
    docs = [Announced(key, max_id, []) for key, max_id in zip(msg.doc_keys, msg.max_ids)]
    for r in msg.runs:
        if r.doc >= len(docs) or not r.ids:
            raise ValueError(f"a run of document {r.doc} of {len(docs)} with {len(r.ids)} ids")
        docs[r.doc].runs.append(Run.from_pb(r))
    if msg.presence:
        for doc, header in zip(docs, presence.split_docs(msg.presence, len(docs))):
            doc.presence = header
    return docs


def successors(ids: Sequence[int], j: int, tail: Sequence[int], k: int) -> list[int]:
    """Up to k document ids that follow ids[j] in increasing order (none past the largest)."""
    out: list[int] = []
    last = ids[j]
    for y in ids[j + 1 :]:
        if len(out) == k or y <= last:  # y <= last: wrapped past the largest id
            return out
        out.append(y)
        last = y
    return out + list(tail[: k - len(out)])


T = TypeVar("T")
H = TypeVar("H", bound=Hashable)  # a next hop (a node, or None for mine; anything in tests)
# ids (a list, or an array) -> each one's place among the hops (a list, or an array), the hops
Route = Callable[[np.ndarray | list[int]], tuple[np.ndarray | Sequence[int], Sequence[H]]]


def split(
    run: Run, places: np.ndarray | Sequence[int], hops: Sequence[H], k: int
) -> list[tuple[H, Run]]:
    """Cut a run where the next hop of consecutive ids changes (ids[i]'s is hops[places[i]])."""
    ids, n = run.ids, len(run.ids)
    if isinstance(places, np.ndarray):
        cuts = (np.flatnonzero(places[1:] != places[:-1]) + 1).tolist()
    else:
        cuts = [i for i in range(1, n) if places[i] != places[i - 1]]
    out: list[tuple[H, Run]] = []
    for start, end in zip([0, *cuts], [*cuts, n]):
        prev = ids[start - 1] if start > 0 else run.prev
        nxt = ids[end] if end < n else run.next
        succ = successors(ids, end - 1, run.succ, k) if k else []
        out.append((hops[places[start]], Run(ids[start:end], prev, nxt, succ)))
    return out


def route_runs(
    runs: Sequence[tuple[T, Run]], route: Route[H], k: int
) -> dict[H, dict[T, list[Run]]]:
    """Algorithms 1 and 3 over the runs of a batch's documents (each with its document),
    every id routed at once: per next hop (None: mine), each document's sub-runs."""
    if not runs:
        return {}
    lengths = [len(run.ids) for _, run in runs]
    ids, total = chain.from_iterable(run.ids for _, run in runs), sum(lengths)
    # a few ids are routed one by one: an array's set-up would cost more (deep in the tree)
    places, hops = route(
        list(ids) if total <= FEW else np.fromiter(ids, dtype=np.uint64, count=total)
    )
    out: dict[H, dict[T, list[Run]]] = {}
    at = 0
    for (doc, run), n in zip(runs, lengths):
        for hop, sub in split(run, places[at : at + n], hops, k):
            out.setdefault(hop, {}).setdefault(doc, []).append(sub)
        at += n
    return out


def group_runs(runs: Iterable[Run], route: Route[H], k: int) -> dict[H, list[Run]]:
    """route_runs for one document's runs: its sub-runs per next hop (None: mine)."""
    return {hop: by_doc[0] for hop, by_doc in route_runs([(0, r) for r in runs], route, k).items()}


def per_id(dest: Callable[[int], H]) -> Route[H]:
    """A route from a rule for one id at a time."""

    def route(ids: np.ndarray | list[int]) -> tuple[list[int], list[H]]:
        dests = [dest(x) for x in (ids.tolist() if isinstance(ids, np.ndarray) else ids)]
        hops = list(dict.fromkeys(dests))
        place = {h: i for i, h in enumerate(hops)}
        return [place[d] for d in dests], hops

    return route
