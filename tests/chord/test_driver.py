"""The driver (chord.protocol.driver): an operation's Fanout of calls is made at once on a live node
and one after the other in the simulator, and in both it is resumed with every reply in
order, a PeerUnreachable in place of each call that was not answered."""

from __future__ import annotations

import asyncio

import pytest

from chord.live.driving import UNWAITED, drive_async
from chord.protocol.calls import Call, Fanout, PeerFailed, PeerUnreachable, Refused
from chord.protocol.driver import drive
from chord.protocol.routing import NodeRef

PEERS = [NodeRef(i, f"127.0.0.1:{9000 + i}") for i in range(1, 5)]
DOWN = PEERS[2]


def op():
    replies = yield Fanout(tuple(Call(p, "Ping", p.id) for p in PEERS))
    after = yield Call(PEERS[0], "Ping", 0)  # and on, as after any call
    return replies, after


def check(replies, after) -> None:
    assert [r if not isinstance(r, PeerUnreachable) else "down" for r in replies] == [
        10,
        20,
        "down",
        40,
    ]
    assert after == 0


def test_a_fanout_in_the_simulator_gives_every_reply_in_order():
    made = []

    def call(c: Call):
        made.append(c.peer)
        if c.peer == DOWN:
            raise PeerUnreachable(c.peer, "UNAVAILABLE")
        return c.request * 10

    check(*drive(op(), call))
    assert made == [*PEERS, PEERS[0]]


def test_a_fanout_on_a_live_node_makes_its_calls_at_once():
    waiting = []
    all_sent = asyncio.Event()

    async def answer(c: Call):
        waiting.append(c.peer)
        if len(waiting) == len(PEERS):
            all_sent.set()
        await all_sent.wait()  # every call is on its way before any is answered
        if c.peer == DOWN:
            raise PeerUnreachable(c.peer, "UNAVAILABLE")
        return c.request * 10

    def call(c: Call):
        return answer(c) if c.request else 0  # a request to oneself: answered at once

    check(*asyncio.run(asyncio.wait_for(drive_async(op(), call), 5)))


def test_any_other_failure_of_a_fanout_ends_the_operation():
    closed = []

    def failing():
        try:
            yield Fanout((Call(PEERS[0], "Ping", 1),))
        finally:
            closed.append(True)

    def call(c: Call):
        raise ValueError("not a network failure")

    with pytest.raises(ValueError):
        drive(failing(), call)
    assert closed == [True]


def test_a_fanout_of_enough_answers_goes_on_without_the_silent_one():
    """A fanout that needs only `enough` answers (a majority of a log's members) is
    resumed once they came: the call to a stopped peer, silent until it would time out,
    is in its place as not answered, and still goes on on its own."""
    silent = asyncio.Event()  # a stopped peer: it answers when told to, much later
    finished = []

    async def answer(c: Call):
        if c.peer == DOWN:
            await silent.wait()
        finished.append(c.peer)
        return c.request * 10

    def fanout():
        return (yield Fanout(tuple(Call(p, "Ping", p.id) for p in PEERS), enough=3))

    async def run():
        replies = await asyncio.wait_for(drive_async(fanout(), answer), 5)
        assert DOWN not in finished
        silent.set()  # it answers after all: its call was not cancelled
        await asyncio.wait_for(asyncio.gather(*UNWAITED), 5)
        return replies

    replies = asyncio.run(run())
    assert [r if not isinstance(r, PeerUnreachable) else "down" for r in replies] == [
        10,
        20,
        "down",
        40,
    ]
    assert DOWN in finished


def test_an_error_a_peer_answers_with_is_that_peer_failing_the_call():
    """A StatusError a call raises (a node calling itself, any call in the simulator) is
    thrown into the operation as PeerFailed, naming the peer and the code, in a fanout and
    alone, on both drivers; any other exception still ends the operation."""

    def call(c: Call):
        if c.peer == DOWN:
            raise Refused("Ping: malformed")
        return c.request * 10

    def failing():
        replies = yield Fanout(tuple(Call(p, "Ping", p.id) for p in PEERS))
        try:
            yield Call(DOWN, "Ping", 0)
        except PeerFailed as e:
            return replies, e
        raise AssertionError("the failed call was answered")

    async def call_async(c: Call):
        return call(c)

    for replies, alone in [drive(failing(), call), asyncio.run(drive_async(failing(), call_async))]:
        failed = replies[2]
        assert isinstance(failed, PeerFailed) and failed.peer == DOWN
        assert failed.code == "INVALID_ARGUMENT" and "malformed" in failed.details
        assert alone.peer == DOWN and alone.code == "INVALID_ARGUMENT"

    def bug(c: Call):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        drive(op(), bug)
