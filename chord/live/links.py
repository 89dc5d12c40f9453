"""Links: many calls between two nodes over one long-lived gRPC stream (Chord's Exchange).

A unary call costs gRPC a new HTTP/2 stream, its headers, a call object and its callbacks
at both ends: on loopback about twice the CPU time of one message on a stream that stays
open. A node sends the engine's high-rate calls over one Exchange stream to each peer
instead (its `Link`): each request goes in an Envelope with an id, and the reply with the
same id completes it, replies in any order. Nothing else changes for the caller: a call
that fails ends with the same gRPC status a unary call would (grpc.aio.AioRpcError), so
the transport waits, retries and falls back as before; a stream that breaks fails every
call still waiting on it (Broken), and the transport tries each once more on a new stream,
as it does a unary call whose connection broke (a peer that is gone refuses it). At the
receiving end every request is dispatched as a unary one is, each on its own task,
checked by the same Gate (who may open the stream: nodes only over mutual TLS; whether the
node is a member: asked again for every request).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from chord.live.gate import NOT_MEMBER
from chord.live.meter import Meter, charged, metered, stepped
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import StatusError
from chord.protocol.ledger import Ledger
from chord.protocol.transport import REPLY

log = logging.getLogger("chord.live.links")

EXCHANGE = "/chord.Chord/Exchange"
LINKS = "links"  # the account of the streams' reads and writes, at both ends (chord.live.meter)
EOF = grpc.aio.EOF


def failure(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    """What a unary call failing with this status raises."""
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


# grpc has no types: its classes are Any, which mypy lets no class subclass
class Broken(grpc.aio.AioRpcError):  # type: ignore[misc]
    """A call failed because its stream broke under it (not because its peer answered
    so): the transport tries it once more, on a new stream, as it does a unary call whose
    connection broke. A peer that is gone refuses the new one."""

    def __init__(self, cause: grpc.aio.AioRpcError) -> None:
        super().__init__(
            cause.code(), grpc.aio.Metadata(), grpc.aio.Metadata(), cause.details() or ""
        )


class Link:
    """My end of one Exchange stream to a peer."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        meter: Meter | None = None,
        metadata: Sequence[tuple[str, str]] | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        """`metadata`: sent as the stream opens (the ring's identity, chord.live.gate);
        `ledger`: counts each call's request and reply (their bodies' bytes)."""
        self.stream = channel.stream_stream(
            EXCHANGE,
            request_serializer=metered(meter, "serialize", pb.Envelope.SerializeToString),
            response_deserializer=metered(meter, "parse", pb.Envelope.FromString),
        )(metadata=metadata)
        self.meter, self.ledger = meter, ledger
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[pb.Envelope]] = {}
        self.writing = asyncio.Lock()  # one write at a time on a stream
        self.broken: Broken | None = None
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def call(
        self, method: str, request: Message, reply_class: type[Message], timeout: float
    ) -> Any:
        """The reply to the request, or the AioRpcError a unary call would have raised."""
        if self.broken is not None:
            raise self.broken
        call_id = next(self.ids)
        done = self.waiting[call_id] = asyncio.get_running_loop().create_future()
        try:
            body = charged(self.meter, "serialize", request.SerializeToString)
            if self.ledger is not None:
                self.ledger.record(method, len(body))
            async with asyncio.timeout(timeout):
                async with self.writing:
                    envelope = pb.Envelope(id=call_id, method=method, body=body)
                    await stepped(self.meter, LINKS, self.stream.write(envelope))
                reply: pb.Envelope = await done
        except TimeoutError:
            raise failure(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        except Broken:
            raise
        except grpc.aio.AioRpcError as e:  # the stream ended under the write
            raise self._break(e) from None
        except (grpc.aio.UsageError, asyncio.InvalidStateError):
            raise self._break(failure(grpc.StatusCode.UNAVAILABLE, "the stream ended")) from None
        finally:
            self.waiting.pop(call_id, None)
            if done.done() and not done.cancelled():
                done.exception()  # the stream broke while this call was still being written
        if reply.code:
            raise failure(getattr(grpc.StatusCode, reply.code), reply.error)
        if self.ledger is not None:
            self.ledger.record(method + REPLY, len(reply.body))
        return charged(self.meter, "parse", reply_class.FromString, reply.body)

    async def _read(self) -> None:
        try:
            while (reply := await stepped(self.meter, LINKS, self.stream.read())) is not EOF:
                done = self.waiting.get(reply.id)
                if done is not None and not done.done():
                    done.set_result(reply)
            self._break(failure(grpc.StatusCode.UNAVAILABLE, "the peer ended the stream"))
        except grpc.aio.AioRpcError as e:
            self._break(e)
        except asyncio.CancelledError:
            self._break(failure(grpc.StatusCode.CANCELLED, "the link was closed"))
            raise

    def _break(self, error: grpc.aio.AioRpcError) -> Broken:
        """The stream is over: every call still waiting fails (Broken, the first error)."""
        if self.broken is None:
            self.broken = Broken(error)
        for done in self.waiting.values():
            if not done.done():
                done.set_exception(self.broken)
        return self.broken

    def close(self) -> None:
        self.reader.cancel()
        self.stream.cancel()


Dispatch = Callable[[str, Any], Awaitable[Any]]
Method = tuple[str, type[Message], type[Message]]  # its wire path, request and reply classes


class Exchanges:
    """The receiving end of Exchange: each request dispatched as the unary call of its
    method would be (`methods`: name -> (path, request class, reply class)), on its own
    task, its reply written when it is ready. `close` ends every stream (as the node
    stops, before its server does: a stream cut by the server's stop is an error)."""

    def __init__(
        self,
        dispatch: Dispatch,
        methods: dict[str, Method],
        member: Callable[[], bool],
        meter: Meter | None = None,
    ) -> None:
        self.dispatch, self.methods, self.member, self.meter = dispatch, methods, member, meter
        self.closing = asyncio.Event()

    def handler(self) -> grpc.RpcMethodHandler:
        meter = self.meter
        return grpc.stream_stream_rpc_method_handler(
            self._exchange,
            request_deserializer=metered(meter, "parse", pb.Envelope.FromString),
            response_serializer=metered(meter, "serialize", pb.Envelope.SerializeToString),
        )

    def close(self) -> None:
        self.closing.set()

    async def _exchange(
        self, requests: AsyncIterator[pb.Envelope], context: grpc.aio.ServicerContext
    ) -> None:
        writing = asyncio.Lock()
        answering: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()

        async def reply(envelope: pb.Envelope) -> None:
            async with writing:
                await stepped(self.meter, LINKS, context.write(envelope))

        async def read() -> None:
            incoming = requests.__aiter__()
            while True:
                try:
                    envelope = await stepped(self.meter, LINKS, incoming.__anext__())
                except StopAsyncIteration:
                    break
                task = loop.create_task(self._answer(envelope, reply))
                answering.add(task)
                task.add_done_callback(answering.discard)
            if answering:  # the caller is done writing: its last replies still go
                await asyncio.gather(*answering, return_exceptions=True)

        reading, closing = loop.create_task(read()), loop.create_task(self.closing.wait())
        try:
            await asyncio.wait([reading, closing], return_when=asyncio.FIRST_COMPLETED)
        finally:
            # a request's operation runs on without its reply (LiveNode._to_the_end)
            for task in (reading, closing, *answering):
                task.cancel()
        error = reading.exception() if reading.done() and not reading.cancelled() else None
        if error is not None:
            raise error

    async def _answer(
        self, envelope: pb.Envelope, reply: Callable[[pb.Envelope], Awaitable[None]]
    ) -> None:
        meter = self.meter
        out = pb.Envelope(id=envelope.id)
        try:
            if not self.member():
                raise _Status("UNAVAILABLE", NOT_MEMBER)
            kinds = self.methods.get(envelope.method)
            if kinds is None:
                raise _Status("UNIMPLEMENTED", f"no method {envelope.method} here")
            try:
                request = charged(meter, "parse", kinds[1].FromString, envelope.body)
            except Exception:
                raise _Status("INVALID_ARGUMENT", "the request is no message of its kind") from None
            answer = await self.dispatch(envelope.method, request)
            out.body = charged(meter, "serialize", answer.SerializeToString)
        except _Status as e:
            out.code, out.error = e.code, e.details
        except StatusError as e:  # malformed (Refused: it changed nothing), say
            out.code, out.error = e.code, str(e)
        except Exception:
            log.exception("%s failed", envelope.method)
            out.code, out.error = "INTERNAL", "internal error; the node's log has the details"
        await reply(out)


class _Status(Exception):
    def __init__(self, code: str, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details
