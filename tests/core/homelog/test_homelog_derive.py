"""Numbers as a function of the log (cqengine.core.homelog.derive): a member replaying a
home key's log, from its beginning or from any checkpoint, derives exactly the mailboxes
and the alert numbers the leader made as it appended, whatever the entries: subscriptions
coming and going, documents alerted twice, mailboxes overflowing, acknowledgements."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.homelog import DOCNOS, LIMIT_BYTES, SUBS, acknowledging, entry, state

from cqengine.core.alerts.batches import alert_batch, offer_batch
from cqengine.core.alerts.mailboxes import Mailbox, Subscription
from cqengine.core.basis import limits
from cqengine.core.homelog.derive import Derived
from cqengine.proto import cqengine_pb2 as pb

operation = st.one_of(
    st.tuples(st.just("subscribe"), st.sampled_from(SUBS)),
    st.tuples(st.just("unsubscribe"), st.sampled_from(SUBS)),
    st.tuples(
        st.just("deliver"),
        st.lists(
            st.tuples(st.sampled_from(DOCNOS), st.lists(st.sampled_from([*SUBS, 99]), max_size=4)),
            min_size=1,
            max_size=4,
        ),
    ),
    st.tuples(st.just("ack"), st.sampled_from(SUBS), st.floats(0, 1)),
)


def entries_of(operations, leader: Derived) -> tuple[list[pb.LogEntry], list]:
    """The log a leader appends for these operations (an acknowledgement up to a number it
    has, as a subscriber's would be), applying each as it appends; and what each numbered."""
    log, numbered = [], []
    for op in operations:
        if op[0] == "subscribe":
            record = pb.HomeRecord(key=7, subscription_id=op[1], token_hash=b"h", terms=["t"])
            e = entry(pb.LOG_SUBSCRIBE, record)
        elif op[0] == "unsubscribe":
            e = entry(pb.LOG_UNSUBSCRIBE, pb.HomeRecord(key=7, subscription_id=op[1], deleted=1))
        elif op[0] == "deliver":
            docs = [((docno, "", ""), subs) for docno, subs in op[1]]
            e = entry(pb.LOG_DELIVER, alert_batch(docs))
        else:
            first = acknowledging(leader, op[1], op[2])
            if first is None:
                continue
            e = entry(pb.LOG_ACKS, pb.Acknowledged(subscription_ids=[op[1]], firsts=[first]))
        log.append(e)
        numbered.append(leader.apply(len(log), e))
    return log, numbered


@hsettings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=40), st.integers(0, 40))
def test_a_member_replaying_the_log_from_any_checkpoint_derives_the_leaders_numbers(ops, at):
    leader = Derived(LIMIT_BYTES)
    log, numbered = entries_of(ops, leader)
    at = min(at, len(log))
    # a member that held the checkpoint at `at` (its bytes) and the entries after it
    replay = Derived(LIMIT_BYTES)
    for position, e in enumerate(log[:at], 1):
        replay.apply(position, e)
    saved = replay.checkpoint().SerializeToString()
    member = Derived.restore(pb.LogCheckpoint.FromString(saved), LIMIT_BYTES)
    assert state(member) == state(replay)
    again = [member.apply(position, e) for position, e in enumerate(log[at:], at + 1)]
    assert again == numbered[at:]
    assert state(member) == state(leader)
    # and from the beginning, counting alike
    whole = Derived(LIMIT_BYTES)
    assert [whole.apply(p, e) for p, e in enumerate(log, 1)] == numbered
    assert (whole.dropped, whole.repeated) == (leader.dropped, leader.repeated)


@hsettings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=40))
def test_each_subscription_is_numbered_without_gap_or_repeat(ops):
    """Numbers go 0, 1, 2, ... per subscription (a mailbox overflowing drops the oldest,
    never a number), and no document alerts one subscription twice while its mailbox
    remembers it."""
    leader = Derived(LIMIT_BYTES)
    _, numbered = entries_of(ops, leader)
    seqs: dict[int, list[int]] = {}
    docs: dict[int, list[str]] = {}
    for runs in numbered:
        for doc, subs, numbers in runs:
            for sub, seq in zip(subs, numbers):
                seqs.setdefault(sub, []).append(seq)
                docs.setdefault(sub, []).append(doc[0])
    for numbers in seqs.values():
        # a subscription that came back after leaving starts again from 0
        runs = [numbers[0]] + [b for a, b in zip(numbers, numbers[1:]) if b != a + 1]
        assert all(r == 0 for r in runs), numbers
    # every document this run alerts is remembered (SEEN_KEPT is 1,024): none twice, but
    # to a subscription that left and came back, which starts anew
    again = {op[1] for op in ops if op[0] == "unsubscribe"}
    for sub, names in docs.items():
        assert len(names) == len(set(names)) or sub in again, names


@hsettings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=60))
def test_a_mailbox_on_the_log_remembers_exactly_its_latest_numbered_documents(ops):
    """What the mailboxes as columns (docs/home-log.md, "Next") rely on: on the log, the
    documents a mailbox knows seen are exactly those of its alerts numbered from `first -
    SEEN_KEPT` on (waiting, or acknowledged or dropped lately, in number order), so a
    table of numbered alerts can stand for its memory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limits, "SEEN_KEPT", 3)  # small: the memory fills and forgets often
        leader = Derived(LIMIT_BYTES)
        _, numbered = entries_of(ops, leader)
    by_number: dict[int, dict[int, str]] = {}  # per subscription's life: number -> docno
    for runs in numbered:
        for doc, subs, numbers in runs:
            for sub, seq in zip(subs, numbers):
                if seq == 0:
                    by_number[sub] = {}  # numbered from 0 again: a new life
                by_number[sub][seq] = doc[0]
    for sub_id, sub in leader.subscriptions.items():
        box, numbers = sub.mailbox, by_number.get(sub_id, {})
        window = range(max(0, box.first - 3), box.next)
        assert box.seen == {numbers[n] for n in window}, (sub_id, box.first, box.next)
        assert list(box.acked) == [numbers[n] for n in window if n < box.first]


def test_an_overflowing_mailbox_is_derived_alike_from_a_checkpoint():
    ops = [("subscribe", 1), ("deliver", [(d, [1]) for d in DOCNOS[:6]]), ("ack", 1, 0.5)]
    ops += [("deliver", [(d, [1]) for d in DOCNOS[6:]])]
    leader = Derived(LIMIT_BYTES)
    log, numbered = entries_of(ops, leader)
    assert leader.dropped > 0  # the limits pushed alerts out
    member = Derived.restore(
        pb.LogCheckpoint.FromString(leader.checkpoint().SerializeToString()), LIMIT_BYTES
    )
    assert state(member) == state(leader)
    more = entry(pb.LOG_DELIVER, alert_batch([(("d0", "", ""), [1]), (("z", "", ""), [1])]))
    assert member.apply(len(log) + 1, more) == leader.apply(len(log) + 1, more)
    assert state(member) == state(leader)


def subscriptions(limit: int) -> dict[int, Subscription]:
    return {s: Subscription(s, b"h", ["t"], 0, "t", Mailbox(limit=limit), 7) for s in SUBS}


@hsettings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(DOCNOS), st.lists(st.sampled_from([*SUBS, 99]), max_size=5)),
            min_size=1,
            max_size=5,
        ),
        max_size=6,
    ),
    st.integers(1, 4),
)
def test_a_batch_is_numbered_as_its_alerts_offered_one_at_a_time(batches, limit):
    """offer_batch (the home's loop over a batch, Mailbox.offer inlined where nothing
    overflows) numbers, drops and repeats exactly as offering each alert in turn does: the
    rule the mailboxes are defined by (few alerts a mailbox, few bytes: they overflow)."""
    fast, slow = subscriptions(limit), subscriptions(limit)
    for docs in batches:
        batch = alert_batch([((docno, "", ""), subs) for docno, subs in docs])
        offered = offer_batch(batch, fast, LIMIT_BYTES)
        runs, repeated, missing = [], 0, []
        for docno, subs in docs:
            took, numbers = [], []
            for s in subs:
                if s not in slow:
                    missing.append(s)
                elif slow[s].mailbox.offer((docno, "", ""), LIMIT_BYTES):
                    took.append(s)
                    numbers.append(slow[s].mailbox.next - 1)
                else:
                    repeated += 1
            if took:
                runs.append(((docno, "", ""), took, numbers))
        dropped = sum(sub.mailbox.dropped for sub in slow.values())
        assert offered.runs == runs and offered.missing == missing
        assert offered.repeated == repeated
        assert sum(sub.mailbox.dropped for sub in fast.values()) == dropped
        assert {s: vars(sub.mailbox) for s, sub in fast.items()} == {
            s: vars(sub.mailbox) for s, sub in slow.items()
        }


def test_entries_apply_in_order_only():
    derived = Derived()
    derived.apply(1, pb.LogEntry(epoch=1, kind=pb.LOG_EPOCH))
    try:
        derived.apply(3, pb.LogEntry(epoch=1, kind=pb.LOG_EPOCH))
    except ValueError as e:
        assert "entry 3 applied after 1" in str(e)
    else:
        raise AssertionError("an entry applied out of order")
