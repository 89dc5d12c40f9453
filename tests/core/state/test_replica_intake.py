"""A replica taking a home's copy of numbered alerts (ReplicaIntake.put_alerts) in one pass
over the copy's columns ends exactly where merging each subscription's alerts in order of
number (Mailbox.put, the oracle) ends: the same mailboxes, the same journal, the same
subscriptions said to be behind, whatever the copies' order, gaps and repeats."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cqengine.core.alerts.batches import numbered_alerts, numbered_batch, runs_of
from cqengine.core.alerts.mailboxes import Subscription, Subscriptions
from cqengine.core.basis.limits import EARLY_ALERTS
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore

SUBS = [11, 12, 13, 14]
GONE = 15  # unsubscribed: its alerts are no gap
UNKNOWN = 16  # its record has not come: asked for whole


class Recorded:
    """A journal that keeps what it is told of alerts, as (subscription, number, doc)."""

    def __init__(self) -> None:
        self.alerts: list[tuple[int, int, tuple]] = []

    def alerted(self, alerts) -> None:
        self.alerts += alerts

    def alerted_runs(self, runs) -> None:
        self.alerts += [(s, q, doc) for doc, subs, seqs in runs for s, q in zip(subs, seqs)]

    def __getattr__(self, name):  # subscribed, acknowledged, ...: not what is compared
        return lambda *args, **kwargs: None


def store() -> RecordStore:
    subs = Subscriptions()
    for s in SUBS:
        subs[s] = Subscription(s, b"h" * 32, ["a"], 1, "a", key=s % 2)
    out = RecordStore(InvertedIndex(), subs, 3, lambda: 1000.0)
    out.homes.gone[GONE] = (0, 1000.0)
    out.journal = Recorded()
    return out


def merged_by_oracle(store: RecordStore, batch, serves) -> list[tuple[int, int]]:
    """Each subscription's alerts of the copy, in order of number, run by run."""
    behind = []
    for sub_id, alerts in numbered_alerts(batch).items():
        sub = store.subscriptions.get(sub_id)
        if sub is None:
            if sub_id not in store.homes.gone:
                behind.append((sub_id, 0))
            continue
        before = sub.mailbox.next
        for start, docs in runs_of(alerts):
            gap = sub.mailbox.put(start, docs, serves(sub.key))
            if gap is not None:
                behind.append((sub_id, gap))
                break
        store.homes.journal_alerted(sub, before)
    return behind


def state(store: RecordStore) -> dict:
    out = {}
    for s, sub in store.subscriptions.items():
        box = sub.mailbox
        out[s] = (box.first, list(box.queue), box.size, box.seen, box.early, box.unheld)
    return out


alert = st.tuples(
    st.sampled_from(SUBS + [GONE, UNKNOWN]),
    st.integers(0, 12),  # its number
    st.integers(0, 9),  # its document
)
step = st.one_of(
    st.lists(alert, max_size=12).map(lambda a: ("copy", a)),
    st.tuples(st.sampled_from(SUBS), st.integers(0, 14)).map(lambda a: ("ack", a)),
)


@hsettings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=12), st.booleans())
def test_taking_a_copy_in_one_pass_ends_where_merging_by_number_does(steps, serving):
    def serves(key):
        return serving and key == 1

    fast, slow = store(), store()
    for kind, what in steps:
        if kind == "ack":
            for s in (fast, slow):
                s.subscriptions[what[0]].mailbox.acknowledge(what[1])
            continue
        kept = {(sub, seq): (f"D{doc}", f"t{doc}", "") for sub, seq, doc in what}
        batch = numbered_batch([(sub, seq, doc) for (sub, seq), doc in kept.items()])
        got = fast.intake.put_alerts(batch, serves)
        want = merged_by_oracle(slow, batch, serves)
        assert sorted(got) == sorted(want)
        assert state(fast) == state(slow)
        assert sorted(fast.journal.alerts) == sorted(slow.journal.alerts)


def test_a_copy_with_more_early_alerts_than_kept_says_what_it_lacks():
    s = store()
    far = [(11, 2 + i, (f"F{i}", "", "")) for i in range(EARLY_ALERTS + 1)]
    assert s.intake.put_alerts(numbered_batch(far), lambda key: False) == [(11, 0)]
    box = s.subscriptions[11].mailbox
    assert box.next == 0 and not box.early and not s.journal.alerts
    joined = numbered_batch([(11, 0, ("A", "", "")), (12, 0, ("A", "", ""))])
    assert s.intake.put_alerts(joined, lambda key: False) == []
    assert sorted(s.journal.alerts) == [(11, 0, ("A", "", "")), (12, 0, ("A", "", ""))]
    assert copy.copy(s.subscriptions[11].mailbox.seen) == {"A"}
