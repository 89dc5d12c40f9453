"""A home's alert streams (cqengine.core.home.streams), without a network: alerts leave
their mailboxes only when acknowledged, so a broken stream loses nothing and a new one
resumes from its client's nexts; what a watermark acknowledges is what the alerts of the
messages it covers acknowledge one by one; a newer stream takes a subscription over; and
a stream whose client does not acknowledge stops at STREAM_UNACKED messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from cqengine.core.alerts.batches import numbered_alerts, numbered_documents
from cqengine.core.alerts.mailboxes import Subscription
from cqengine.core.basis.errors import EngineError
from cqengine.core.home import streams
from cqengine.core.home.streams import Stream, Streams
from cqengine.core.node import EngineNode
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator

SUBS = 5


def subscriptions(n: int = SUBS, key: int = 0) -> list[Subscription]:
    return [Subscription(i, b"", ["levee"], 1, "levee", key=key) for i in range(1, n + 1)]


def alert(sub: Subscription, n: int) -> None:
    assert sub.mailbox.offer((f"D{sub.id}-{n}", "", ""))


def sent_alerts(message) -> list[tuple[int, int]]:
    """A message's alerts: (subscription, number) each."""
    return [
        (sub_id, seq)
        for _, ids, seqs in numbered_documents(message)
        for sub_id, seq in zip(ids, seqs)
    ]


def engine(nodes: int = 1) -> EngineNode:
    """The first engine node of a simulated ring (alone in it, by default: it serves every
    home key)."""
    sim = EngineSimulator(nodes, Settings())
    return sim.engines[sorted(sim.engines)[0]]


def registry(node: EngineNode, subs: list[Subscription]) -> Streams:
    """The node's streams, these subscriptions held by the node."""
    for sub in subs:
        node.ctx.subscriptions[sub.id] = sub
    return Streams(node.ctx, node.placement.served)


class Notified:
    """A stream's notifications, counted (what the live shell's call waits on)."""

    def __init__(self) -> None:
        self.times = 0

    def __call__(self) -> None:
        self.times += 1


# ---- one stream ---------------------------------------------------------------------------

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
            sent.append(sent_alerts(message))
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
    notified = Notified()
    stream = Stream([sub], {}, watermark=True, notify=notified)
    for n in range(5):
        alert(sub, n)
    stream.wake(sub.id)
    assert [stream.next_message() is not None for _ in range(4)] == [True, True, True, False]
    before = notified.times
    assert stream.acknowledged(2) == {sub.id: 2}
    assert notified.times == before + 1  # the stream's call wakes, and sends on
    assert [stream.next_message() is not None for _ in range(3)] == [True, True, False]
    plain = Stream([sub], {})  # acknowledged with tokens: it keeps nothing, and never stops
    assert not plain.id and all(plain.next_message() for _ in range(5)) and not plain.unacked


def test_a_watermark_beyond_what_was_sent_is_refused():
    (sub,) = subscriptions()[:1]
    stream = Stream([sub], {}, watermark=True)
    alert(sub, 0)
    stream.wake(sub.id)
    assert stream.next_message() is not None
    with pytest.raises(EngineError, match="2 messages acknowledged of 1 sent") as refused:
        stream.acknowledged(2)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert stream.acknowledged(1) == {sub.id: 1}


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=40),
    st.integers(1, 50),
)
def test_a_stream_over_two_logs_tables_and_a_mailbox_sends_every_alert_once(alerts, room):
    """A node leading two keys' logs streams subscriptions of both (each key's mailboxes
    kept as a table of columns) and one of a plain mailbox: its messages carry every alert
    once, each subscription's in order of number, as the mailboxes one by one hold them."""
    from cqengine.core.alerts.batches import alert_batch
    from cqengine.core.alerts.mailboxes import Subscriptions
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
            for sub_id, alerted in numbered_alerts(message).items():
                got.setdefault(sub_id, []).extend((seq, doc[0]) for seq, doc in alerted)
    assert got == expected


# ---- a node's streams, against a model of their client ------------------------------------


class StreamsAgainstAClient(RuleBasedStateMachine):
    """One node's streams and one client of three subscriptions, as Client.alerts runs:
    it receives messages, hands them out in order, acknowledges what it handed out (by
    watermark or by tokens), and when its stream breaks opens another from its nexts
    (acknowledging them, as StreamAlerts does). The model: each subscription's alerts
    offered, and the number of the first alert its client has not acknowledged. Whatever
    happens, a mailbox's first number is that number (alerts leave only on
    acknowledgement), the alerts handed out are those offered, in order, none twice, and a
    stream holds at most STREAM_UNACKED messages unacknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.node = engine()
        self.subs = subscriptions(3)
        self.streams = registry(self.node, self.subs)
        self.offered: dict[int, list[str]] = {s.id: [] for s in self.subs}
        self.handed: dict[int, list[str]] = {s.id: [] for s in self.subs}
        self.acked = {s.id: 0 for s in self.subs}  # the model's first number of each mailbox
        self.older: list[Stream] = []  # streams taken over whose calls have not ended yet
        self.stream = self._open(False)

    def _open(self, watermark: bool) -> Stream:
        """A new stream from the client's nexts, acknowledging them first (StreamAlerts)."""
        nexts = {s.id: len(self.handed[s.id]) for s in self.subs}
        self.node.home.acknowledge([(s, nexts[s.id]) for s in self.subs])
        self.acked = dict(nexts)
        self.notified = Notified()
        self.inbox: list = []  # messages received, not yet handed out
        self.out: list[list[tuple[int, int]]] = []  # this stream's messages handed out
        return self.streams.open(self.subs, nexts, watermark, self.notified)

    @rule(i=st.integers(0, 2), n=st.integers(1, 4))
    def alerts_arrive(self, i, n):
        sub = self.subs[i]
        before = self.notified.times
        for _ in range(n):
            alert(sub, len(self.offered[sub.id]))
            self.offered[sub.id].append(f"D{sub.id}-{len(self.offered[sub.id])}")
        self.streams.alerted([sub.id])  # the home tells its listeners
        assert self.notified.times == before + 1  # the stream serving it, at once

    @rule(most=st.integers(1, 5))
    def send(self, most):
        for _ in range(most):
            message = self.stream.next_message()
            if message is None:
                break
            self.inbox.append(message)
        for old in self.older:  # their subscriptions were taken over: nothing to send
            assert old.next_message() is None

    @precondition(lambda self: self.inbox)
    @rule(data=st.data())
    def hand_out(self, data):
        k = data.draw(st.integers(1, len(self.inbox)))
        for message in self.inbox[:k]:
            for sub_id, alerted in numbered_alerts(message).items():
                for seq, doc in alerted:
                    assert seq == len(self.handed[sub_id])  # no gap, none twice
                    self.handed[sub_id].append(doc[0])
            self.out.append(sent_alerts(message))
        del self.inbox[:k]

    @precondition(lambda self: self.stream.id)
    @rule(data=st.data())
    def acknowledge_by_watermark(self, data):
        through = data.draw(st.integers(self.stream.acked, len(self.out)))
        acks = self.streams.watermark(self.stream.id, through)
        assert self.node.home.acknowledge(acks) is None  # (no home log here)
        for sub_id, seq in (alert for message in self.out[:through] for alert in message):
            self.acked[sub_id] = max(self.acked[sub_id], seq + 1)

    @rule()
    def acknowledge_by_tokens(self):
        nexts = {s.id: len(self.handed[s.id]) for s in self.subs}
        self.node.home.acknowledge([(s, nexts[s.id]) for s in self.subs])
        self.acked = nexts

    @rule(watermark=st.booleans(), noticed=st.booleans())
    def break_and_resume(self, watermark, noticed):
        """The stream breaks: what the client received and did not hand out is lost with
        it, and it opens another. The old call ends at once (`noticed`), or only after the
        new one took its subscriptions over."""
        old = self.stream
        if noticed:
            self.streams.close(old)
        self.stream = self._open(watermark)
        if not noticed:
            assert not old.subs  # taken over, every one
            self.older.append(old)
        if old.id and noticed:  # its watermark ended with it
            with pytest.raises(EngineError) as gone:
                self.streams.watermark(old.id, old.messages_sent)
            assert gone.value.code == "NOT_FOUND"
        elif old.id:  # it releases nothing of the subscriptions taken over
            assert self.streams.watermark(old.id, old.messages_sent) == []

    @precondition(lambda self: self.older)
    @rule()
    def an_older_call_ends(self):
        self.streams.close(self.older.pop(0))

    @rule()
    def drain(self):
        """The client reads everything there is, acknowledging as it goes: every alert
        offered comes, once, in order. (A message carries one alert at least, and an
        acknowledgement makes room for one message at least: a stream that sent an alert
        twice would go on past as many turns.)"""
        for _ in range(2 * sum(map(len, self.offered.values())) + 2):
            message = self.stream.next_message()
            if message is None and self.stream.unacked:
                self.hand_out_all()
                self.acknowledge_all()
                continue
            if message is None:
                break
            self.inbox.append(message)
        else:
            raise AssertionError("the stream sent more messages than it had alerts")
        self.hand_out_all()
        assert self.handed == self.offered

    def hand_out_all(self) -> None:
        for message in self.inbox:
            for sub_id, alerted in numbered_alerts(message).items():
                for seq, doc in alerted:
                    assert seq == len(self.handed[sub_id])
                    self.handed[sub_id].append(doc[0])
            self.out.append(sent_alerts(message))
        self.inbox = []

    def acknowledge_all(self) -> None:
        acks = self.streams.watermark(self.stream.id, len(self.out))
        self.node.home.acknowledge(acks)
        for sub_id, seq in (alert for message in self.out for alert in message):
            self.acked[sub_id] = max(self.acked[sub_id], seq + 1)

    @invariant()
    def mailboxes_keep_what_is_not_acknowledged(self):
        for sub in self.subs:
            box = sub.mailbox
            assert box.first == self.acked[sub.id] <= len(self.handed[sub.id])
            assert [doc[0] for doc in box.queue] == self.offered[sub.id][box.first :]

    @invariant()
    def each_subscription_has_one_stream(self):
        assert all(self.streams.serving[s.id] is self.stream for s in self.subs)
        assert len(self.stream.unacked) <= streams.STREAM_UNACKED


def test_a_nodes_streams_lose_nothing_and_release_only_what_is_acknowledged(monkeypatch):
    monkeypatch.setattr(streams, "STREAM_UNACKED", 3)
    monkeypatch.setattr(streams, "ALERTS_PER_MESSAGE", 2)
    run_state_machine_as_test(
        StreamsAgainstAClient, settings=settings(max_examples=60, stateful_step_count=30)
    )


# ---- taking over, ending, moving ----------------------------------------------------------


def test_a_newer_stream_takes_a_subscription_over_and_the_older_goes_on_with_the_rest():
    node = engine()
    a, b, c = subs = subscriptions(3)
    reg = registry(node, subs)
    first_told, second_told = Notified(), Notified()
    first = reg.open([a, b], {}, notify=first_told)
    second = reg.open([b, c], {}, notify=second_told)
    assert set(first.subs) == {a.id} and set(second.subs) == {b.id, c.id}
    assert first_told.times == 1  # told it lost one
    assert reg.serving == {a.id: first, b.id: second, c.id: second}
    for sub in subs:
        alert(sub, 0)
    reg.alerted([s.id for s in subs])
    assert sent_alerts(first.next_message()) == [(a.id, 0)]
    assert sorted(sent_alerts(second.next_message())) == [(b.id, 0), (c.id, 0)]
    assert first.next_message() is None and second.next_message() is None
    reg.close(first)  # the older call ends: the newer keeps what it took over
    assert reg.serving == {b.id: second, c.id: second}
    reg.unsubscribed(c.id)
    assert set(second.subs) == {b.id} and reg.serving == {b.id: second}
    reg.close(second)
    assert reg.serving == {}


def test_a_watermark_names_an_open_stream_of_the_node():
    node = engine()
    (sub,) = subscriptions(1)
    reg = registry(node, [sub])
    stream = reg.open([sub], {}, watermark=True)
    assert reg.by_id == {stream.id: stream}
    with pytest.raises(EngineError, match="no open stream of that id at node-0") as unknown:
        reg.watermark(b"x" * 16, 0)
    assert unknown.value.code == "NOT_FOUND"
    alert(sub, 0)
    reg.alerted([sub.id])
    assert stream.next_message() is not None
    del node.ctx.subscriptions[sub.id]  # ended meanwhile: nothing of it to acknowledge
    assert reg.watermark(stream.id, 1) == []
    reg.close(stream)
    assert reg.by_id == {}
    plain = reg.open([sub], {})
    assert not plain.id and reg.by_id == {}


def test_streams_of_subscriptions_the_node_no_longer_serves_are_moved():
    node = engine(nodes=3)
    mine, theirs, gone = subscriptions(3, key=node.me.id)
    theirs.key = node.ctx.chord.table.successor.id  # its successor's own key
    assert node.ctx.serves(mine.key) and not node.ctx.serves(theirs.key)
    reg = registry(node, [mine, theirs, gone])
    told = {name: Notified() for name in ("mine", "theirs", "gone")}
    streams_of = {
        name: reg.open([sub], {}, notify=told[name])
        for name, sub in (("mine", mine), ("theirs", theirs), ("gone", gone))
    }
    del node.ctx.subscriptions[gone.id]
    reg.region_changed()
    assert {name: s.moved for name, s in streams_of.items()} == {
        "mine": False,
        "theirs": True,
        "gone": True,
    }
    assert {name: n.times for name, n in told.items()} == {"mine": 0, "theirs": 1, "gone": 1}
    # a watermark naming a subscription served elsewhere now: the client follows it
    moving = reg.open([theirs], {}, watermark=True)
    alert(theirs, 0)
    reg.alerted([theirs.id])
    assert moving.next_message() is not None
    with pytest.raises(EngineError, match="served by another node now") as moved:
        reg.watermark(moving.id, 1)
    assert moved.value.code == "UNAVAILABLE"
