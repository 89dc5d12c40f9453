"""The engine on the live shell: an EngineNode inside a LiveNode, and the client API.

`serve_engine` starts a node process's engine. A node that starts a ring takes its
settings from the command line; a node that joins asks its bootstrap node for the ring's
(Engine.GetConfig), so every node of a ring indexes and resolves the same way.

Documents published through a node are gathered into batches (cqengine.live.publishing);
alerts reach a subscriber's stream as the batches of whatever waits in its mailboxes.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
from pathlib import Path

import grpc
import mmh3
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2

from chord.live.grpc_transport import SIZE_OPTIONS, abort_with
from chord.live.meter import charged
from chord.live.server import Limits, LiveNode, StartupError, Timing, serve
from chord.live.tls import ADMIN, PUBLISHER, SUBSCRIBER, Credentials, aio_channel, tls_failure
from chord.protocol import versions
from chord.protocol.calls import StatusError
from chord.protocol.ids import hash_id
from chord.protocol.versions import Versions
from cqengine.core.alerts.mailboxes import Subscription
from cqengine.core.announcement.filters import lease_problem
from cqengine.core.basis.errors import EngineError
from cqengine.core.home.streams import Streams
from cqengine.core.node import EngineNode
from cqengine.core.placement.placement import analyze_all, check_batch
from cqengine.core.terms.settings import Settings, SettingsError
from cqengine.live.datadir import (
    CHECK_EVERY,
    FILE,
    RESERVE,
    damaged,
    set_aside,
    stored_id,
    stored_ring_id,
)
from cqengine.live.publishing import Batcher, Publishing
from cqengine.live.storage import Storage
from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc

_API = pb.DESCRIPTOR.services_by_name["CQEngine"].full_name
# who may call each method of the client API over mutual TLS, by the role its certificate
# names (the ring's own services are for its nodes: chord.live.server)
CLIENT_ACCESS: dict[str, frozenset[str]] = {
    f"/{_API}/{method}": frozenset(roles)
    for methods, roles in [
        (
            ("Subscribe", "SubscribeBatch", "Unsubscribe", "StreamAlerts", "AckAlerts"),
            (SUBSCRIBER, ADMIN),
        ),
        (("Publish", "PublishBatch"), (PUBLISHER, ADMIN)),
        (("Stats",), (ADMIN,)),
    ]
    for method in methods
}

log = logging.getLogger("cqengine.live.service")

MAX_REQUEST_DOCS = 10_000  # documents one PublishBatch call may carry


class ClientAPI(pb_grpc.CQEngineServicer):
    """Subscribe, SubscribeBatch, Unsubscribe, Publish, PublishBatch, StreamAlerts,
    AckAlerts and Stats."""

    def __init__(self, live: LiveNode, engine: EngineNode, publishing: Publishing) -> None:
        self.live, self.engine = live, engine
        self.batcher = Batcher(engine, publishing, live.run_op, live.meter)
        self.streams = Streams(engine.ctx, engine.placement.served)
        engine.home.alert_listeners.append(self.streams.alerted)
        engine.replication.region_listeners.append(self.streams.region_changed)

    async def _run(self, context, op):
        try:
            return await self.live.run_op(op)
        except StatusError as e:  # the engine's refusal, or the data directory full
            await abort_with(context, e)

    async def _writable(self, context) -> None:
        """A call that changes what the node keeps: refused, RESOURCE_EXHAUSTED, while its
        data directory can keep nothing (before anything changes)."""
        try:
            self.engine.writable()
        except EngineError as e:
            await abort_with(context, e)

    async def Subscribe(self, request, context):
        await self._writable(context)
        return await self._run(context, self.engine.placement.subscribe(request.query))

    async def SubscribeBatch(self, request, context):
        texts = [q.query for q in request.queries]
        try:
            check_batch(len(texts))  # before the work of analyzing them
        except EngineError as e:
            await abort_with(context, e)
        await self._writable(context)
        # analyzed in the node's analysis thread: the event loop serves on meanwhile
        queries = await asyncio.get_running_loop().run_in_executor(
            self.batcher.analyzer, analyze_all, self.engine.settings, texts
        )
        results = await self._run(context, self.engine.placement.subscribe_analyzed(queries))
        return pb.SubscribeBatchReply(
            results=[
                pb.SubscribeReply(code=r.code, error=str(r)) if isinstance(r, EngineError) else r
                for r in results
            ]
        )

    async def Unsubscribe(self, request, context):
        await self._writable(context)
        reply = await self._run(
            context, self.engine.placement.unsubscribe(request.subscription_id, request.token)
        )
        self.streams.unsubscribed(request.subscription_id)
        return reply

    async def Publish(self, request, context):
        await self._writable(context)
        (reply,) = await self.batcher.publish([request])
        if isinstance(reply, EngineError):
            await abort_with(context, reply)
        return reply

    async def PublishBatch(self, request, context):
        n = len(request.documents)
        if not n:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "a batch needs at least one document"
            )
        if n > MAX_REQUEST_DOCS:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"a batch of {n} documents; at most {MAX_REQUEST_DOCS} go in one call",
            )
        await self._writable(context)
        replies = await self.batcher.publish(request.documents)
        return pb.PublishBatchReply(
            results=[
                pb.PublishReply(accepted=False, code=r.code, error=str(r))
                if isinstance(r, EngineError)
                else r
                for r in replies
            ]
        )

    async def _acknowledged(
        self, keys, context, home_id: int = 0, stream: bool = False
    ) -> tuple[list[Subscription], list[int]]:
        """The subscriptions of these keys, their alerts below each key's `next` gone
        (`home_id`: their home key, if the client says), and the ids of those I serve none
        of (ended, say: a subscription ended while its stream was open leaves it, and holds
        back neither the others' acknowledgements nor their streams; naming only such,
        NOT_FOUND). A stream opening while the data directory can keep nothing
        acknowledges nothing: it is served from the `next`s its client gave, which
        acknowledges them again later."""
        authorized = self.engine.placement.authorized
        acks, unknown, missing = [], [], None  # (subscription, its next), ...
        for k in keys:
            try:
                acks.append((authorized(k.subscription_id, k.token, home_id), k.next))
            except EngineError as e:
                if e.code != "NOT_FOUND":
                    await abort_with(context, e)  # moved, in minority: the client follows
                unknown.append(k.subscription_id)
                missing = e
        if missing is not None and not acks:
            await abort_with(context, missing)
        subs = [sub for sub, _ in acks]
        if stream and self.engine.ctx.storage_full():
            return subs, unknown
        await self._acknowledge(acks, context)
        return subs, unknown

    async def _acknowledge(self, acks: list[tuple[Subscription, int]], context) -> None:
        """Alerts of these subscriptions below each one's next leave their mailboxes, kept
        so on disk before the client is answered."""
        acknowledged = self.engine.home.acknowledge(acks)
        if acknowledged is not None:  # on the home log: once its logs committed it
            await self._run(context, acknowledged)
        try:
            self.engine.durable()
        except StatusError as e:
            await abort_with(context, e)

    async def AckAlerts(self, request, context):
        await self._writable(context)
        if request.stream:
            await self._watermark(request.stream, request.through, context)
            return pb.AckReply()
        _, unknown = await self._acknowledged(request.subscriptions, context, request.home_id)
        return pb.AckReply(unknown=unknown)

    async def _watermark(self, stream_id: bytes, through: int, context) -> None:
        """A stream's client handed out its first `through` messages: their alerts go
        (cqengine.core.home.streams: what those messages carried)."""
        try:
            acks = self.streams.watermark(stream_id, through)
        except EngineError as e:  # no such stream, past what it sent, moved: as it says
            await abort_with(context, e)
        await self._acknowledge(acks, context)

    async def StreamAlerts(self, request, context):
        keys = list(request.subscriptions)
        if request.subscription_id or request.token or not keys:
            first = pb.SubscriptionKey(
                subscription_id=request.subscription_id, token=request.token, next=request.next
            )
            keys.insert(0, first)
        subs, _ = await self._acknowledged(keys, context, request.home_id, stream=True)
        woken = asyncio.Event()  # set whenever the stream has something to look at
        nexts = {k.subscription_id: k.next for k in keys}
        # a newer stream takes its subscriptions over
        stream = self.streams.open(subs, nexts, request.watermark, woken.set)
        try:
            while stream.subs:
                while message := charged(self.live.meter, "stream", stream.next_message):
                    # alerts leave their mailboxes only when acknowledged: a stream that
                    # breaks loses none, and the next resumes where its client stands
                    yield message
                if not stream.subs:
                    return
                await woken.wait()
                woken.clear()
                if stream.moved:
                    await context.abort(
                        grpc.StatusCode.UNAVAILABLE,
                        "a subscription of this stream is served by another node now: "
                        "look up its home key",
                    )
        finally:
            self.streams.close(stream)

    async def Stats(self, request, context):
        return node_stats(self.live, digests=not request.no_digests)


def node_stats(live: LiveNode, digests: bool = True) -> pb.StatsReply:
    """What the Stats RPC answers (and the metrics endpoint shows): the engine's counters
    with the live node's own."""
    reply = live.app.stats(live.ledger, digests)
    reply.background = live.background
    reply.cpu_seconds.update(live.meter.snapshot())
    reply.calls_refused.update(live.gate.refused)
    reply.software, reply.protocol = versions.software(), versions.PROTOCOL
    reply.oldest_protocol, reply.ring_floor = versions.OLDEST, live.node.floor.version
    return reply


async def fetch_config(
    address: str, timeout: float = 5.0, credentials: Credentials | None = None
) -> tuple[Settings, int]:
    """The settings of the ring that `address` belongs to (they travel by value), and its
    id (0: a node of an earlier version, which sends none)."""
    try:
        # the settings carry the term statistics by value: lift gRPC's 4 MiB default
        async with aio_channel(address, credentials, SIZE_OPTIONS) as channel:
            reply = await channel.unary_unary(
                "/cqengine.Engine/GetConfig",
                request_serializer=pb.ConfigRequest.SerializeToString,
                response_deserializer=pb.EngineConfig.FromString,
            )(pb.ConfigRequest(), timeout=timeout)
    except grpc.aio.AioRpcError as e:
        if e.code() == grpc.StatusCode.UNIMPLEMENTED:
            raise StartupError(f"{address} is a ring node without the engine") from None
        why = tls_failure(e, address, credentials)
        if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.RESOURCE_EXHAUSTED):
            why = e.details()  # the certificate is not a node's; the settings too large
        if why is not None:
            raise StartupError(f"cannot join through {address}: {why}") from None
        raise StartupError(f"cannot reach {address} to join: {e.code().name.lower()}") from None
    theirs = Versions(reply.protocol or 1, reply.oldest_protocol or 1)
    if not versions.MINE.talks_to(theirs):
        release = reply.software or "of a release before versions"
        raise StartupError(
            f"cannot join through {address}: it (cqengine {release}) speaks {theirs}; this "
            f"node (cqengine {versions.software()}) speaks {versions.MINE}. Run a release "
            "that talks to the ring's, and upgrade a ring one node at a time "
            "(docs/operations.md, Upgrades)"
        )
    try:
        return Settings.from_pb(reply), reply.ring
    except SettingsError as e:
        raise StartupError(f"the ring's settings are unusable here: {e}") from None


def new_ring() -> int:
    """A new ring's id: at random, never 0 (unknown)."""
    return secrets.randbits(64) or 1


def ring_identity(ring: int, settings: Settings) -> str:
    """What names the ring on every call between its nodes (chord.live.gate): its id, and a
    digest of its settings ("" when the id is unknown: no check)."""
    if not ring:
        return ""
    config = settings.to_pb().SerializeToString(deterministic=True)
    return f"{ring:016x}.{mmh3.hash(config, signed=False):08x}"


async def serve_engine(
    host: str,
    port: int,
    join: str | None,
    node_id: int | None,
    r: int,
    timing: Timing,
    settings: Settings | None,
    advertise: str | None = None,
    publishing: Publishing | None = None,
    data_dir: Path | None = None,
    credentials: Credentials | None = None,
    limits: Limits | None = None,
    metrics: tuple[str, int] | None = None,
    reserve: int = RESERVE,
    rejoin_empty: bool = False,
) -> None:
    """Run an engine node until it is signalled; with a data directory, the node keeps its
    state there (cqengine.live.storage) and, restarted, takes it back before it joins.
    With credentials it speaks mutual TLS only: the ring's services answer its nodes, and
    the client API each client as its certificate's role allows (CLIENT_ACCESS). With
    `metrics` (host, port) it serves Prometheus' text format there (cqengine.live.metrics)."""
    publishing = (publishing or Publishing()).check()
    ring = 0  # the ring's id: the first node makes it (or has it from its data directory)
    if join:
        settings, ring = await fetch_config(join, credentials=credentials)
    try:
        settings = (settings or Settings()).validate()
    except SettingsError as e:
        raise StartupError(str(e)) from None
    if settings.replicas - 1 > r:
        raise StartupError(
            f"the ring keeps {settings.replicas} copies of every record, on a node's next "
            f"{settings.replicas - 1} successors: --successors must be at least that, not {r}"
        )
    if settings.home_log and settings.members - 1 > r:
        raise StartupError(
            f"each home's log has {settings.members} members, the home and its next "
            f"{settings.members - 1} successors: --successors must be at least that, not {r}"
        )
    why = lease_problem(settings.filter_lease, timing.call_timeout)
    if why is not None:
        raise StartupError(why)
    storage = None
    if data_dir is not None:
        address = f"{advertise or host}:{port}"
        if node_id is None:  # restarted there: the id it had (its keys are its region's)
            node_id = stored_id(data_dir)
        if rejoin_empty and (data_dir / FILE).exists():
            if not join:
                raise StartupError("--rejoin-empty refills the node from the ring: give --join")
            aside = set_aside(data_dir)
            print(f"moved {data_dir} aside to {aside}: the node starts empty", flush=True)
        if not join:  # a ring restarted from its data is the ring it was
            ring = stored_ring_id(data_dir) or new_ring()
        storage = Storage.open(
            data_dir,
            f"{address} (id {hash_id(address) if node_id is None else node_id:016x})",
            settings.to_pb().SerializeToString(deterministic=True),
            ring,  # a node of another ring's data is refused here
        )
        storage.room.reserve = reserve  # bytes its disk keeps free: below, it keeps nothing
    elif not join:
        ring = new_ring()

    def engine(chord, host) -> EngineNode:
        node = EngineNode(
            chord, settings, host, hold=timing.call_timeout, journal=storage, stamped=True
        )
        node.ring = ring
        if storage is not None:
            try:
                kept, logs = storage.load(), storage.logs.load()
            except (sqlite3.DatabaseError, DecodeError, ValueError, KeyError, TypeError) as e:
                # a row that reads as no value of its kind: named, with the remedy
                raise StartupError(damaged(data_dir, f"{type(e).__name__}: {e}")) from None
            node.restore(*kept)
            subs, entries = kept[0], kept[1]
            if subs or entries:
                print(
                    f"restored {len(subs)} subscriptions, {len(entries)} index entries and "
                    f"{sum(len(s.mailbox.queue) for s in subs)} waiting alerts from {data_dir}",
                    flush=True,
                )
            if node.home.logs is not None and logs:
                node.home.logs.restore(logs)
                print(
                    f"restored the logs of {len(logs)} home keys "
                    f"({sum(log.last for log in logs)} entries) from {data_dir}",
                    flush=True,
                )
        return node

    serving: list[LiveNode] = []  # the node, once it serves
    exporter = None
    if metrics is not None:
        # aiohttp and prometheus_client are a third of a node's start: only when asked for
        from cqengine.live.metrics import MetricsServer

        exporter = MetricsServer(
            *metrics, lambda: node_stats(serving[0], False) if serving else None
        )

    watching: list[asyncio.Task] = []

    def services(live: LiveNode, server) -> None:
        pb_grpc.add_CQEngineServicer_to_server(ClientAPI(live, live.app, publishing), server)
        live.reflected.append(_API)
        serving.append(live)
        if exporter is not None:
            exporter.meter = live.meter
        if storage is not None:
            watching.append(asyncio.get_running_loop().create_task(watch_storage(live, storage)))

    try:
        if exporter is not None:
            await exporter.start()
        await serve(
            host,
            port,
            join,
            node_id,
            r,
            timing,
            advertise,
            app=engine,
            add_services=services,
            credentials=credentials,
            access=CLIENT_ACCESS,
            limits=limits,
            identity=ring_identity(ring, settings),
        )
    finally:
        for task in watching:
            task.cancel()
        await asyncio.gather(*watching, return_exceptions=True)
        if exporter is not None:
            await exporter.stop()
        if storage is not None:
            storage.close()


async def watch_storage(live: LiveNode, storage: Storage) -> None:
    """Every second: is the data directory full (Storage.full looks at the disk, and
    commits what waited once there is room)? The client API's health says so: NOT_SERVING
    while the node refuses what would change its state, SERVING again after."""
    service, was = _API, None
    while True:
        full = storage.full() is not None
        if full != was:
            status = health_pb2.HealthCheckResponse
            await live.health.set(service, status.NOT_SERVING if full else status.SERVING)
            was = full
        await asyncio.sleep(CHECK_EVERY)
