"""A replica keeping copies as columns (cqengine.core.alerts.copies) ends exactly where taking
each copy into its mailbox at once ends (the oracle: a store without columns): the same
mailboxes, the same journal, the same replies, whatever the copies' order, gaps, repeats,
acknowledgements ahead of their alerts, and whenever a mailbox is read. Reconciliation's
summaries of a range count what is kept without folding it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cqengine.core.alerts.batches import numbered_batch
from cqengine.core.alerts.copies import FOLD_AFTER
from cqengine.core.alerts.mailboxes import Subscription, Subscriptions
from cqengine.core.basis import limits
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.proto import cqengine_pb2 as pb

SUBS = [11, 12, 13, 14]
GONE = 15  # unsubscribed: its alerts are no gap
UNKNOWN = 16  # its record has not come: asked for whole
SERVED = 11  # this node serves its home key: its copies are merged, never kept


class Recorded:
    """A journal that keeps what it is told of alerts and the latest first of each."""

    def __init__(self) -> None:
        self.alerts: list[tuple[int, int, tuple]] = []
        self.firsts: dict[int, int] = {}

    def alerted(self, alerts) -> None:
        self.alerts += alerts

    def alerted_runs(self, runs) -> None:
        self.alerts += [(s, q, doc) for doc, subs, seqs in runs for s, q in zip(subs, seqs)]

    def acknowledged(self, sub_id, first) -> None:
        self.firsts[sub_id] = first

    def __getattr__(self, name):  # subscribed, unsubscribed, ...: not what is compared
        return lambda *args, **kwargs: None


def store(columns: bool) -> RecordStore:
    subs = Subscriptions()
    for s in SUBS:
        subs[s] = Subscription(s, b"h" * 32, ["a"], 1, "a", key=s)
    out = RecordStore(InvertedIndex(), subs, 3, lambda: 1000.0)
    if not columns:
        out.intake.copied = None
    out.homes.gone[GONE] = (0, 1000.0)
    out.journal = Recorded()
    return out


def serves(key: int) -> bool:
    return key == SERVED


def state(store: RecordStore) -> dict:
    out = {}
    for s, sub in store.subscriptions.items():
        box = sub.mailbox
        out[s] = (box.first, list(box.queue), box.size, box.seen, list(box.acked))
        out[s] += (box.early, box.unheld)
    return out


def numbers(store: RecordStore) -> list:
    homes = store.reconciliation.summaries(0, 0)[1]
    return [c.tolist() for c in homes.columns()]


alert = st.tuples(
    st.sampled_from(SUBS + [GONE, UNKNOWN]),
    st.integers(0, 12),  # its number
    st.integers(0, 30),  # its document
)
step = st.one_of(
    st.lists(alert, max_size=12).map(lambda a: ("copy", a)),
    st.lists(st.tuples(st.sampled_from(SUBS + [UNKNOWN]), st.integers(0, 14)), max_size=4).map(
        lambda a: ("ack", a)
    ),
    st.sampled_from(SUBS).map(lambda s: ("read", s)),
    st.just(("summarize", None)),
)


@hsettings(max_examples=400, deadline=None)
@given(st.lists(step, max_size=16), st.integers(1, 40))
def test_copies_kept_as_columns_end_where_taking_each_at_once_ends(steps, kept):
    before = limits.COPIES_KEPT, limits.SEEN_KEPT
    limits.COPIES_KEPT = kept  # folds of their own, as the columns fill, at any step
    limits.SEEN_KEPT = 3  # documents pushed out of a mailbox's memory by a fold
    try:
        columns, oracle = store(True), store(False)
        for kind, what in steps:
            if kind == "copy":
                alerts = {(sub, seq): (f"D{doc}", f"t{doc}", "") for sub, seq, doc in what}
                batch = numbered_batch([(sub, seq, doc) for (sub, seq), doc in alerts.items()])
                got, want = (
                    columns.intake.put_alerts(batch, serves),
                    oracle.intake.put_alerts(batch, serves),
                )
                assert sorted(got) == sorted(want)
            elif kind == "ack":
                acked = pb.Acknowledged(
                    subscription_ids=[s for s, _ in what], firsts=[f for _, f in what]
                )
                assert columns.intake.put_acknowledged(acked) == oracle.intake.put_acknowledged(
                    acked
                )
            elif kind == "read":  # a mailbox read: everything kept is folded
                assert (
                    columns.subscriptions[what].mailbox.next
                    == oracle.subscriptions[what].mailbox.next
                )
            else:
                assert numbers(columns) == numbers(oracle)
        assert numbers(columns) == numbers(oracle)
        assert state(columns) == state(oracle)
        assert sorted(columns.journal.alerts) == sorted(oracle.journal.alerts)
        assert columns.journal.firsts == oracle.journal.firsts
        kept = columns.intake.copied  # every mailbox was read: nothing left kept or tracked
        assert kept.alerts == 0 and not kept.columns and not kept.tracked.any()
    finally:
        limits.COPIES_KEPT, limits.SEEN_KEPT = before


def test_a_replica_keeps_plain_copies_as_columns_until_a_mailbox_is_read():
    s = store(True)
    runs = [((f"D{i}", "", ""), [12, 13], [i, i]) for i in range(5)]
    for doc, subs, seqs in runs:
        assert (
            s.intake.put_alerts(numbered_batch([(x, q, doc) for x, q in zip(subs, seqs)]), serves)
            == []
        )
    ack = pb.Acknowledged(subscription_ids=[12, 13], firsts=[4, 5])
    assert s.intake.put_acknowledged(ack) == []
    kept = s.intake.copied
    assert kept.alerts == 10 and kept.tracked.sum() == 2 and kept.folds == 0
    assert s.subscriptions[12].box.next == 0  # nothing in the mailbox itself yet
    assert numbers(s)[3] == [0, 4, 5, 0, 0]  # firsts: 11, 12, 13, 14, and GONE's tombstone
    box = s.subscriptions[12].mailbox  # read: its copies folded, and only its
    assert kept.alerts == 5 and kept.tracked.sum() == 1 and kept.folds == 0
    assert box.first == 4 and [d[0] for d in box.queue] == ["D4"]
    assert box.seen == {f"D{i}" for i in range(5)} and list(box.acked) == ["D0", "D1", "D2", "D3"]
    assert s.subscriptions[13].box.first == 0  # 13's still kept
    for _ in range(FOLD_AFTER):  # read again and again: a release at last folds everyone's
        s.intake.put_alerts(
            numbered_batch([(14, s.subscriptions[14].box.next, ("E", "", ""))]), serves
        )
        assert s.subscriptions[14].mailbox
    assert kept.folds == 1 and kept.alerts == 0
    assert s.subscriptions[13].box.first == 5 and not s.subscriptions[13].box.queue


def test_a_served_subscription_and_a_gap_are_never_kept():
    s = store(True)
    doc = ("D", "", "")
    assert s.intake.put_alerts(numbered_batch([(SERVED, 0, doc), (12, 3, doc)]), serves) == []
    assert not s.intake.copied.tracked.any()  # served here: merged; 12: early, kept by its mailbox
    assert s.subscriptions[12].box.early == {3: doc}
    assert s.subscriptions[SERVED].box.next == 1


# A ring's usual traffic: each copy numbers alerts on from where the home is, and each
# acknowledgement is of alerts numbered already; mailboxes are read now and then.
traffic = st.lists(
    st.one_of(
        st.lists(st.tuples(st.sampled_from(SUBS), st.integers(0, 40)), max_size=6).map(
            lambda a: ("copy", a)
        ),
        st.lists(st.tuples(st.sampled_from(SUBS), st.integers(0, 3)), max_size=4).map(
            lambda a: ("ack", a)
        ),
        st.sampled_from(SUBS).map(lambda s: ("read", s)),
    ),
    max_size=30,
)


@hsettings(max_examples=300, deadline=None)
@given(traffic, st.integers(1, 12))
def test_a_replica_keeping_a_rings_usual_copies_ends_where_the_oracle_does(steps, kept):
    before = limits.COPIES_KEPT, limits.SEEN_KEPT
    limits.COPIES_KEPT, limits.SEEN_KEPT = kept, 3
    try:
        columns, oracle = store(True), store(False)
        numbered = dict.fromkeys(SUBS, 0)  # at the home: the next number of each
        acked = dict.fromkeys(SUBS, 0)
        docs = 0
        for kind, what in steps:
            if kind == "copy":
                alerts = []
                for sub, _ in what:
                    docs += 1
                    alerts.append((sub, numbered[sub], (f"D{docs}", "", "")))
                    numbered[sub] += 1
                batch = numbered_batch(alerts)
                assert (
                    columns.intake.put_alerts(batch, serves)
                    == oracle.intake.put_alerts(batch, serves)
                    == []
                )
            elif kind == "ack":
                for sub, back in what:
                    acked[sub] = max(acked[sub], numbered[sub] - back)
                subs = [s for s, _ in what]
                ack = pb.Acknowledged(subscription_ids=subs, firsts=[acked[s] for s in subs])
                assert (
                    columns.intake.put_acknowledged(ack)
                    == oracle.intake.put_acknowledged(ack)
                    == []
                )
            else:
                assert state(columns)[what] == state(oracle)[what]
            assert numbers(columns) == numbers(oracle)
        assert state(columns) == state(oracle)
        assert sorted(columns.journal.alerts) == sorted(oracle.journal.alerts)
        assert columns.journal.firsts == oracle.journal.firsts
    finally:
        limits.COPIES_KEPT, limits.SEEN_KEPT = before


def test_a_copy_numbering_a_subscriptions_alerts_out_of_document_order_is_kept_in_order():
    s = store(True)
    assert s.intake.put_alerts(numbered_batch([(12, 0, ("W", "", ""))]), serves) == []  # tracked
    out_of_order = numbered_batch([(12, 2, ("A", "", "")), (12, 1, ("B", "", ""))])
    assert s.intake.put_alerts(out_of_order, serves) == []
    assert s.intake.copied.alerts == 3
    assert [d[0] for d in s.subscriptions[12].mailbox.queue] == ["W", "B", "A"]
