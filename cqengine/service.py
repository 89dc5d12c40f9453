"""The engine on the live shell: an EngineNode inside a LiveNode, and the client API.

`serve_engine` starts a node process's engine. A node that starts a ring takes its
settings from the command line; a node that joins asks its bootstrap node for the ring's
(Engine.GetConfig), so every node of a ring indexes and resolves the same way.
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from chord.live import LiveNode, StartupError, Timing, serve
from cqengine.config import Settings, SettingsError
from cqengine.engine import EngineError, EngineNode
from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc

log = logging.getLogger("cqengine.service")


class ClientAPI(pb_grpc.CQEngineServicer):
    """Subscribe, Unsubscribe, Publish, StreamAlerts and Stats on one node."""

    def __init__(self, live: LiveNode, engine: EngineNode) -> None:
        self.live, self.engine = live, engine
        self.waiters: dict[int, asyncio.Event] = {}  # one live stream per subscription
        engine.alert_listeners.append(self._wake)

    def _wake(self, sub_id: int) -> None:
        event = self.waiters.get(sub_id)
        if event is not None:
            event.set()

    async def _run(self, context, op):
        try:
            return await self.live.run_op(op)
        except EngineError as e:
            await context.abort(getattr(grpc.StatusCode, e.code), str(e))

    async def Subscribe(self, request, context):
        return await self._run(context, self.engine.subscribe(request.query))

    async def Unsubscribe(self, request, context):
        reply = await self._run(context, self.engine.unsubscribe(request.subscription_id, request.token))
        self._wake(request.subscription_id)  # its stream, if any, ends
        return reply

    async def Publish(self, request, context):
        return await self._run(context, self.engine.publish(request.docno, request.text, request.title))

    async def StreamAlerts(self, request, context):
        try:
            sub = self.engine.authorized(request.subscription_id, request.token)
        except EngineError as e:
            await context.abort(getattr(grpc.StatusCode, e.code), str(e))
        old = self.waiters.get(sub.id)
        event = self.waiters[sub.id] = asyncio.Event()
        if old is not None:
            old.set()  # a newer stream takes over; the old one ends
        try:
            while True:
                while sub.mailbox.queue:
                    # leave the alert in the mailbox until the stream took it: a stream
                    # cancelled mid-send leaves it for the next one instead of losing it
                    yield sub.mailbox.queue[0]
                    sub.mailbox.queue.popleft()
                await event.wait()
                event.clear()
                if self.waiters.get(sub.id) is not event or sub.id not in self.engine.subscriptions:
                    return
        finally:
            if self.waiters.get(sub.id) is event:
                del self.waiters[sub.id]

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
                       timing: Timing, settings: Settings | None, advertise: str | None = None) -> None:
    if join:
        settings = await fetch_settings(join)
    try:
        settings = (settings or Settings()).validate()
    except SettingsError as e:
        raise StartupError(str(e)) from None
    await serve(host, port, join, node_id, r, timing, advertise,
                app=lambda chord, spawn: EngineNode(chord, settings, spawn),
                add_services=lambda live, server: pb_grpc.add_CQEngineServicer_to_server(
                    ClientAPI(live, live.app), server))
