"""Alert batches: a DN's alerts for one home node as a message (AlertBatch), numbered by the
home as its mailboxes take them (cqengine.core.alerts.mailboxes), and read back document by
document: what a home offers its mailboxes, what a replica copies, what a stream shows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from cqengine.core.alerts.mailboxes import AlertDoc, Runs, Subscription, cost
from cqengine.proto import cqengine_pb2 as pb


def numbered_batch(alerts: Iterable[tuple[int, int, AlertDoc]]) -> pb.AlertBatch:
    """Numbered alerts ((subscription, number, document)) as one message: each document
    once with the subscriptions it alerts, each alert's number in `seqs` (a stream's
    message, and a home's copy to its replicas)."""
    by_doc: dict[AlertDoc, tuple[list[int], list[int]]] = {}
    for sub_id, seq, doc in alerts:
        subs, seqs = by_doc.setdefault(doc, ([], []))
        subs.append(sub_id)
        seqs.append(seq)
    return numbered_runs([(doc, subs, seqs) for doc, (subs, seqs) in by_doc.items()])


def numbered_runs(runs: Sequence[tuple[AlertDoc, Sequence[int], Sequence[int]]]) -> pb.AlertBatch:
    """numbered_batch, of alerts a document at a time: (document, subscriptions, numbers)."""
    batch = alert_batch([(doc, subs) for doc, subs, _ in runs])
    for _, _, seqs in runs:
        batch.seqs.extend(seqs)
    return batch


def batch_documents(batch: pb.AlertBatch) -> list[AlertDoc]:
    """An alert batch's documents, as its alerts say them (no titles or snippets sent:
    empty ones)."""
    n = len(batch.docnos)
    titles, snippets = batch.titles or [""] * n, batch.snippets or [""] * n
    return list(zip(batch.docnos, titles, snippets))


class Offered(NamedTuple):
    """What an alert batch offered to mailboxes numbered (`offer_batch`)."""

    runs: Runs  # the alerts numbered, a document at a time
    repeated: int  # alerts of documents their mailboxes had already
    dropped: int  # older alerts the mailboxes' limits pushed out for them
    missing: list[int]  # subscriptions it names that are not there


def offer_batch(
    batch: pb.AlertBatch, subscriptions: Mapping[int, Subscription], limit_bytes: int
) -> Offered:
    """A DN's alert batch into the mailboxes of these subscriptions, a document at a time
    in the batch's order, each of its subscriptions in order: the one rule that numbers
    alerts, at a home that copies them and at any member deriving a home's log."""
    ids = list(batch.subscription_ids)
    counts = batch.counts or [len(ids)]
    get = subscriptions.get
    runs: Runs = []
    repeated = dropped = at = 0
    missing = []
    for doc, n in zip(batch_documents(batch), counts):
        # Mailbox.offer inlined where no older alert must go (nearly every alert): this
        # loop runs once per alert, hundreds of times per document
        docno, size = doc[0], cost(doc)
        took, numbers = [], []
        for sub_id in ids[at : at + n]:
            sub = get(sub_id)
            if sub is None:
                missing.append(sub_id)
                continue
            box = sub.mailbox
            seen, queue = box.seen, box.queue
            if docno in seen:
                repeated += 1
                continue
            if len(queue) < box.limit and box.size + size <= limit_bytes:
                seen.add(docno)
                queue.append(doc)
                box.size += size
            else:  # older alerts go first, counted
                before = box.dropped
                box.offer(doc, limit_bytes)
                dropped += box.dropped - before
            took.append(sub_id)
            numbers.append(box.first + len(queue) - 1)
        if took:
            runs.append((doc, took, numbers))
        at += n
    return Offered(runs, repeated, dropped, missing)


def numbered_documents(
    batch: pb.AlertBatch,
) -> Iterator[tuple[AlertDoc, Sequence[int], Sequence[int]]]:
    """A numbered batch's documents, each with the subscriptions it alerts and their
    alerts' numbers."""
    counts = batch.counts or [len(batch.subscription_ids)]
    subs, seqs = batch.subscription_ids, batch.seqs
    at = 0
    for doc, c in zip(batch_documents(batch), counts):
        yield doc, subs[at : at + c], seqs[at : at + c]
        at += c


def numbered_alerts(batch: pb.AlertBatch) -> dict[int, list[tuple[int, AlertDoc]]]:
    """A numbered batch's alerts by subscription: (number, document), in order of number."""
    out: dict[int, list[tuple[int, AlertDoc]]] = {}
    for doc, subs, seqs in numbered_documents(batch):
        for sub_id, seq in zip(subs, seqs):
            out.setdefault(sub_id, []).append((seq, doc))
    for alerts in out.values():
        if len(alerts) > 1:  # most subscriptions have one alert in a batch
            alerts.sort(key=lambda a: a[0])
    return out


def alert_batch(docs: Sequence[tuple[AlertDoc, Sequence[int]]]) -> pb.AlertBatch:
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


def alerts_taken(sub: Subscription, before: int) -> list[tuple[int, int, AlertDoc]]:
    """The alerts a copy of a mailbox took, numbered from `before` (the journal's form)."""
    box = sub.mailbox
    numbers = range(before, box.next)
    return [(sub.id, seq, doc) for seq, doc in zip(numbers, box.alerts(before, box.next))]


def runs_of(alerts: list[tuple[int, AlertDoc]]) -> Iterator[tuple[int, list[AlertDoc]]]:
    """Numbered alerts, in order of number, as runs of consecutive numbers: (first, docs)."""
    start, docs = alerts[0][0], [alerts[0][1]]
    for seq, doc in alerts[1:]:
        if seq != start + len(docs):
            yield start, docs
            start, docs = seq, []
        docs.append(doc)
    yield start, docs
