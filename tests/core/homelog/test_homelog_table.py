"""A home key's mailboxes as columns (cqengine.core.homelog.table) against the per-alert
path, kept here as the oracle: `offer_batch` on `Mailbox`es. Driven with the same entries,
the two number every alert alike, count the same repeats and drops, and leave the same
mailboxes, whether read through the table (span, alerts, memory, a stream's message) or
folded out of it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cqengine.core.alerts.batches import alert_batch, numbered_alerts, numbered_batch, offer_batch
from cqengine.core.alerts.mailboxes import Mailbox, Subscription, Subscriptions
from cqengine.core.basis import limits
from cqengine.core.homelog import table as table_module
from cqengine.core.homelog.derive import Derived
from cqengine.core.homelog.table import AlertTable
from cqengine.proto import cqengine_pb2 as pb

SEEN = 3  # SEEN_KEPT, small: memories fill and forget often
BOX = 4  # a mailbox's alerts at most, small: mailboxes reach it often
LIMIT_BYTES = 12  # a document here weighs 2 to 5 bytes
SUBS = list(range(1, 8))
DOCNOS = [f"d{i}" for i in range(10)] + ["long"]  # few: documents come again


def subscription(sub_id: int, box: int = BOX) -> Subscription:
    return Subscription(sub_id, b"h", ["t"], 1, "t", Mailbox(limit=box), key=7)


run_of_a_document = st.tuples(
    st.sampled_from(DOCNOS), st.lists(st.sampled_from([*SUBS, 99]), max_size=5)
)
operation = st.one_of(
    st.tuples(st.just("subscribe"), st.sampled_from(SUBS)),
    st.tuples(st.just("unsubscribe"), st.sampled_from(SUBS)),
    # a DN's batch: each document once, as a DN sends them, or now and then one twice
    st.tuples(
        st.just("deliver"),
        st.lists(run_of_a_document, min_size=1, max_size=4, unique_by=lambda run: run[0]),
    ),
    st.tuples(
        st.just("deliver"),
        st.lists(run_of_a_document, min_size=1, max_size=4, unique_by=lambda run: run[0]),
    ),
    st.tuples(st.just("deliver"), st.lists(run_of_a_document, min_size=1, max_size=4)),
    st.tuples(st.just("ack"), st.lists(st.tuples(st.sampled_from(SUBS), st.floats(0, 1.2)))),
    st.tuples(st.just("stream"), st.lists(st.tuples(st.sampled_from(SUBS), st.floats(0, 1)))),
    st.tuples(st.just("read"), st.sampled_from(SUBS)),  # someone folds a mailbox out
)


def view(sub: Subscription) -> tuple:
    """A mailbox as the table shows it without folding it."""
    first, shown, nxt = sub.span()
    return first, shown, nxt, sub.alerts(first, nxt), sub.remembered()


def whole(sub: Subscription) -> tuple:
    """A mailbox, folded: everything that decides a number."""
    b = sub.mailbox
    return b.first, b.next, list(b.queue), sorted(b.seen), list(b.acked), b.dropped, b.size


def run(ops: list, alerts: int = BOX, limit_bytes: int = LIMIT_BYTES) -> None:
    ops = [("subscribe", s) for s in SUBS] + ops  # most entries find their subscriptions
    oracle: dict[int, Subscription] = {}
    subs = Subscriptions()
    table = AlertTable(subs, limit_bytes)
    for op in ops:
        if op[0] == "subscribe" and op[1] not in oracle:
            oracle[op[1]] = subscription(op[1], alerts)
            subs[op[1]] = subscription(op[1], alerts)
        elif op[0] == "unsubscribe" and op[1] in oracle:
            del oracle[op[1]]
            table.forget(op[1])
            del subs[op[1]]
        elif op[0] == "deliver":
            batch = alert_batch([((docno, "", ""), ids) for docno, ids in op[1]])
            expected = offer_batch(batch, oracle, limit_bytes)
            assert table.offer(batch) == expected
        elif op[0] == "ack":
            ids, firsts = [], []
            for sub_id, share in op[1]:
                if sub_id in oracle:
                    box = oracle[sub_id].mailbox
                    ids.append(sub_id)
                    firsts.append(box.first + round(share * (box.next - box.first)))
            for sub_id, first in zip(ids, firsts):
                oracle[sub_id].mailbox.acknowledge(first)
            table.acknowledge(ids, firsts)
        elif op[0] == "stream":
            stream_message(table, oracle, subs, op[1])
        elif op[0] == "read" and op[1] in oracle:
            assert whole(subs[op[1]]) == whole(oracle[op[1]])
        for sub_id, sub in oracle.items():
            box = sub.mailbox
            assert view(subs[sub_id]) == (
                box.first,
                box.shown,
                box.next,
                box.alerts(box.first, box.next),
                list(box.acked),
            )
    for sub_id, sub in oracle.items():
        assert whole(subs[sub_id]) == whole(sub)


def stream_message(table: AlertTable, oracle, subs, wanted) -> None:
    """A stream's message masked out of the columns says what the mailboxes one by one
    say, each subscription's alerts in order of number."""
    waiting = []
    for sub_id, share in dict(wanted).items():
        sub = subs.get(sub_id)
        if sub is None or sub.table is not table:
            continue
        first, _, nxt = sub.span()
        start = first + int(share * (nxt - first))
        if nxt > start:
            waiting.append((sub, start, nxt - start))
    if not waiting:
        return
    got = table.message(waiting)
    expected = numbered_batch(
        (sub.id, start + i, doc)
        for sub, start, n in waiting
        for i, doc in enumerate(oracle[sub.id].mailbox.alerts(start, start + n))
    )
    assert numbered_alerts(got) == numbered_alerts(expected)
    seen: dict[int, int] = {}
    for _doc, ids, seqs in zip(got.docnos, *_by_doc(got)):
        for sub_id, seq in zip(ids, seqs):
            assert seen.get(sub_id, -1) < seq, (sub_id, seq)  # in order of number
            seen[sub_id] = seq


def _by_doc(batch: pb.AlertBatch):
    counts = batch.counts or [len(batch.subscription_ids)]
    ids, seqs, at = [], [], 0
    for c in counts:
        ids.append(batch.subscription_ids[at : at + c])
        seqs.append(batch.seqs[at : at + c])
        at += c
    return ids, seqs


@hsettings(max_examples=400, deadline=None)
@given(st.lists(operation, min_size=10, max_size=60), st.booleans())
def test_the_table_numbers_and_keeps_exactly_as_the_mailboxes_one_by_one(ops, roomy):
    """`roomy`: mailboxes far from their limits, nearly every row numbered in the
    columns; else near them, rows leaving the table and joining it again."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limits, "SEEN_KEPT", SEEN)
        mp.setattr(table_module, "SWEEP_SLACK", 1)  # the columns swept often
        run(ops, *((1000, 1 << 20) if roomy else (BOX, LIMIT_BYTES)))


@hsettings(max_examples=100, deadline=None)
@given(st.lists(operation, max_size=50), st.integers(0, 60))
def test_a_checkpoint_read_from_the_table_restores_what_the_mailboxes_held(ops, at):
    """A checkpoint made while the mailboxes are kept as columns restores, on a member,
    the mailboxes the per-alert path would have left (and so numbers on alike)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limits, "SEEN_KEPT", SEEN)
        mp.setattr(table_module, "SWEEP_SLACK", 1)
        leader, oracle = Derived(LIMIT_BYTES), {}
        ops = [("subscribe", s) for s in SUBS] + ops
        for position, op in enumerate(ops, 1):
            e = _entry(op, oracle)
            leader.apply(position, e)
            if op[0] == "deliver":
                offer_batch(pb.AlertBatch.FromString(e.data), oracle, LIMIT_BYTES)
            if position == at:
                break
        saved = leader.checkpoint().SerializeToString()
        member = Derived.restore(pb.LogCheckpoint.FromString(saved), LIMIT_BYTES)
        assert {s: whole(sub) for s, sub in member.subscriptions.items()} == {
            s: whole(sub)[:5] + (0, whole(sub)[6]) for s, sub in oracle.items()
        }


def _entry(op, oracle) -> pb.LogEntry:
    """A log entry doing what `op` does (an acknowledgement or a stream: one to the
    middle of each mailbox), done to the oracle's mailboxes but deliveries."""
    if op[0] == "subscribe":
        oracle.setdefault(op[1], Subscription(op[1], b"h", ["t"], 1, "t", key=7))
        data = pb.HomeRecord(key=7, subscription_id=op[1], token_hash=b"h", terms=["t"])
        return pb.LogEntry(kind=pb.LOG_SUBSCRIBE, data=data.SerializeToString())
    if op[0] == "unsubscribe":
        oracle.pop(op[1], None)
        data = pb.HomeRecord(key=7, subscription_id=op[1], deleted=1)
        return pb.LogEntry(kind=pb.LOG_UNSUBSCRIBE, data=data.SerializeToString())
    if op[0] == "deliver":
        batch = alert_batch([((docno, "", ""), ids) for docno, ids in op[1]])
        return pb.LogEntry(kind=pb.LOG_DELIVER, data=batch.SerializeToString())
    acked = pb.Acknowledged()
    for sub_id, sub in oracle.items():
        box = sub.mailbox
        acked.subscription_ids.append(sub_id)
        acked.firsts.append((box.first + box.next) // 2)
        box.acknowledge((box.first + box.next) // 2)
    return pb.LogEntry(kind=pb.LOG_ACKS, data=acked.SerializeToString())


def test_a_batch_new_to_every_mailbox_is_numbered_in_the_columns():
    """The usual batch touches no mailbox: every alert is numbered in the table, and the
    subscriptions' mailboxes stay empty until read."""
    subs = Subscriptions()
    for sub_id in range(1, 101):
        subs[sub_id] = Subscription(sub_id, b"h", ["t"], 1, "t", key=7)
    table = AlertTable(subs, limits.MAILBOX_BYTES)
    batch = alert_batch([((f"d{j}", "", ""), list(range(1, 101, j + 1))) for j in range(5)])
    offered = table.offer(batch)
    assert sum(len(ids) for _, ids, _ in offered.runs) == len(batch.subscription_ids)
    assert all(not s.box.queue and s.table is table for s in subs.values())
    assert subs[1].span() == (0, 5, 5)
    assert [d[0] for d in subs[1].mailbox.queue] == [f"d{j}" for j in range(5)]
    assert subs[1].table is None and subs[2].table is table  # read: folded out
