"""A home's alert streams (cqengine.live.streams), without a network: what a watermark
acknowledges is what the alerts of the messages it covers acknowledge one by one, and a
stream whose client does not acknowledge stops at STREAM_UNACKED messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cqengine.core.alerts.mailboxes import Subscription
from cqengine.live import streams
from cqengine.live.client import unbatched
from cqengine.live.streams import Stream

SUBS = 5


def subscriptions() -> list[Subscription]:
    return [Subscription(i, b"", ["levee"], 1, "levee") for i in range(1, SUBS + 1)]


def alert(sub: Subscription, n: int) -> None:
    assert sub.mailbox.offer((f"D{sub.id}-{n}", "", ""))


# each step: some alerts for some subscriptions, then a message sent, or an acknowledgement
# of so many messages back from the last (-1: none)
steps = st.lists(
    st.tuples(st.lists(st.integers(0, SUBS - 1), max_size=12), st.integers(-1, 3)),
    min_size=1,
    max_size=30,
)


@given(steps, st.integers(0, 3))
def test_a_watermark_acknowledges_what_its_messages_alerts_do_one_by_one(steps, dropped):
    subs = subscriptions()
    stream = Stream(subs, {}, watermark=True)
    stream.drop(subs[dropped].id)  # ended meanwhile: never acknowledged by the stream
    sent: list[list[tuple[int, int]]] = []  # per message, its (subscription, number)s
    made = [0] * SUBS
    for alerted, back in steps:
        for i in alerted:
            alert(subs[i], made[i])
            made[i] += 1
            stream.wake(subs[i].id)
        while (message := stream.next_message()) is not None:
            assert bool(message.stream) == (not sent)  # its id, in the first message alone
            sent.append([(a.subscription_id, a.seq) for a in unbatched(message)])
        if back >= 0 and len(sent) > back:
            through = len(sent) - back
            before = stream.acked
            got = stream.acknowledged(through)
            want: dict[int, int] = {}  # the oracle: each alert of those messages, one by one
            for message in sent[before:through]:
                for sub_id, seq in message:
                    want[sub_id] = max(want.get(sub_id, 0), seq + 1)
            want.pop(subs[dropped].id, None)
            assert got == want
    assert stream.id and len(stream.id) == 16


def test_a_stream_not_acknowledged_stops_at_its_limit_and_goes_on_when_acknowledged(
    monkeypatch,
):
    monkeypatch.setattr(streams, "STREAM_UNACKED", 3)
    monkeypatch.setattr(streams, "ALERTS_PER_MESSAGE", 1)
    (sub,) = subscriptions()[:1]
    stream = Stream([sub], {}, watermark=True)
    for n in range(5):
        alert(sub, n)
    stream.wake(sub.id)
    assert [stream.next_message() is not None for _ in range(4)] == [True, True, True, False]
    assert stream.acknowledged(2) == {sub.id: 2}
    assert stream.event.is_set()  # the stream's call wakes, and sends on
    assert [stream.next_message() is not None for _ in range(3)] == [True, True, False]
    plain = Stream([sub], {})  # acknowledged with tokens: it keeps nothing, and never stops
    assert not plain.id and all(plain.next_message() for _ in range(5)) and not plain.unacked


def test_a_watermark_beyond_what_was_sent_is_refused():
    (sub,) = subscriptions()[:1]
    stream = Stream([sub], {}, watermark=True)
    alert(sub, 0)
    stream.wake(sub.id)
    assert stream.next_message() is not None
    try:
        stream.acknowledged(2)
    except ValueError as e:
        assert "2 messages acknowledged of 1 sent" in str(e)
    else:
        raise AssertionError("an acknowledgement of a message not sent was taken")
    assert stream.acknowledged(1) == {sub.id: 1}


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=40),
    st.integers(1, 50),
)
def test_a_stream_over_two_logs_tables_and_a_mailbox_sends_every_alert_once(alerts, room):
    """A node leading two keys' logs streams subscriptions of both (each key's mailboxes
    kept as a table of columns) and one of a plain mailbox: its messages carry every alert
    once, each subscription's in order of number, as the mailboxes one by one hold them."""
    from cqengine.core.alerts.mailboxes import Subscriptions, alert_batch
    from cqengine.core.homelog.table import AlertTable

    subs = Subscriptions()
    for i in range(6):
        subs[i + 1] = Subscription(i + 1, b"", ["levee"], 1, "levee", key=1 + i // 3)
    tables = {key: AlertTable(subs, 1 << 20) for key in (1, 2)}
    expected: dict[int, list[tuple[int, str]]] = {}
    for n, (i, _) in enumerate(alerts):
        sub = subs[i + 1]
        docno = f"D{n}"
        if i == 5:  # the plain one
            assert sub.mailbox.offer((docno, "", ""))
        else:
            tables[sub.key].offer(alert_batch([((docno, "", ""), [sub.id])]))
        expected.setdefault(sub.id, []).append((len(expected.get(sub.id, [])), docno))
    assert subs[1].table is not None or 1 not in expected
    stream = Stream(list(subs.values()), {})
    got: dict[int, list[tuple[int, str]]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(streams, "ALERTS_PER_MESSAGE", room)
        while (message := stream.next_message()) is not None:
            for a in unbatched(message):
                got.setdefault(a.subscription_id, []).append((a.seq, a.docno))
    assert got == expected
