"""The meter (chord.live.meter) charges each stretch of CPU time to one account: nested accounts
pause the one around them, so no time counts twice, and nothing is lost: the accounts and
`unmetered` add up to the process's CPU time."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from chord.live.driving import drive_async
from chord.live.meter import (
    UNMETERED,
    UNMETERED_GRPC,
    UNMETERED_WORKERS,
    Meter,
    charged,
    metered,
    stepped,
    thread_cpu,
)
from cqengine.live.costs import STAGES, cost_by_stage, stage_of


def burn(seconds: float) -> None:
    """Spend this much of the thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_nested_accounts_pause_the_outer_one_and_add_up_to_the_process():
    meter = Meter()
    before = time.process_time()
    outer = meter.enter("outer")
    burn(0.02)
    inner = meter.enter("inner")
    burn(0.03)
    meter.leave(inner)
    burn(0.01)
    meter.leave(outer)
    spent = time.process_time() - before
    got = meter.snapshot()
    assert got["inner"] == pytest.approx(0.03, abs=0.01)
    assert got["outer"] == pytest.approx(0.03, abs=0.01)
    assert got["inner"] + got["outer"] <= spent + 1e-3
    assert sum(got.values()) == pytest.approx(time.process_time(), abs=0.01)
    assert meter.counts == {"outer": 1, "inner": 1}


@pytest.mark.skipif(not thread_cpu(), reason="the kernel tells no thread's CPU time here")
def test_the_unmetered_rest_is_split_by_thread_and_still_adds_up_to_the_process():
    """A worker thread's CPU beyond what it charged (`add`) is the workers' rest, not the
    event loop's; the parts add up to the process's CPU time, nothing twice."""
    meter = Meter()
    worked, done = threading.Event(), threading.Event()
    before = meter.snapshot()  # (the test process's CPU so far is the loop thread's rest)

    def work():
        start = time.thread_time()
        burn(0.2)
        meter.add("analysis", time.thread_time() - start)  # charged, as the analyzer does
        burn(0.3)  # and not
        worked.set()
        done.wait(10)  # alive while the snapshot is taken, as a node's worker is

    worker = threading.Thread(target=work, name="analyze_0")
    worker.start()
    worked.wait(10)
    burn(0.1)
    got = meter.snapshot()
    done.set()
    worker.join()
    assert got["analysis"] == pytest.approx(0.2, abs=0.02)
    # the kernel samples threads' time in 10 ms ticks (coarser on a busy machine): what
    # tells the split is the worker's 0.3 s among the workers', not on the loop's thread
    assert 0.2 < got[UNMETERED_WORKERS] < 0.45
    assert 0.05 <= got[UNMETERED] - before[UNMETERED] < 0.3 and got[UNMETERED_GRPC] >= 0
    assert sum(got.values()) == pytest.approx(time.process_time(), abs=0.02)


def test_a_stepped_awaitable_is_charged_its_steps_not_what_runs_while_it_waits():
    meter = Meter()

    async def main():
        other_done = asyncio.Event()

        async def call(fail: bool) -> int:
            burn(0.02)
            await other_done.wait()  # meanwhile another task works
            burn(0.01)
            if fail:
                raise ValueError("refused")
            return 7

        async def other() -> None:
            charged(meter, "other", burn, 0.04)
            other_done.set()

        got = await asyncio.gather(stepped(meter, "calls", call(False)), other())
        assert got[0] == 7
        with pytest.raises(ValueError, match="refused"):
            await stepped(meter, "calls", call(True))
        entered, cancelled = asyncio.Event(), []

        async def hangs() -> None:
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        waiting = asyncio.ensure_future(stepped(meter, "calls", hangs()))
        await entered.wait()
        waiting.cancel()  # a cancellation reaches the awaitable
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert cancelled == [True]

    asyncio.run(main())
    assert meter.seconds["calls"] == pytest.approx(0.06, abs=0.015)
    assert meter.seconds["other"] == pytest.approx(0.04, abs=0.01)
    assert stepped(None, "calls", main) is main


def test_a_failing_call_still_leaves_its_account():
    meter = Meter()

    def fails(x):
        burn(0.01)
        raise ValueError(x)

    with pytest.raises(ValueError):
        metered(meter, "bad", fails)(1)
    burn(0.01)  # charged to nothing: the account was left
    assert meter.seconds["bad"] == pytest.approx(0.01, abs=0.005)
    assert metered(None, "x", fails) is fails


def test_each_step_of_an_operation_is_charged_to_its_generator():
    meter = Meter()

    def op():
        burn(0.01)
        reply = yield "call"
        burn(0.01)
        return reply * 2

    async def call(c):
        burn(0.02)  # the call's own work: not the operation's
        return 21

    assert asyncio.run(drive_async(op(), call, meter)) == 42
    account = "op " + op.__qualname__
    assert meter.seconds[account] == pytest.approx(0.02, abs=0.008)
    assert meter.counts[account] == 2


def test_every_account_a_node_charges_has_a_stage():
    assert stage_of("op Announcer.announce") == "announcement"
    assert stage_of("op Replication.reconcile") == "replication"
    assert stage_of("op DN.publish_batch") == "announcement"
    assert stage_of("op DN.on_matched") == "reports"
    assert stage_of("Deliver") == "home and mailbox"
    assert stage_of(UNMETERED) == "event loop, outside every account"
    assert stage_of(UNMETERED_GRPC) == "gRPC's own threads (sockets, TLS, timers)"
    assert stage_of("op Something.new") == "other"
    # a client's calls, each step of their handlers (chord.live.gate)
    assert stage_of("AckAlerts") == stage_of("StreamAlerts") == "streaming to clients"
    assert stage_of("PublishBatch") == "publishing (clients' calls)"
    assert stage_of("SubscribeBatch") == "subscribing"
    costs = cost_by_stage({"Deliver": 1.0, "op Home._x": 2.0, "parse": 0.5, "weird": 0.25})
    assert costs == {
        "home and mailbox": 3.0,
        "protobuf (parse, serialize)": 0.5,
        "other": 0.25,
    }
    assert list(costs)[:2] == [s for s in STAGES if s in costs][:2]
