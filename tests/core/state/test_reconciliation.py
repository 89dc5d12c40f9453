"""Reconciling home records (cqengine.core.state.summaries): a replica is sent what it lacks of a
mailbox, not the mailbox; the owner asks for what it lacks itself; copies end equal, and a
copy knows seen every document its subscriber acknowledged lately."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.records import ask, finish, reconcile

from cqengine.core.alerts.batches import numbered_batch
from cqengine.core.alerts.mailboxes import Subscription, Subscriptions, home_record, token_hash
from cqengine.core.basis import limits
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.proto import cqengine_pb2 as pb

SUBS = (1, 2, 3, 1 + limits.BUCKETS)  # the last shares a bucket with the first
KEY = 1 << 62  # home keys KEY + subscription: all in the owner's range (the whole circle)


def store() -> RecordStore:
    return RecordStore(InvertedIndex(), {}, 3, now=lambda: 100.0)


def subscribed(owner: RecordStore, replica: RecordStore) -> None:
    for sid in SUBS:
        owner.subscriptions[sid] = Subscription(
            sid, token_hash(f"t{sid}"), ["a", "b"], 7, "a", key=KEY + sid
        )
        replica.homes.put_home(home_record(owner.subscriptions[sid]))


def state(s: RecordStore, sid: int) -> tuple | str | None:
    sub = s.subscriptions.get(sid)
    if sub is None:
        return "gone" if sid in s.homes.gone else None
    return sub.mailbox.first, sub.mailbox.next, list(sub.mailbox.queue)


Op = tuple[str, int, bool, int]  # what, subscription, copied to the replica, how many

ops = st.lists(
    st.tuples(
        st.sampled_from(["alert", "alert", "alert", "ack", "unsubscribe", "lose record"]),
        st.sampled_from(SUBS),
        st.booleans(),
        st.integers(1, 3),
    ),
    max_size=40,
)


def run(owner: RecordStore, replica: RecordStore, steps: list[Op]) -> None:
    """The home's side of each step, and its copy to the replica unless lost."""
    for n, (what, sid, copied, k) in enumerate(steps):
        sub = owner.subscriptions.get(sid)
        if sub is None:
            continue
        box = sub.mailbox
        if what == "alert":
            doc = (f"D{n}", f"title {n}", "")
            box.offer(doc)
            if copied:
                replica.intake.put_alerts(
                    numbered_batch([(sid, box.next - 1, doc)]), lambda key: False
                )
        elif what == "ack":
            box.pop(min(k, len(box.queue)))
            if copied:
                replica.homes.put_home(home_record(sub, start=box.next))
        elif what == "unsubscribe":
            owner.homes.unsubscribe(sid, sub.key)
            if copied:
                replica.homes.put_home(
                    pb.HomeRecord(key=sub.key, subscription_id=sid, deleted=100.0)
                )
        elif what == "lose record":  # the replica never had it (a copy of it lost)
            replica.subscriptions.pop(sid, None)


@hsettings(max_examples=200, deadline=None)
@given(ops)
def test_copies_of_mailboxes_end_equal_and_a_replica_gets_only_what_it_lacks(steps):
    owner, replica = store(), store()
    subscribed(owner, replica)
    run(owner, replica, steps)
    before = {sid: replica.subscriptions.get(sid) for sid in SUBS}
    before = {
        sid: (s.mailbox.first, s.mailbox.next, bool(s.mailbox.unheld))
        for sid, s in before.items()
        if s is not None
    }
    repair = reconcile(owner, replica)
    for sid in SUBS:
        assert state(replica, sid) == state(owner, sid)
        mine, theirs = owner.subscriptions.get(sid), replica.subscriptions.get(sid)
        if mine is not None:  # every document acknowledged lately is known seen there
            assert set(mine.mailbox.acked) <= theirs.mailbox.seen
            assert not theirs.mailbox.unheld
    assert owner.reconciliation.digests(0, 0) == replica.reconciliation.digests(0, 0)
    for r in repair.homes:
        if r.deleted:
            continue
        was = before.get(r.subscription_id)
        box = owner.subscriptions[r.subscription_id].mailbox
        whole = was is None or was[2] or was[1] < box.first
        assert bool(r.token_hash) == whole  # a mailbox's missing alerts, not the mailbox
        if not whole:
            assert r.start == was[1] and len(r.docnos) == box.next - was[1]
    assert reconcile(owner, replica) == pb.Records()  # and then nothing is sent


def test_what_the_owner_did_after_its_request_is_on_its_way_not_missing():
    """Under load an owner numbers and sees acknowledged more alerts while its request is
    answered: those copies are on their way. It compares the replica's summaries with its
    own as the request was made, so it sends the alerts a replica really lacks, and no
    whole record for what has moved on since (a whole record carries the mailbox's memory
    of 1,024 documents)."""
    owner, replica = store(), store()
    subscribed(owner, replica)
    lacking, busy = SUBS[0], SUBS[-1]  # one bucket: both summarized
    owner.subscriptions[lacking].mailbox.offer(("L0", "", ""))  # its copy was lost
    request, summarized, reply = ask(owner, replica)
    box = owner.subscriptions[busy].mailbox  # meanwhile: two alerts, both acknowledged
    for doc in (("B0", "", ""), ("B1", "", "")):
        box.offer(doc)
    box.pop(2)
    repair = finish(owner, replica, request, summarized, reply)
    assert [(r.subscription_id, bool(r.token_hash)) for r in repair.homes] == [(lacking, False)]
    assert state(replica, lacking) == state(owner, lacking)


def test_what_is_on_its_way_to_a_replica_is_repaired_only_if_it_never_gets_there():
    """Acknowledgements and alerts whose copies are on their way are not a replica's loss:
    reconciliation sends nothing for them (under load it caught thousands a round, each
    sent again). Once their copies are through and the replica still lacks them (a copy
    lost), it is sent just those: the alerts and the acknowledgement, not the record."""
    owner, replica = store(), store()
    subscribed(owner, replica)
    sid = SUBS[0]
    box = owner.subscriptions[sid].mailbox
    docs = [(f"D{i}", "", "") for i in range(4)]
    for doc in docs[:3]:
        box.offer(doc)
        replica.intake.put_alerts(numbered_batch([(sid, box.next - 1, doc)]), lambda key: False)
    box.told = box.first  # its subscriber acknowledged two (Home.acknowledge)
    box.pop(2)
    box.offer(docs[3])  # and a fourth is numbered: both copies on their way
    box.pending.add(3)
    owner.homes.count_copies([sid], 2)
    assert reconcile(owner, replica) == pb.Records()
    box.told = None  # both copies through, and both lost on the way to this replica
    box.pending.discard(3)
    owner.homes.count_copies([sid], -2)
    repair = reconcile(owner, replica)
    assert [
        (r.subscription_id, bool(r.token_hash), r.first, list(r.docnos)) for r in repair.homes
    ] == [(sid, False, 2, ["D3"])]
    assert state(replica, sid) == state(owner, sid)


def test_an_owner_asks_a_replica_for_the_alerts_it_lacks_and_gets_them():
    """A replica that served the home before may hold alerts its new owner lacks: the owner
    asks for that record, takes them, and sends nothing back."""
    owner, replica = store(), store()
    subscribed(owner, replica)
    sid = SUBS[0]
    box = replica.subscriptions[sid].mailbox
    docs = [(f"R{i}", "", "") for i in range(3)]
    for doc in docs:
        box.offer(doc)
    repair = reconcile(owner, replica)
    assert list(owner.subscriptions[sid].mailbox.queue) == docs
    assert state(owner, sid) == state(replica, sid)
    assert repair == pb.Records()


def test_an_acknowledgement_overtaking_alerts_leaves_them_known_seen_when_they_come():
    """A copy acknowledged past alerts it never held does not know their documents seen
    until they come (late, or from a whole record): until then its summary says so."""
    owner, replica = store(), store()
    subscribed(owner, replica)
    sid = SUBS[0]
    sub = owner.subscriptions[sid]
    docs = [(f"N{i}", "", "") for i in range(3)]
    for doc in docs:
        sub.mailbox.offer(doc)
    sub.mailbox.pop(2)
    replica.homes.put_home(home_record(sub, start=sub.mailbox.next))  # the ack, before the alerts
    copy = replica.subscriptions[sid].mailbox
    assert copy.unheld == {0, 1} and "N0" not in copy.seen
    late = numbered_batch([(sid, i, doc) for i, doc in enumerate(docs)][:1])
    assert replica.intake.put_alerts(late, lambda key: False) == []
    assert copy.unheld == {1} and "N0" in copy.seen
    repair = reconcile(owner, replica)
    assert [bool(r.token_hash) for r in repair.homes] == [True]  # with its memory of N1
    assert "N1" in copy.seen and not copy.unheld


changes = st.lists(
    st.tuples(
        st.sampled_from(["subscribe", "unsubscribe", "alert", "ack", "index", "unindex", "drop"]),
        st.integers(1, 6),  # a subscription
        st.integers(0, 3),  # which quarter of the circle its keys lie in
    ),
    max_size=30,
)
QUARTER = 1 << 62


@hsettings(max_examples=150, deadline=None)
@given(changes)
def test_summaries_kept_between_rounds_are_those_made_afresh(steps):
    """What summaries keep of a range while no entry or subscription comes or goes is
    never stale: after any changes, a range's digests are those of a store that kept
    nothing."""
    s = RecordStore(InvertedIndex(), Subscriptions(), 3, now=lambda: 100.0)
    ranges = [(0, 0), (0, 2 * QUARTER), (3 * QUARTER, QUARTER)]  # the last wraps around
    for n, (what, sid, quarter) in enumerate(steps):
        key = quarter * QUARTER + sid
        sub = s.subscriptions.get(sid)
        if what == "subscribe" and sub is None:
            s.homes.put_home(home_record(Subscription(sid, b"h" * 32, ["a"], key, "a", key=key)))
        elif what == "unsubscribe" and sub is not None:
            s.homes.unsubscribe(sid, sub.key)
        elif what == "alert" and sub is not None:
            sub.mailbox.offer((f"D{n}", "", ""))
        elif what == "ack" and sub is not None:
            sub.mailbox.pop(min(1, len(sub.mailbox.queue)))
        elif what == "index":
            s.entries.put_entry(key, pb.QueryEntry(subscription_id=sid, version=n, index_id=key))
        elif what == "unindex":
            s.entries.delete_entry(key, sid, n)
        elif what == "drop":
            s.drop_outside([(quarter * QUARTER, (quarter + 2) * QUARTER % (1 << 64))])
        kept = [s.reconciliation.digests(lo, hi) for lo, hi in ranges]
        s.reconciliation._kept.clear()  # what the store keeps between rounds, forgotten
        assert kept == [s.reconciliation.digests(lo, hi) for lo, hi in ranges]


def test_subscriptions_change_one_at_a_time_so_none_goes_unnoticed():
    subs = Subscriptions()
    for change in (subs.clear, subs.popitem, lambda: subs.update({1: None})):
        with pytest.raises(TypeError):
            change()
    before = subs.generation
    subs[1] = Subscription(1, b"", [], 0, "")
    subs.pop(1)
    assert subs.generation == before + 2
