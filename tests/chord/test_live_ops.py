"""Operations in the live shell when their caller goes away: a request's operation runs to
its end, and one cancelled while it waits on a call is closed at once (its clean-up runs).
And calls to a node that is not a member of the ring (joining, or stopping) are refused."""

import asyncio

import grpc
from support.waiting import eventually_async

from chord.live.server import LiveNode
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import Call, PeerFailed
from chord.protocol.node import NodeRef

PEER = NodeRef(1, "127.0.0.1:1")


def slow_transport(node: LiveNode, seconds: float) -> list[str]:
    """Calls answer after `seconds`; the methods of the calls under way, as they start."""
    started = []

    async def call(peer, method, request):
        started.append(method)
        await asyncio.sleep(seconds)
        return pb.Empty()

    node.transport.call = call
    return started


def test_a_request_whose_caller_is_cancelled_still_runs_to_its_end():
    node = LiveNode("127.0.0.1", 0)
    calls = slow_transport(node, 0.2)
    steps = []

    def op():
        steps.append("begun")
        yield Call(PEER, "Ping", pb.Empty())
        steps.append("ended")
        return pb.Empty()

    async def main():
        handler = asyncio.create_task(node._to_the_end(op()))
        await eventually_async(lambda: calls, 5, "the operation's call under way")
        handler.cancel()  # the caller went away
        await asyncio.gather(handler, return_exceptions=True)
        assert steps == ["begun"]
        await asyncio.wait_for(asyncio.gather(*node._background), 5)

    asyncio.run(main())
    assert steps == ["begun", "ended"]


def test_an_operation_cancelled_mid_call_is_closed_at_once():
    node = LiveNode("127.0.0.1", 0)
    calls = slow_transport(node, 5.0)
    steps = []

    def op():
        try:
            yield Call(PEER, "Ping", pb.Empty())
            steps.append("answered")
        finally:
            steps.append("cleaned up")

    async def main():
        task = asyncio.create_task(node.run_op(op()))
        await eventually_async(lambda: calls, 5, "the operation's call under way")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert steps == ["cleaned up"]

    asyncio.run(main())


def test_a_node_refuses_calls_until_it_knows_its_successor_and_once_it_stops():
    """Joining, a node believes itself alone (and would take every key for its own) until
    it knows its successor; stopping, it has handed what it holds on. Meanwhile every call
    but a health check is refused (UNAVAILABLE: its callers route around it). From its
    first Notify on the ring counts on it, and it answers."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from chord.live.grpc_transport import GrpcTransport
    from chord.protocol.calls import PeerUnreachable
    from cqengine.live.ports import free_ports

    async def main():
        port_b, port_x = free_ports(2)
        b, x = LiveNode("127.0.0.1", port_b), LiveNode("127.0.0.1", port_x)
        await b.start()
        slow = {"FindSuccessor", "Notify", "Leave"}  # the join's steps, the leave's hand-over
        call = x.transport.call

        async def slowly(peer, method, request):
            if method in slow:
                await asyncio.sleep(1.0)
            return await call(peer, method, request)

        x.transport.call = slowly
        outside = GrpcTransport(timeout=2.0, patience=2.0)

        async def answers() -> bool:
            try:
                await outside.call(x.me, "GetNeighbors", pb.Empty())
                return True
            except PeerUnreachable as e:
                assert e.refused  # refused at once, not left to time out
                return False

        async def health() -> int:
            async with grpc.aio.insecure_channel(x.me.address) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                return (await stub.Check(health_pb2.HealthCheckRequest())).status

        async def listening() -> bool:
            try:
                await health()
                return True
            except grpc.aio.AioRpcError:
                return False

        try:
            joining = asyncio.create_task(x.start(join=b.me.address))
            # listening, its lookup not yet answered
            await eventually_async(listening, 10, "the joining node listening")
            assert not await answers()
            assert await health() == health_pb2.HealthCheckResponse.NOT_SERVING
            # its successor known, its Notify on the way
            await eventually_async(
                lambda: not x.node.table.alone(), 10, "the joining node knowing its successor"
            )
            assert await answers()
            await joining
            assert await answers()
            stopping = asyncio.create_task(x.stop())
            # leaving: its hand-over not yet answered
            await eventually_async(lambda: x.stopped, 10, "the node stopping")
            assert not await answers()
            await stopping
        finally:
            await outside.close()
            await b.stop(graceful=False)
            if x.server is not None:
                await x.server.stop(0)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_handler_that_fails_unexpectedly_answers_internal_and_the_node_serves_on(caplog):
    """An exception no handler expected (a bug, a poison message) ends its call INTERNAL
    with a generic message, never the exception's text (which may tell a caller what it
    should not know); the node's log has it, and the node answers the next call."""
    from chord.live.gate import INTERNAL
    from chord.live.grpc_transport import GrpcTransport
    from cqengine.live.ports import free_ports

    node = LiveNode("127.0.0.1", free_ports(1)[0])
    handle = node.node.handle

    def poisoned(method, request):
        if method == "GetNeighbors":
            raise RuntimeError("secret detail of the node's state")
        return handle(method, request)

    node.node.handle = poisoned

    async def main():
        await node.start()
        outside = GrpcTransport(timeout=2.0)
        try:
            try:
                await outside.call(node.me, "GetNeighbors", pb.Empty())
                raise AssertionError("the poisoned call answered")
            except PeerFailed as e:  # (the node failed that call: it is not gone)
                assert (e.code, e.details) == ("INTERNAL", INTERNAL)
            state = await outside.call(node.me, "GetState", pb.Empty())
            assert state.node.address == node.me.address
        finally:
            await outside.close()
            await node.stop(graceful=False)

    with caplog.at_level("ERROR", logger="chord.live.server"):
        asyncio.run(asyncio.wait_for(main(), 30))
    assert "secret detail" in caplog.text  # in the log, not on the wire


def test_bytes_that_are_no_message_are_refused_as_bad_input_never_unknown():
    """Random bytes to every method of a node (and its health service): each call ends
    INVALID_ARGUMENT (or, a message after all, whatever its method answers), never UNKNOWN
    with the parser's exception, and the node serves on."""
    import random

    from chord.live.grpc_transport import CHORD_SERVICE
    from cqengine.live.ports import free_ports

    node = LiveNode("127.0.0.1", free_ports(1)[0])
    rng = random.Random(7)
    paths = [f"/{CHORD_SERVICE.full_name}/{m.name}" for m in CHORD_SERVICE.methods]
    paths.append("/grpc.health.v1.Health/Check")

    async def main():
        await node.start()
        codes = set()
        try:
            async with grpc.aio.insecure_channel(node.me.address) as channel:
                for path in paths:
                    call = channel.unary_unary(
                        path, request_serializer=bytes, response_deserializer=bytes
                    )
                    for _ in range(20):
                        data = rng.randbytes(rng.randrange(1, 64))
                        try:
                            await call(data, timeout=5)
                            codes.add("OK")
                        except grpc.aio.AioRpcError as e:
                            codes.add(e.code().name)
                            assert e.code() != grpc.StatusCode.UNKNOWN, (path, e.details())
                state = await channel.unary_unary(
                    "/chord.Chord/GetState",
                    request_serializer=pb.Empty.SerializeToString,
                    response_deserializer=pb.StateReply.FromString,
                )(pb.Empty(), timeout=5)
                assert state.node.address == node.me.address
        finally:
            await node.stop(graceful=False)
        assert "INVALID_ARGUMENT" in codes

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_leave_refused_by_the_successor_keeps_the_keys():
    """A graceful leave hands its keys on in one Leave; refused (INVALID_ARGUMENT, or any
    failure but a peer unreachable), the keys taken for it go back to the store."""
    from chord.protocol.calls import Refused
    from chord.protocol.node import ChordNode

    me = ChordNode(NodeRef(100, "127.0.0.1:100"))
    me.table.set_successors([NodeRef(200, "127.0.0.1:200")])
    me.table.predecessor = NodeRef(50, "127.0.0.1:50")
    me.store.put_items([(60, b"a"), (90, b"b")])
    op = me.leave()
    call = next(op)
    assert call.method == "Leave" and len(me.store) == 0  # taken for the hand-over
    try:
        op.throw(Refused("Leave: too many successors"))
        raise AssertionError("the refusal was swallowed")
    except Refused:
        pass
    assert len(me.store) == 2
