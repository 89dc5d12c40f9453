"""A home key's log naming its subscriptions by row (cqengine.core.homelog.rows): a log
whose entries name rows derives exactly the numbers the same log naming ids does, on the
leader and on a member replaying it from any checkpoint; a row is never given twice; a
leader names rows only where the rows it reads are those its entries are applied with;
and a ring on the home log names rows once every node speaks protocol 4, and not before,
alerting exactly the matcher's either way."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.homelog import (
    DOCNOS,
    LIMIT_BYTES,
    SUBS,
    Subscribers,
    acknowledging,
    entry,
    publish,
    ring,
    state,
)
from support.oracle import assert_exact

from chord.protocol import versions
from cqengine.core.alerts.batches import alert_batch
from cqengine.core.home.home import _acks_entries, _deliver_entry
from cqengine.core.home.homes import _rows_change
from cqengine.core.homelog.derive import Derived
from cqengine.core.homelog.log import Log
from cqengine.core.homelog.rows import Rows
from cqengine.proto import cqengine_pb2 as pb

operation = st.one_of(
    st.tuples(st.just("subscribe"), st.sampled_from(SUBS)),
    st.tuples(st.just("unsubscribe"), st.sampled_from(SUBS)),
    st.tuples(st.just("rows")),
    st.tuples(
        st.just("deliver"),
        st.lists(
            # (99: never subscribed, rarely: a batch naming it names ids)
            st.tuples(
                st.sampled_from(DOCNOS), st.lists(st.sampled_from([*SUBS * 3, 99]), max_size=4)
            ),
            min_size=1,
            max_size=4,
        ),
    ),
    st.tuples(st.just("ack"), st.sampled_from(SUBS), st.floats(0, 1)),
)


def logs_of(operations) -> tuple[list[pb.LogEntry], list[pb.LogEntry]]:
    """The log a leader appends for these operations naming ids only, and the one it
    appends naming rows wherever its rows name every subscription of an entry (through
    the home's own `_deliver_entry` and `_acks_entries`); each leader applies its entries
    as it appends them."""
    by_id, by_row = Derived(LIMIT_BYTES), Derived(LIMIT_BYTES)
    ids_log: list[pb.LogEntry] = []
    rows_log: list[pb.LogEntry] = []
    for op in operations:
        if op[0] == "rows":
            made = rowed = pb.LogEntry(epoch=1, kind=pb.LOG_ROWS)
        elif op[0] in ("subscribe", "unsubscribe"):
            record = pb.HomeRecord(key=7, subscription_id=op[1], token_hash=b"h", terms=["t"])
            kind = pb.LOG_SUBSCRIBE if op[0] == "subscribe" else pb.LOG_UNSUBSCRIBE
            made = rowed = entry(kind, record)
        elif op[0] == "deliver":
            batch = alert_batch([((docno, "", ""), subs) for docno, subs in op[1]])
            made = _deliver_entry(batch, None)
            rowed = _deliver_entry(batch, by_row.rows if by_row.rows.taken else None)
        else:
            first = acknowledging(by_id, op[1], op[2])
            if first is None:
                continue
            acked = pb.Acknowledged(subscription_ids=[op[1]], firsts=[first])
            [made] = _acks_entries(acked, None)
            [rowed] = _acks_entries(acked, by_row.rows if by_row.rows.taken else None)
        ids_log.append(made)
        rows_log.append(rowed)
        by_id.apply(len(ids_log), made)
        by_row.apply(len(rows_log), rowed)
    return ids_log, rows_log


def replayed(log: list[pb.LogEntry], at: int) -> tuple[Derived, list]:
    """A member that holds the checkpoint at `at` (its bytes) and the entries after it:
    what it derives, and what each entry after it numbered."""
    before = Derived(LIMIT_BYTES)
    for position, e in enumerate(log[:at], 1):
        before.apply(position, e)
    saved = pb.LogCheckpoint.FromString(before.checkpoint().SerializeToString())
    member = Derived.restore(saved, LIMIT_BYTES)
    assert state(member) == state(before)
    return member, [member.apply(position, e) for position, e in enumerate(log[at:], at + 1)]


@hsettings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=40), st.integers(0, 40))
@example(
    ops=[("subscribe", 1), ("rows",), ("deliver", [("d0", [1])]), ("deliver", [("d1", [1])])], at=3
)
@example(
    ops=[
        ("subscribe", 1),
        ("rows",),
        ("unsubscribe", 1),
        ("subscribe", 1),
        ("deliver", [("d0", [1])]),
    ],
    at=3,
)
def test_a_log_naming_rows_numbers_as_the_same_log_naming_ids(ops, at):
    ids_log, rows_log = logs_of(ops)
    at = min(at, len(ids_log))
    by_id, numbered = replayed(ids_log, 0)
    by_row, again = replayed(rows_log, at)
    assert again == numbered[at:]
    assert state(by_row) == state(by_id)
    whole, _ = replayed(rows_log, 0)  # and from the beginning, counting alike
    assert (whole.dropped, whole.repeated) == (by_id.dropped, by_id.repeated)


def test_the_rows_entries_name_are_rows_of_the_log_and_cost_less_than_ids():
    ops = [("subscribe", s) for s in SUBS[:3]] + [("rows",), ("subscribe", SUBS[3])]
    ops += [("deliver", [("d0", [SUBS[3], SUBS[0]]), ("d1", [SUBS[1]])]), ("ack", SUBS[3], 1)]
    ids_log, rows_log = logs_of(ops)
    batch = pb.AlertBatch.FromString(rows_log[5].data)
    assert list(batch.rows) == [4, 1, 2] and not batch.subscription_ids
    assert list(pb.Acknowledged.FromString(rows_log[6].data).rows) == [4]
    assert len(rows_log[5].data) + 3 * 6 <= len(ids_log[5].data)  # 1 byte a row, not 8


def test_a_row_is_never_given_twice_and_a_gone_ones_names_nobody():
    rows = Rows()
    for sub_id in (30, 10, 20):
        rows.subscribed(sub_id)
    assert not rows.taken and rows.rows_of([10]) is None  # no LOG_ROWS yet: by id
    rows.take()
    assert rows.row_of == {10: 1, 20: 2, 30: 3} and rows.next == 4
    rows.unsubscribed(20)
    rows.subscribed(20)  # it comes back: a row of its own, not its old one
    rows.subscribed(40)
    assert rows.row_of == {10: 1, 30: 3, 20: 4, 40: 5}
    assert rows.ids_of([2, 4, 9]).tolist() == [0, 20, 0]
    assert rows.rows_of([40, 10]).tolist() == [5, 1]
    assert rows.rows_of([40, 99]) is None  # one not of the log: the entry names ids


def test_a_checkpoint_without_rows_leaves_the_log_without_until_its_log_rows_entry():
    """A checkpoint of a release before rows (next_row 0) gives none: every member that
    restores it reads ids until the leader's LOG_ROWS, which all apply alike."""
    old = pb.LogCheckpoint(
        position=3, homes=[pb.HomeRecord(key=7, subscription_id=s) for s in (5, 2)]
    )
    member = Derived.restore(old, LIMIT_BYTES)
    assert not member.rows.taken and member.rows.row_of == {5: 0, 2: 0}
    member.apply(4, pb.LogEntry(kind=pb.LOG_ROWS))
    assert member.rows.row_of == {2: 1, 5: 2}
    saved = member.checkpoint()
    assert saved.next_row == 3 and {(r.subscription_id, r.row) for r in saved.homes} == {
        (2, 1),
        (5, 2),
    }


def test_a_leader_names_rows_only_while_no_entry_changing_them_waits_to_be_applied():
    derived, log = Derived(LIMIT_BYTES), Log(7)
    log.extend([pb.LogEntry(epoch=1, kind=pb.LOG_ROWS)])
    assert _rows_change(derived, log)  # appended, not applied
    derived.apply(1, log.entry(1))
    assert not _rows_change(derived, log)
    log.extend([entry(pb.LOG_DELIVER, alert_batch([(("d", "", ""), [1])]))])
    assert not _rows_change(derived, log)  # an alert batch changes no row
    log.extend([entry(pb.LOG_SUBSCRIBE, pb.HomeRecord(key=7, subscription_id=1))])
    assert _rows_change(derived, log)
    for position in (2, 3):
        derived.apply(position, log.entry(position))
    assert not _rows_change(derived, log) and derived.rows.row_of == {1: 1}


def _entries(sim) -> dict[str, int]:
    """Every committed LOG_DELIVER entry of every log copy, by how it names subscriptions."""
    named = {"rows": 0, "ids": 0}
    for e in sim.engines.values():
        for copy in e.home.logs.logs.values():
            for position in range(copy.base + 1, copy.committed + 1):
                kept = copy.entry(position)
                if kept.kind == pb.LOG_DELIVER:
                    batch = pb.AlertBatch.FromString(kept.data)
                    named["rows" if batch.rows else "ids"] += 1
    return named


@pytest.mark.parametrize("floor", ["protocol 4", "before 4"])
def test_a_ring_names_rows_once_every_node_speaks_them_and_alerts_alike(floor, monkeypatch):
    if floor == "before 4":  # a ring with a node that does not speak rows yet
        monkeypatch.setitem(versions.FEATURES, "rows", versions.PROTOCOL + 1)
    wl, sim, subs = ring(3)
    streams = Subscribers(sim)
    publish(sim, wl.docs, sorted(sim.engines))
    streams.read()
    streams.check_numbers()
    assert_exact(streams.shown, wl.oracle(subs))
    named = _entries(sim)
    if floor == "before 4":
        assert named["rows"] == 0 and named["ids"] > 0
    else:  # by id only while a subscription was waiting to be applied
        assert named["rows"] > 4 * named["ids"]
