"""Operations in the live shell when their caller goes away: a request's operation runs to
its end, and one cancelled while it waits on a call is closed at once (its clean-up runs)."""

import asyncio

from chord.live import LiveNode
from chord.node import Call, NodeRef
from chord.proto import chord_pb2 as pb

PEER = NodeRef(1, "127.0.0.1:1")


def slow_transport(node: LiveNode, seconds: float) -> None:
    async def call(peer, method, request):
        await asyncio.sleep(seconds)
        return pb.Empty()

    node.transport.call = call


def test_a_request_whose_caller_is_cancelled_still_runs_to_its_end():
    node = LiveNode("127.0.0.1", 0)
    slow_transport(node, 0.2)
    steps = []

    def op():
        steps.append("begun")
        yield Call(PEER, "Ping", pb.Empty())
        steps.append("ended")
        return pb.Empty()

    async def main():
        handler = asyncio.create_task(node._to_the_end(op()))
        await asyncio.sleep(0.05)
        handler.cancel()  # the caller went away
        await asyncio.gather(handler, return_exceptions=True)
        assert steps == ["begun"]
        await asyncio.wait_for(asyncio.gather(*node._background), 5)

    asyncio.run(main())
    assert steps == ["begun", "ended"]


def test_an_operation_cancelled_mid_call_is_closed_at_once():
    node = LiveNode("127.0.0.1", 0)
    slow_transport(node, 5.0)
    steps = []

    def op():
        try:
            yield Call(PEER, "Ping", pb.Empty())
            steps.append("answered")
        finally:
            steps.append("cleaned up")

    async def main():
        task = asyncio.create_task(node.run_op(op()))
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert steps == ["cleaned up"]

    asyncio.run(main())
