"""Subscriptions at their home node, with their mailboxes of alerts not yet acknowledged.

A home numbers its subscriptions' alerts (0, 1, 2, ... with no gap), and an alert leaves its
mailbox only once the subscriber has acknowledged it. With replicas (Settings.replicas > 1)
a subscription lives under a ring key, its *home key*: the node that owns the key serves it,
and the owner's next R-1 successors hold copies (`HomeRecord`s) of its record and mailbox.
The serving home alone numbers alerts; it shows an alert on a stream only once every
replica holds it and all before it, so whichever replica serves next knows every number a
subscriber may have seen, and numbers on from there.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, islice
from typing import NoReturn, Protocol, TypeVar, overload

from cqengine.core.basis import limits
from cqengine.proto import cqengine_pb2 as pb

AlertDoc = tuple[str, str, str]  # what an alert says of its document: docno, title, snippet
# alerts a document at a time: the document, the subscriptions it alerts, each one's number
Runs = list[tuple[AlertDoc, list[int], list[int]]]


@lru_cache(maxsize=1 << 16)
def cost(doc: AlertDoc) -> int:
    """What an alert weighs in its mailbox: its document's docno, title and snippet.
    Weighed once per document, not once per alert: a document alerts hundreds of
    subscriptions, each weighed again in every copy of its mailbox as it enters and leaves."""
    return sum(len(s.encode("utf-8")) for s in doc)


def token_hash(token: str) -> bytes:
    """What a home keeps of a subscription's token: enough to check it, not to forge it."""
    return hashlib.sha256(token.encode()).digest()


@dataclass
class Mailbox:
    """A subscription's undelivered alerts, as the documents they are of (one tuple per
    document, shared by every subscription it alerts); each docno enters once, ever. Alerts
    are numbered in the order they enter: queue[i] is alert number first + i. Those numbered
    from `shown` on are not yet on every replica: a stream does not send them yet."""

    limit: int = limits.MAILBOX  # alerts not yet acknowledged
    queue: deque[AlertDoc] = field(default_factory=deque)
    size: int = 0  # bytes of the alerts in the queue (cost)
    seen: set[str] = field(default_factory=set)
    dropped: int = 0
    first: int = 0
    pending: set[int] = field(default_factory=set)  # numbers being copied to the replicas
    # the latest acknowledged, which copies of the mailbox carry: a DN sending one of
    # them again (after a failure) finds it seen wherever the subscription is served then
    acked: deque[str] = field(default_factory=lambda: deque(maxlen=limits.SEEN_KEPT))
    # numbers acknowledged before this copy held their alerts (an acknowledgement's copy
    # overtook them, or they were lost): their documents are not known seen here until
    # the alerts come late or a whole record's memory does (reconciliation sends it)
    unheld: set[int] = field(default_factory=set)
    # alerts copied here before some numbered earlier (a home's copies to one replica may
    # pass each other): they join on when those come, instead of a whole record asked for
    early: dict[int, AlertDoc] = field(default_factory=dict)
    # at the serving home, while copies of acknowledgements are on their way: the first
    # number every replica has been told of (None: first, nothing on its way)
    told: int | None = None

    def offer(self, doc: AlertDoc, limit_bytes: int = limits.MAILBOX_BYTES) -> bool:
        """A new alert (of a document not seen before); the oldest go, counted as dropped,
        while the mailbox would hold more than `limit` alerts or `limit_bytes` bytes."""
        if doc[0] in self.seen:
            return False
        self.seen.add(doc[0])
        size = cost(doc)
        while self.queue and (len(self.queue) >= self.limit or self.size + size > limit_bytes):
            dropped = self.queue.popleft()
            self.size -= cost(dropped)
            self._remember(dropped[0])  # known seen as long as an acknowledged one: no longer
            self.first += 1
            self.dropped += 1
        self.queue.append(doc)
        self.size += size
        return True

    def join(self, doc: AlertDoc, size: int) -> None:
        """An alert numbered next, copied from another copy of this mailbox (`size`: its
        cost): kept, and its document known seen."""
        self.queue.append(doc)
        self.size += size
        self.seen.add(doc[0])

    def extend(self, docs: Iterable[AlertDoc]) -> None:
        """Alerts numbered on from `next` (as they were numbered elsewhere)."""
        for doc in docs:
            self.queue.append(doc)
            self.size += cost(doc)

    def take(self) -> list[AlertDoc]:
        out = list(self.queue)
        self.pop(len(out))
        return out

    def pop(self, n: int) -> None:
        """The first n alerts left (the subscriber acknowledged them), remembered as
        `_remember` does one by one. Every copy of a mailbox pops each alert it held: in
        one step for the usual one, and a few list operations for many."""
        queue, acked = self.queue, self.acked
        if n == 1:
            doc = queue.popleft()
            self.size -= cost(doc)
            if len(acked) == limits.SEEN_KEPT:
                self.seen.discard(acked[0])  # pushed out by the append (maxlen)
            acked.append(doc[0])
        elif n > 1:
            if n == len(queue):  # all of them: the usual at a replica folding its copies
                docs = list(queue)
                queue.clear()
            else:
                docs = [queue.popleft() for _ in range(n)]
            self.size -= sum(map(cost, docs))
            self._remember_all([doc[0] for doc in docs])
        self.first += n

    def passed(self, docnos: list[str]) -> None:
        """Alerts numbered on from next, of these documents, acknowledged before this copy
        of an empty mailbox held them (a replica folding copies it kept as columns): they
        are remembered as pop would leave them, never queued."""
        self.seen.update(docnos)
        self._remember_all(docnos)
        self.first += len(docnos)

    def _remember_all(self, docnos: list[str]) -> None:
        """Documents acknowledged, in order of number, remembered as `_remember` does one
        by one: those pushed out of the memory (the oldest of both) are no longer seen."""
        acked = self.acked
        over = len(acked) + len(docnos) - limits.SEEN_KEPT
        if over > 0:
            self.seen.difference_update(islice(chain(acked, docnos), over))
        acked.extend(docnos)

    def saw(self, docnos: Iterable[str], first: int | None = None) -> None:
        """Another copy's latest acknowledged, numbered up to `first` - 1 (None: as mine
        are): documents this one must not take again. Of theirs and mine the latest
        SEEN_KEPT by number stay: a copy behind this one must not push out of its memory
        what it acknowledged lately (a DN announcing a batch again would alert it twice)."""
        theirs = [d for d in docnos]
        if all(d in self.seen for d in theirs):
            return
        end = self.first if first is None else first
        number = {d: at for at, d in enumerate(self.acked, self.first - len(self.acked))}
        for at, d in enumerate(theirs, end - len(theirs)):
            number[d] = max(at, number.get(d, at))
        kept = sorted(number, key=number.__getitem__)[-limits.SEEN_KEPT :]
        waiting = {doc[0] for doc in self.queue}
        self.seen -= set(self.acked) - set(kept) - waiting
        self.seen.update(kept)
        self.acked = deque(kept, maxlen=limits.SEEN_KEPT)

    def _remember(self, docno: str) -> None:
        """An acknowledged document, among the latest SEEN_KEPT known seen (no more: a
        mailbox's memory stays bounded however long it lives)."""
        if len(self.acked) == limits.SEEN_KEPT:
            self.seen.discard(self.acked.popleft())
        self.acked.append(docno)

    @property
    def next(self) -> int:
        """The number the next alert will get."""
        return self.first + len(self.queue)

    @property
    def shown(self) -> int:
        """The number of the first alert a stream may not send yet (not on every replica)."""
        return min(self.pending) if self.pending else self.next

    @property
    def settled(self) -> tuple[int, int]:
        """(first, next) as every replica holds them unless a copy was lost: without the
        acknowledgements and the alerts whose copies are on their way."""
        return (self.first if self.told is None else min(self.first, self.told)), self.shown

    def alerts(self, start: int, end: int) -> list[AlertDoc]:
        """The alerts numbered start .. end - 1 that are still here."""
        start, end = max(start, self.first), min(end, self.next)
        if end <= start:
            return []
        if end == self.next:  # the newest (just taken): from the right, not walked to
            return list(islice(reversed(self.queue), end - start))[::-1]
        return list(islice(self.queue, start - self.first, end - self.first))

    def acknowledge(self, first: int) -> bool:
        """Every alert numbered below `first` is acknowledged: they leave; whether any did."""
        have = self.first
        if first <= have:
            return False
        held = len(self.queue)
        if first - have <= held:
            self.pop(first - have)
        else:  # past the end: alerts this copy never held were acknowledged
            self.pop(held)
            self.unheld.update(range(max(have + held, first - limits.SEEN_KEPT), first))
            self.first = first
        if self.unheld:  # only the latest SEEN_KEPT acknowledged are remembered anyway
            self.unheld = {seq for seq in self.unheld if seq >= first - limits.SEEN_KEPT}
        if self.early:
            self._join_early()
        return True

    def remembered(self, first: int) -> None:
        """A whole record's memory of what was acknowledged below `first` came: no number
        below it is unheld any more."""
        if self.unheld:
            self.unheld = {seq for seq in self.unheld if seq >= first}

    def put(self, start: int, docs: Sequence[AlertDoc], authority: bool = False) -> int | None:
        """Alerts numbered from `start`, from another copy of this mailbox: None when they
        join on (any this copy has already must agree; where they do not, the serving
        home's numbering wins: `authority` says this copy is it), else the number this
        copy lacks the alerts from (a gap before them, when more than EARLY_ALERTS
        wait for it)."""
        if start > self.next:
            if len(self.early) + len(docs) > limits.EARLY_ALERTS:
                return self.next
            self.early.update(zip(range(start, start + len(docs)), docs))
            return None
        for i, doc in enumerate(docs):
            seq = start + i
            if seq < self.first:
                self._came_late(seq, doc[0])
                continue
            if seq < self.next:
                at = seq - self.first
                if self.queue[at] != doc and not authority:
                    self.size += cost(doc) - cost(self.queue[at])
                    self.queue[at] = doc
                    self.seen.add(doc[0])
                continue
            self.join(doc, cost(doc))
        if self.early:
            self._join_early()
        return None

    def _join_early(self) -> None:
        """Alerts that came early and are next in number join on; those acknowledged
        meanwhile are known seen (as alerts acknowledged before they came are)."""
        while self.next in self.early:
            doc = self.early.pop(self.next)
            self.join(doc, cost(doc))
        for seq in [seq for seq in self.early if seq < self.next]:
            self._came_late(seq, self.early.pop(seq)[0])

    def _came_late(self, seq: int, docno: str) -> None:
        """An alert acknowledged before it came: known seen from now on, if its number
        was unheld here."""
        if seq in self.unheld:
            self.unheld.discard(seq)
            self.seen.add(docno)
            self._remember(docno)


class CopyColumns(Protocol):
    """A replica's copies kept as columns (cqengine.core.alerts.copies.Copies), as a
    subscription whose copies are kept there reads its mailbox."""

    def release(self, sub: Subscription) -> None:
        """Its copies into its mailbox, and no more kept for it."""
        ...


class MailboxTable(Protocol):
    """The table of columns a home on the log keeps its mailboxes in
    (cqengine.core.homelog.table.AlertTable), as a subscription kept there, and a stream
    sending its alerts, read it."""

    def release(self, sub: Subscription) -> None:
        """Its mailbox folded out of the table, and no longer kept there."""
        ...

    def bounds(self, sub: Subscription) -> tuple[int, int]:
        """Its mailbox's first number and its next."""
        ...

    def waiting(self, sub: Subscription, start: int, end: int) -> list[AlertDoc]:
        """Its alerts numbered start .. end - 1 still waiting."""
        ...

    def remembered(self, sub: Subscription) -> list[str]:
        """The documents of its latest acknowledged alerts, oldest first."""
        ...

    def message(self, waiting: Sequence[tuple[Subscription, int, int]]) -> pb.AlertBatch:
        """The alerts waiting (subscription, start, count) as a stream's message."""
        ...


@dataclass
class Subscription:
    id: int
    token_hash: bytes
    terms: list[str]
    index_id: int
    index_term: str
    box: Mailbox = field(default_factory=Mailbox)  # read it as `mailbox`
    key: int = 0  # its home key (replicas > 1); 0: it stays at the node it subscribed through
    # a replica's copies of its alerts kept as columns, not yet in its mailbox
    # (cqengine.core.alerts.copies), and its place there
    copies: CopyColumns | None = field(default=None, repr=False, compare=False)
    at: int = field(default=-1, repr=False, compare=False)
    # at a home on the log: the table of columns its mailbox is kept in, while it is
    # (cqengine.core.homelog.table)
    table: MailboxTable | None = field(default=None, repr=False, compare=False)
    # its query in the query language, and where each alternative is indexed; "" and ():
    # a conjunction of `terms`, indexed under `index_id` (cqengine.core.terms.queries)
    query: str = ""
    index_ids: tuple[int, ...] = ()

    def indexed(self) -> list[tuple[int, int]]:
        """(alternative, its index key) of each of its entries."""
        return list(enumerate(self.index_ids)) if self.index_ids else [(0, self.index_id)]

    @property
    def mailbox(self) -> Mailbox:
        """Its mailbox, with every copy kept for it folded in first."""
        if self.copies is not None:
            self.copies.release(self)
        if self.table is not None:
            self.table.release(self)
        return self.box

    def span(self) -> tuple[int, int, int]:
        """Its mailbox's first number, the first a stream may not send yet, and its next:
        read from its table, if kept in one, not folded out of it."""
        if self.table is not None:
            first, nxt = self.table.bounds(self)
            return first, nxt, nxt
        box = self.mailbox
        return box.first, box.shown, box.next

    def alerts(self, start: int, end: int) -> list[AlertDoc]:
        """Its alerts numbered start .. end - 1 still waiting (Mailbox.alerts), read from
        its table, if kept in one, not folded out of it."""
        if self.table is not None:
            return self.table.waiting(self, start, end)
        return self.mailbox.alerts(start, end)

    def remembered(self) -> list[str]:
        """The documents of its latest acknowledged alerts, oldest first (Mailbox.acked),
        read from its table, if kept in one, not folded out of it."""
        if self.table is not None:
            return self.table.remembered(self)
        return list(self.mailbox.acked)


_Default = TypeVar("_Default")


class Subscriptions(dict[int, Subscription]):
    """A node's subscriptions by id, counting their comings and goings: what is derived
    from which subscriptions are here (reconciliation's summaries by range) is kept while
    `generation` stays. A subscription's home key never changes."""

    generation = 0
    removals = 0  # subscriptions that left (or were replaced)

    def __setitem__(self, key: int, value: Subscription) -> None:
        self.generation += 1
        self._leaving(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: int) -> None:
        self.generation += 1
        self._leaving(key)
        super().__delitem__(key)

    @overload
    def pop(self, key: int, /) -> Subscription: ...
    @overload
    def pop(self, key: int, default: Subscription, /) -> Subscription: ...
    @overload
    def pop(self, key: int, default: _Default, /) -> Subscription | _Default: ...
    def pop(self, key: int, *default: object) -> object:
        self.generation += 1
        self._leaving(key)
        return super().pop(key, *default)

    def _leaving(self, key: int) -> None:
        """A subscription leaves: its copies kept as columns (if any) are folded, and no
        more copies are kept for it."""
        sub = self.get(key)
        if sub is not None:
            self.removals += 1
            if sub.copies is not None:
                sub.copies.release(sub)
            if sub.table is not None:
                sub.table.release(sub)

    def _refused(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("Subscriptions change one at a time: item assignment, del, pop")

    clear = update = setdefault = popitem = __ior__ = _refused


def home_record(
    sub: Subscription, start: int | None = None, end: int | None = None
) -> pb.HomeRecord:
    """A subscription's record with its alerts numbered start .. end - 1 (all it holds
    from the oldest not acknowledged, by default). With `start`, only the alerts (and the
    acknowledgement): for a replica that holds the record already."""
    first, _, nxt = sub.span()
    lo = first if start is None else max(start, first)
    docs = sub.alerts(lo, nxt if end is None else end)
    record = pb.HomeRecord(key=sub.key, subscription_id=sub.id, first=first, start=lo)
    if start is None:
        record.token_hash = sub.token_hash
        record.terms.extend(sub.terms)
        record.index_id = sub.index_id
        record.index_term = sub.index_term
        record.seen.extend(sub.remembered())
        record.query = sub.query
        record.index_ids.extend(sub.index_ids)
    record.docnos.extend(d[0] for d in docs)
    if any(d[1] for d in docs):
        record.titles.extend(d[1] for d in docs)
    if any(d[2] for d in docs):
        record.snippets.extend(d[2] for d in docs)
    return record


def record_alerts(record: pb.HomeRecord) -> list[AlertDoc]:
    n = len(record.docnos)
    titles = record.titles or [""] * n
    snippets = record.snippets or [""] * n
    return list(zip(record.docnos, titles, snippets))


def subscription_of(record: pb.HomeRecord) -> Subscription:
    """A replica's subscription made from a whole record (its alerts put in by the caller)."""
    return Subscription(
        record.subscription_id,
        bytes(record.token_hash),
        list(record.terms),
        record.index_id,
        record.index_term,
        Mailbox(first=record.first),
        record.key,
        query=record.query,
        index_ids=tuple(record.index_ids),
    )
