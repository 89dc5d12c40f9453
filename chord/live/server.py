"""The live shell: one ChordNode behind a grpc.aio server, with periodic maintenance.

The server also carries the standard gRPC health service: NOT_SERVING until the node has
joined, SERVING after. Every other call is refused (UNAVAILABLE) while the node is not a
member of the ring: until it has joined, and once it stops. SIGTERM or SIGINT make the
node leave gracefully (keys to its successor) before it exits; SIGUSR1 makes it stop
keeping what it holds (the whole ring stops, and each node's data directory keeps its
state for a restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import GeneratorType
from typing import Any, Protocol

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from chord.live.gate import CLIENT_RING_METHODS, ClientRate, Gate
from chord.live.grpc_transport import (
    CHORD_SERVICE,
    SIZE_OPTIONS,
    GrpcTransport,
    MethodTable,
    run_async,
)
from chord.live.links import EXCHANGE, Exchanges
from chord.live.meter import Meter, charged
from chord.live.tls import ADMIN, EVERYONE, NODE, Credentials
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import Op, PeerFailed, PeerUnreachable, StatusError
from chord.protocol.host import Host
from chord.protocol.ids import hash_id
from chord.protocol.ledger import Ledger
from chord.protocol.messages import to_info, to_ref
from chord.protocol.node import ChordNode, JoinError
from chord.protocol.routing import SUCCESSORS, NodeRef
from chord.protocol.transport import Handler

log = logging.getLogger("chord.live.server")

SERVER_OPTIONS = SIZE_OPTIONS + [("grpc.so_reuseport", 0)]  # two nodes must never share a port


# who may call what, over mutual TLS: the ring's own methods are for its nodes, but any
# client finds a key's owner (a subscription's home) and an admin sees a node's state
CHORD_ACCESS = {"Lookup": EVERYONE, "GetState": frozenset({NODE, ADMIN})}
REFLECTION = f"/{reflection.SERVICE_NAME}/ServerReflectionInfo"
LEAVING_WAIT = 10.0  # s a node leaving for good gives its app to hand on what it must


@dataclass
class Limits:
    """What one node lets others make it hold or do (its own, not the ring's: each node
    of a ring may have its own; the command line's defaults)."""

    channels: int = 1024  # channels to peers kept open; the least recently used close first
    background: int = 4096  # background operations running at once; more wait their turn
    client_rate: float = 1000.0  # client API calls a second from one client (0: unlimited)
    client_burst: int = 2000  # calls one client may make at once above its rate

    def check(self) -> Limits:
        if self.channels < 1 or self.background < 1 or self.client_rate < 0:
            raise StartupError("limits: channels and background tasks must be at least 1")
        if self.client_rate and self.client_burst < 1:
            raise StartupError("limits: a client's burst must be at least 1 call")
        return self


class StartupError(Exception):
    """The node cannot start; the message is meant for the operator."""


@dataclass
class Timing:
    stabilize: float = 0.25
    fix_fingers: float = 0.5
    check_predecessor: float = 0.5
    rpc_timeout: float = 1.0  # the ring's own calls: a peer silent this long counts as failed
    call_timeout: float = (
        30.0  # an application's calls (the engine's): a busy peer answers late, not never
    )
    recontact: float = 2.0  # asking a node forgotten as unreachable: a partition healed?


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise StartupError(f"cannot listen on {host}:{port}: {e.strerror}") from None


class App(Handler, Protocol):
    """What rides on a node besides Chord (the engine): it handles its services' requests."""

    services: list[ServiceDescriptor]  # the services whose unary methods `handle` serves

    def periodic(self) -> list[tuple[Callable[[], Op], float]]:
        """Operations to run on a timer beside the ring's maintenance, with their periods."""

    def flush(self) -> None:
        """The node stops: start now, in the background, what waits on a timer."""

    def leaving(self) -> Op:
        """The node leaves the ring for good (not a stop to restart): what to hand on first,
        while it still serves and answers (bounded by LEAVING_WAIT)."""

    def durable(self, method: str = "") -> None:
        """Make what the request just handled (`method`: "" for an operation run) or the
        operation just run changed survive the process (one commit per batch of changes;
        nothing if the app keeps nothing). An exception if it cannot, where what `method`
        changed would be lost: the caller is answered with it, not told it is kept."""


# builds the app around the node's ChordNode, with what the node lends it (chord.protocol.host)
AppFactory = Callable[[ChordNode, Host], App]


class LiveNode:
    def __init__(
        self,
        host: str,
        port: int,
        node_id: int | None = None,
        r: int = SUCCESSORS,
        timing: Timing | None = None,
        advertise: str | None = None,
        app: AppFactory | None = None,
        credentials: Credentials | None = None,
        access: dict[str, frozenset[str]] | None = None,
        limits: Limits | None = None,
        identity: str = "",
    ) -> None:
        """`credentials`: mutual TLS with the ring's certificates (None: plaintext, anyone
        may call anything). Then only ring nodes may call the ring's own services, and
        `access` names the roles that may call each method of the services added beside
        them (the client API), by path. `limits`: what others may make it hold or do.
        `identity`: the ring's, named on every call to another node; a node of another
        ring refuses it, and this one refuses theirs (chord.live.gate; "": no identity)."""
        self.limits = (limits or Limits()).check()
        address = f"{advertise or host}:{port}"
        self.host, self.port = host, port
        self.node = ChordNode(
            NodeRef(hash_id(address) if node_id is None else node_id, address), r=r
        )
        self.lent = Host(  # what the app is lent of this node (chord.protocol.host)
            spawn=self.spawn,
            later=self._later,
            now=time.monotonic,
            clock=time.time,
            new_id=lambda: secrets.randbits(64),  # unguessable, and never again at a restart
            incarnation=secrets.randbits(64) | 1,
        )
        self.app: App | None = app(self.node, self.lent) if app else None
        self.handler: Handler = self.app or self.node
        self.timing = timing or Timing()
        self.ledger = Ledger()
        self.meter = Meter()  # CPU time by what it went to (chord.live.meter)
        self.methods = MethodTable([CHORD_SERVICE] + (self.app.services if self.app else []))
        app_methods = [
            m.name for service in (self.app.services if self.app else []) for m in service.methods
        ]
        self.transport = GrpcTransport(
            self.ledger,
            timeout=self.timing.rpc_timeout,
            table=self.methods,
            timeouts=dict.fromkeys(app_methods, self.timing.call_timeout),
            linked=frozenset(app_methods),  # the app's calls go over links (chord.live.links)
            patience=self.timing.call_timeout,
            credentials=credentials,
            max_channels=self.limits.channels,
            meter=self.meter,
            identity=identity,
        )
        self.credentials = credentials
        self.health = health.aio.HealthServicer()
        self.server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[object]] = set()
        self._slots = asyncio.Semaphore(self.limits.background)  # for background operations
        self._stopping = asyncio.Event()
        self.joining = True  # until it has joined (or started a ring of its own)
        ring_access = {
            path: CHORD_ACCESS.get(name, frozenset({NODE}))
            for name, (path, _, _) in self.methods.methods.items()
        }
        ring_access[EXCHANGE] = frozenset({NODE})
        ring_access[REFLECTION] = frozenset({NODE, ADMIN})  # what the node serves: for operators
        self.gate = Gate(
            lambda: not (self.joining and self.node.table.alone() or self.stopped),
            {**ring_access, **(access or {})} if credentials is not None else None,
            frozenset(
                path
                for path in ring_access
                # a client's Lookup, GetState and reflection are held to its rate
                if (path.rsplit("/", 1)[-1] not in CLIENT_RING_METHODS and path != REFLECTION)
                or credentials is None
            ),
            ClientRate(self.limits.client_rate, self.limits.client_burst)
            if self.limits.client_rate
            else None,
            self.meter,
            identity,
        )
        self.stopped = False
        self.reflected: list[str] = []  # services added by the shell, for reflection
        methods, member = self.methods.methods, self.gate.member
        self.exchanges = Exchanges(self.dispatch, methods, member, self.meter)  # chord.live.links

    @property
    def me(self) -> NodeRef:
        return self.node.me

    def _later(self, seconds: float, fn: Callable[[], None]) -> None:
        """Call fn after this many seconds, on the event loop (what the app is lent)."""
        asyncio.get_running_loop().call_later(seconds, fn)

    async def run_op(self, op: Op) -> Any:
        try:
            return await run_async(self.handler, op, self.transport)
        finally:
            self._durable()

    def _durable(self, method: str = "") -> None:
        if self.app is not None:
            charged(self.meter, "storage", self.app.durable, method)

    @property
    def background(self) -> int:
        """Operations running in the background now, or waiting for a slot."""
        return len(self._background)

    def spawn(self, op: Op) -> None:
        """Run an operation in the background (follow-ups a request handler starts)."""
        task = asyncio.get_running_loop().create_task(self._guarded(op))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _guarded(self, op: Op) -> None:
        try:
            async with self._slots:  # at most limits.background run at once
                await self.run_op(op)
        except StatusError as e:  # an answer of the app's (its data directory full, say)
            log.debug("background operation failed: %s", e)
        except Exception:
            log.exception("background operation failed")

    async def _to_the_end(self, op: Op) -> Any:
        """Run a request's operation to its end even if its caller goes away (a caller
        killed mid-call cancels the handler): what it changes, say alerts numbered and
        being copied to the replicas, must not stop half-way."""
        task = asyncio.get_running_loop().create_task(self.run_op(op))
        self._background.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("a request's operation failed: %r", task.exception())

    async def dispatch(self, method: str, request: Any) -> Any:
        if method == "Lookup":
            owner, hops = await self.run_op(self.node.lookup(request.key, verify=True))
            return pb.LookupReply(owner=to_info(owner), hops=hops)
        reply = charged(self.meter, method, self.handler.handle, method, request)
        if isinstance(reply, GeneratorType):  # an answer that needs calls of its own
            reply = await self._to_the_end(reply)
        self._durable(method)  # before the reply: what it acknowledges is kept
        if method == "GetState":
            reply.ledger.extend(
                pb.LedgerEntry(kind=k, messages=c.messages, bytes=c.bytes)
                for k, c in self.ledger.snapshot().items()
            )
        return reply

    async def start(
        self, join: str | None = None, add_services: Callable[[grpc.aio.Server], None] | None = None
    ) -> None:
        check_port_free(self.host, self.port)
        self.server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[self.gate])
        self.server.add_generic_rpc_handlers(self.methods.generic_handlers(self.dispatch))
        links = {"Exchange": self.exchanges.handler()}
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(CHORD_SERVICE.full_name, links)]
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        if add_services:
            add_services(self.server)
        self._reflect()
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        try:
            where = f"{self.host}:{self.port}"
            if self.credentials is not None:
                self.server.add_secure_port(where, self.credentials.server())
            else:
                self.server.add_insecure_port(where)
        except RuntimeError as e:
            raise StartupError(f"cannot listen on {self.host}:{self.port}: {e}") from None
        await self.server.start()
        if join:
            await self._join(join)
        self.joining = False
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        loops = [
            (self.node.stabilize, self.timing.stabilize),
            (self.node.check_predecessor, self.timing.check_predecessor),
            (self.node.fix_fingers, self.timing.fix_fingers),
            (self.node.recontact, self.timing.recontact),
        ]
        loops += self.app.periodic() if self.app else []
        self._tasks = [asyncio.create_task(self._every(op, period)) for op, period in loops]

    def _reflect(self) -> None:
        """gRPC server reflection (grpcurl, say) of every service the node serves: the
        ring's, the app's, health, and those `reflected` names (the client API's)."""
        names = [CHORD_SERVICE.full_name, health.SERVICE_NAME, reflection.SERVICE_NAME]
        names += [service.full_name for service in (self.app.services if self.app else [])]
        reflection.enable_server_reflection([*names, *self.reflected], self.server)

    async def _join(self, address: str) -> None:
        probe = NodeRef(0, address)
        try:
            state = await self.transport.call(probe, "GetState", pb.Empty())
        except PeerFailed as e:
            raise StartupError(f"cannot join through {address}: it answered {e.code}") from None
        except PeerUnreachable as e:
            why = "a node of another ring answers" if e.another_ring else "no node answers"
            raise StartupError(f"cannot reach {address} to join: {why} there") from None
        bootstrap = to_ref(state.node)
        try:
            await self.run_op(self.node.join(bootstrap))
        except JoinError as e:
            raise StartupError(str(e)) from None

    async def _every(self, make_op: Callable[[], Op], period: float) -> None:
        rng = random.Random(self.me.id ^ hash(make_op.__name__))
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), period * rng.uniform(0.5, 1.5))
            if self._stopping.is_set():
                return
            try:
                await self.run_op(make_op())
            except StatusError as e:  # an answer of the app's (its data directory full, say)
                log.debug("%s failed: %s", make_op.__name__, e)
            except Exception:  # maintenance must outlive any one failed round
                log.exception("%s failed", make_op.__name__)

    async def stop(self, graceful: bool = True) -> None:
        self._stopping.set()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.app is not None:
            self.app.flush()
            if graceful:
                await self._leaving(self.app)
        if self._background:
            await asyncio.wait(list(self._background), timeout=2.0)
        self.stopped = True  # what it holds is handed on (or kept for a restart) as it is now
        if graceful:
            try:
                await self.run_op(self.node.leave())
            except PeerUnreachable as e:
                log.warning("leave: %s; keys stay with this node", e)
            except Exception:  # refused, say: the node still stops, its server with it
                log.exception("leave failed; keys stay with this node")
        self.exchanges.close()  # its links' streams end before its server stops
        if self.server is not None:
            await self.server.stop(grace=0.5)
        await self.transport.close()

    async def _leaving(self, app: App) -> None:
        try:
            await asyncio.wait_for(self.run_op(app.leaving()), LEAVING_WAIT)
        except TimeoutError:
            log.warning("leave: handing on took over %.0f s; leaving all the same", LEAVING_WAIT)
        except Exception:  # the node still leaves
            log.exception("leave: handing on failed; leaving all the same")

    async def serve_until_signalled(self) -> bool:
        """Serve until signalled to stop; whether the node left (handing over) or just stopped."""
        loop = asyncio.get_running_loop()
        keep: list[bool] = []

        def stop_keeping() -> None:
            keep.append(True)
            self._stopping.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        loop.add_signal_handler(signal.SIGUSR1, stop_keeping)
        await self._stopping.wait()
        await self.stop(graceful=not keep)
        return not keep


async def serve(
    host: str,
    port: int,
    join: str | None,
    node_id: int | None,
    r: int,
    timing: Timing,
    advertise: str | None = None,
    app: AppFactory | None = None,
    add_services: Callable[[LiveNode, grpc.aio.Server], None] | None = None,
    credentials: Credentials | None = None,
    access: dict[str, frozenset[str]] | None = None,
    limits: Limits | None = None,
    identity: str = "",
) -> None:
    node = LiveNode(
        host,
        port,
        node_id=node_id,
        r=r,
        timing=timing,
        advertise=advertise,
        app=app,
        credentials=credentials,
        access=access,
        limits=limits,
        identity=identity,
    )
    try:
        await node.start(
            join, (lambda server: add_services(node, server)) if add_services else None
        )
    except BaseException:
        await node.stop(graceful=False)
        raise
    print(
        f"node {node.me.id:016x} serving on {node.me.address}"
        + (" (mutual TLS)" if credentials is not None else " (plaintext: --insecure)")
        + (f", joined through {join}" if join else ", new ring"),
        flush=True,
    )
    left = await node.serve_until_signalled()
    print(
        f"node {node.me.address} " + ("left the ring" if left else "stopped, keeping what it held"),
        flush=True,
    )
