"""The driver (chord.driver): an operation's Fanout of calls is made at once on a live node
and one after the other in the simulator, and in both it is resumed with every reply in
order, a PeerUnreachable in place of each call that was not answered."""

from __future__ import annotations

import asyncio

import pytest

from chord.driver import drive, drive_async
from chord.node import Call, Fanout, PeerUnreachable
from chord.routing import NodeRef

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
