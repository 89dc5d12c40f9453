"""The engine on the live shell: an EngineNode inside a LiveNode, and the client API.

`serve_engine` starts a node process's engine. A node that starts a ring takes its
settings from the command line; a node that joins asks its bootstrap node for the ring's
(Engine.GetConfig), so every node of a ring indexes and resolves the same way.

Documents published through a node are gathered into batches (`Batcher`), analyzed off
the event loop, and published as one batch; alerts reach a subscriber's stream as the
batches of whatever waits in its mailboxes.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

import grpc

from chord.live import LiveNode, StartupError, Timing, serve
from cqengine.config import Settings, SettingsError
from cqengine.engine import Document, EngineError, EngineNode, Subscription, prepare
from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc

log = logging.getLogger("cqengine.service")

MAX_REQUEST_DOCS = 10_000  # documents one PublishBatch call may carry
ALERTS_PER_MESSAGE = 1_000  # alerts one message of a stream carries at most


@dataclass
class Publishing:
    """How a node gathers the documents published through it into batches (as Kafka's
    producer: linger.ms, batch.size): a batch goes when it holds `batch_docs` documents
    or `linger_ms` after its first arrived. As DN it gathers the matches QNs report for
    as long, and delivers them in one batch per home node."""
    linger_ms: float = 5.0
    batch_docs: int = 64

    def check(self) -> "Publishing":
        if self.linger_ms < 0 or self.batch_docs < 1:
            raise StartupError(f"--linger-ms must not be negative and --batch-docs must be positive, "
                               f"not {self.linger_ms} and {self.batch_docs}")
        return self


def prepare_all(requests: Sequence[pb.PublishRequest], limit: int) -> list[Document | EngineError]:
    """Each request as a document fit to publish, or why it is not (run off the event loop)."""
    out: list[Document | EngineError] = []
    for r in requests:
        try:
            out.append(prepare(r.docno, r.text, r.title, limit))
        except EngineError as e:
            out.append(e)
    return out


class Batcher:
    """The documents published through this node, gathered into batches: each batch is
    analyzed in a worker thread (the event loop keeps serving meanwhile) and published by
    the engine as one (EngineNode.publish_batch); the next batch gathers meanwhile."""

    def __init__(self, engine: EngineNode, publishing: Publishing) -> None:
        self.engine, self.publishing = engine, publishing
        self.queue: list[tuple[pb.PublishRequest, asyncio.Future]] = []
        self.changed = asyncio.Event()
        self.analyzer = ThreadPoolExecutor(1, thread_name_prefix="analyze")
        self.task: asyncio.Task | None = None

    async def publish(self, requests: Sequence[pb.PublishRequest]) -> list[pb.PublishReply | EngineError]:
        """Publish these documents with the others arriving now; each one's reply, or why
        it was refused."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in requests]
        self.queue += zip(requests, futures)
        self.changed.set()
        return list(await asyncio.gather(*futures))

    async def _run(self) -> None:
        while True:
            batch = await self._gather()
            try:
                await self._publish(batch)
            except Exception as e:  # the batch fails, the node goes on
                log.exception("publishing a batch failed")
                for _, future in batch:
                    if not future.done():
                        future.set_result(EngineError("INTERNAL", f"publishing failed: {type(e).__name__}"))

    async def _gather(self) -> list[tuple[pb.PublishRequest, asyncio.Future]]:
        """The next batch: as many documents as a batch holds, or those that came within
        the linger time of the first."""
        loop = asyncio.get_running_loop()
        size = self.publishing.batch_docs
        while not self.queue:
            self.changed.clear()
            await self.changed.wait()
        deadline = loop.time() + self.publishing.linger_ms / 1000
        while len(self.queue) < size and (left := deadline - loop.time()) > 0:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                break
        batch, self.queue = self.queue[:size], self.queue[size:]
        return batch

    async def _publish(self, batch: list[tuple[pb.PublishRequest, asyncio.Future]]) -> None:
        limit = self.engine.settings.max_document_bytes
        documents = await asyncio.get_running_loop().run_in_executor(
            self.analyzer, prepare_all, [r for r, _ in batch], limit)
        fit = [(d, f) for d, (_, f) in zip(documents, batch) if isinstance(d, Document)]
        replies = self.engine.publish_batch([d for d, _ in fit]) if fit else []
        for (_, future), reply in zip(fit, replies):
            future.set_result(reply)
        for document, (_, future) in zip(documents, batch):
            if isinstance(document, EngineError):
                future.set_result(document)

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.analyzer.shutdown(wait=False, cancel_futures=True)


class Stream:
    """A live StreamAlerts call: its subscriptions, and those with alerts waiting."""

    def __init__(self, subs: Sequence[Subscription]) -> None:
        self.subs = {s.id: s for s in subs}
        self.ready: dict[int, None] = dict.fromkeys(s.id for s in subs if s.mailbox.queue)
        self.event = asyncio.Event()

    def wake(self, sub_id: int) -> None:
        self.ready[sub_id] = None
        self.event.set()

    def drop(self, sub_id: int) -> None:
        """The subscription leaves this stream (unsubscribed, or taken over by a newer one)."""
        self.subs.pop(sub_id, None)
        self.event.set()

    def waiting(self) -> list[tuple[Subscription, int]]:
        """The alerts to send next, up to a message's worth: each subscription, and how many
        of its mailbox's first alerts."""
        out, room = [], ALERTS_PER_MESSAGE
        for sub_id in list(self.ready):
            sub = self.subs.get(sub_id)
            n = min(room, len(sub.mailbox.queue)) if sub is not None else 0
            if n:
                out.append((sub, n))
                room -= n
            if sub is None or n == len(sub.mailbox.queue):
                del self.ready[sub_id]
            if not room:
                break
        return out


class ClientAPI(pb_grpc.CQEngineServicer):
    """Subscribe, Unsubscribe, Publish, PublishBatch, StreamAlerts and Stats on one node."""

    def __init__(self, live: LiveNode, engine: EngineNode, publishing: Publishing) -> None:
        self.live, self.engine = live, engine
        self.batcher = Batcher(engine, publishing)
        self.streams: dict[int, Stream] = {}  # subscription -> its one live stream
        engine.alert_listeners.append(self._wake)

    def _wake(self, sub_id: int) -> None:
        stream = self.streams.get(sub_id)
        if stream is not None:
            stream.wake(sub_id)

    async def _run(self, context, op):
        try:
            return await self.live.run_op(op)
        except EngineError as e:
            await context.abort(getattr(grpc.StatusCode, e.code), str(e))

    async def Subscribe(self, request, context):
        return await self._run(context, self.engine.subscribe(request.query))

    async def Unsubscribe(self, request, context):
        reply = await self._run(context, self.engine.unsubscribe(request.subscription_id, request.token))
        stream = self.streams.pop(request.subscription_id, None)
        if stream is not None:
            stream.drop(request.subscription_id)  # a stream left with none ends
        return reply

    async def Publish(self, request, context):
        (reply,) = await self.batcher.publish([request])
        if isinstance(reply, EngineError):
            await context.abort(getattr(grpc.StatusCode, reply.code), str(reply))
        return reply

    async def PublishBatch(self, request, context):
        n = len(request.documents)
        if not n:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a batch needs at least one document")
        if n > MAX_REQUEST_DOCS:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"a batch of {n} documents; at most "
                                                                  f"{MAX_REQUEST_DOCS} go in one call")
        replies = await self.batcher.publish(request.documents)
        return pb.PublishBatchReply(results=[
            pb.PublishReply(accepted=False, code=r.code, error=str(r)) if isinstance(r, EngineError) else r
            for r in replies])

    async def StreamAlerts(self, request, context):
        keys = [(k.subscription_id, k.token) for k in request.subscriptions]
        if request.subscription_id or request.token or not keys:
            keys.insert(0, (request.subscription_id, request.token))
        try:
            subs = [self.engine.authorized(sub_id, token) for sub_id, token in keys]
        except EngineError as e:
            await context.abort(getattr(grpc.StatusCode, e.code), str(e))
        stream = Stream(subs)
        for sub in subs:
            old = self.streams.get(sub.id)
            if old is not None:
                old.drop(sub.id)  # a newer stream takes the subscription over
            self.streams[sub.id] = stream
        try:
            while stream.subs:
                while batch := stream.waiting():
                    # alerts leave their mailboxes once the stream took them: a stream
                    # cancelled mid-send leaves them for the next one instead of losing them
                    yield pb.Alerts(alerts=[a for sub, n in batch for a in list(sub.mailbox.queue)[:n]])
                    for sub, n in batch:
                        for _ in range(n):
                            sub.mailbox.queue.popleft()
                if not stream.subs:
                    return
                await stream.event.wait()
                stream.event.clear()
        finally:
            for sub_id in stream.subs:
                if self.streams.get(sub_id) is stream:
                    del self.streams[sub_id]

    async def Stats(self, request, context):
        return self.engine.stats(self.live.ledger)


async def fetch_settings(address: str, timeout: float = 5.0) -> Settings:
    """The settings of the ring that `address` belongs to."""
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            reply = await channel.unary_unary(
                "/cqengine.Engine/GetConfig", request_serializer=pb.ConfigRequest.SerializeToString,
                response_deserializer=pb.EngineConfig.FromString)(pb.ConfigRequest(), timeout=timeout)
    except grpc.aio.AioRpcError as e:
        if e.code() == grpc.StatusCode.UNIMPLEMENTED:
            raise StartupError(f"{address} is a ring node without the engine") from None
        raise StartupError(f"cannot reach {address} to join: {e.code().name.lower()}") from None
    try:
        return Settings.from_pb(reply)
    except SettingsError as e:
        raise StartupError(f"the ring's settings are unusable here: {e}") from None


async def serve_engine(host: str, port: int, join: str | None, node_id: int | None, r: int,
                       timing: Timing, settings: Settings | None, advertise: str | None = None,
                       publishing: Publishing | None = None) -> None:
    publishing = (publishing or Publishing()).check()
    if join:
        settings = await fetch_settings(join)
    try:
        settings = (settings or Settings()).validate()
    except SettingsError as e:
        raise StartupError(str(e)) from None
    def later(seconds: float, fn) -> None:
        asyncio.get_running_loop().call_later(seconds, fn)

    await serve(host, port, join, node_id, r, timing, advertise,
                app=lambda chord, spawn: EngineNode(chord, settings, spawn, later=later,
                                                    linger=publishing.linger_ms / 1000),
                add_services=lambda live, server: pb_grpc.add_CQEngineServicer_to_server(
                    ClientAPI(live, live.app, publishing), server))
