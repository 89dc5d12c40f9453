"""The Gate: the one place a live node decides who may call what, and how a call that fails
unexpectedly ends (see Gate). Over mutual TLS a caller is who its certificate names
(chord.live.tls); clients are held to a rate, nodes never.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
import traceback
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from chord.live.meter import Meter, charged, metered, stepped
from chord.live.tls import NODE, caller_name, caller_role
from chord.protocol.versions import HEADER, MINE, Versions, refusal

log = logging.getLogger("chord.live.server")

NOT_MEMBER = "this node is not (or no longer) a member of the ring; ask another node"
# a node names its ring's identity on every call (metadata): a node of another ring (a
# partition healed onto a ring started anew, a port taken by another ring's node) is refused
RING_HEADER = "cqengine-ring"
OF_ANOTHER_RING = "another ring"  # how such a refusal's details begin

# why the gate refuses a call (Gate.refused, Stats.calls_refused)
REFUSALS = {
    "not_member": "the node is not (or no longer) a member of the ring: UNAVAILABLE",
    "another_ring": "a node of another ring (another id or other settings): FAILED_PRECONDITION",
    "version": "a node speaking a protocol this node does not talk to: FAILED_PRECONDITION",
    "role": "the caller's certificate names no role that may call the method: PERMISSION_DENIED",
    "rate": "a client calling faster than its rate: RESOURCE_EXHAUSTED",
    "malformed": "a request that is no message of its kind: INVALID_ARGUMENT",
    "internal": "the handler failed unexpectedly: INTERNAL",
}


class ClientRate:
    """A token bucket per client: `rate` calls a second on average, `burst` at once. The
    clients not heard from longest are forgotten past `clients` of them (they start again
    with a full bucket)."""

    def __init__(self, rate: float, burst: int, clients: int = 10_000) -> None:
        self.rate, self.burst, self.clients = rate, burst, clients
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def admit(self, who: str, now: float) -> bool:
        tokens, then = self.buckets.pop(who, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        admitted = tokens >= 1 - 1e-9  # a call at exactly the rate, despite rounding
        self.buckets[who] = (tokens - admitted, now)
        if len(self.buckets) > self.clients:
            self.buckets.popitem(last=False)
        return admitted


# what answers a call in its handler's place: given the request (its bytes, or the stream of
# them) and the call's context, a coroutine, or an async generator of the replies
Behaviour = Callable[[Any, grpc.aio.ServicerContext], object]


# grpc has no types: its classes are Any, which mypy lets no class subclass
class Gate(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """The one place that decides who may call what, and how a call that fails unexpectedly
    ends. It refuses every call but health checks while the node is not a member of the
    ring: a node joining believes itself alone until it knows its successor, so it would
    take every key for its own (resolving announcements with a part of the index,
    numbering alerts of subscriptions another node still serves); one stopping has handed
    what it holds on. It opens as soon as the joining node knows its successor: from its
    first Notify on, the ring counts on it (refused, its successor would drop it as gone).
    Over mutual TLS it lets a call through only if the caller's certificate names a role
    that may make it. A caller that is no node, making calls of the client API (or a
    client's Lookup and GetState) faster than `rate` allows, is refused
    RESOURCE_EXHAUSTED. A handler's unexpected
    exception becomes INTERNAL with a generic message; the details go to the node's log,
    and the node serves on."""

    def __init__(
        self,
        member: Callable[[], bool],
        access: dict[str, frozenset[str]] | None = None,
        ring: frozenset[str] = frozenset(),
        rate: ClientRate | None = None,
        meter: Meter | None = None,
        identity: str = "",
    ) -> None:
        """`access`: the roles that may call each method, by its path (None: anyone may,
        the ring runs plaintext); a method it does not name nobody may call. Who calls is
        read from the certificate the caller presented, never from what it sends. `ring`:
        the paths `rate` does not limit (the ring's own methods; on mutual TLS a client's
        Lookup and GetState are limited, a node's calls never). `meter`: charged the CPU
        time of parsing requests and serializing replies (chord.live.meter). `identity`: the
        ring's (RING_HEADER); a call naming another is refused, one naming none (a client,
        a node of an earlier version) is not."""
        self.member = member
        self.identity = identity
        self.access = access
        self.ring = ring
        self.rate = rate
        self.meter = meter
        self.refused: Counter[str] = Counter()  # calls refused, by why (REFUSALS)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return handler
        if details.method.startswith("/grpc.health."):  # for anyone, member or not
            return _guarded(handler, details.method, None, None, self.meter, self.refused)
        metadata = details.invocation_metadata
        theirs = self.identity and _header(metadata, RING_HEADER)
        if theirs and theirs != self.identity:
            return _answering(handler, self._another_ring(theirs), self.meter)
        spoken = _header(metadata, HEADER)
        if spoken or theirs:  # a node (a client names neither): which protocol it speaks
            versions = _versions(spoken)
            if versions is None or not MINE.talks_to(versions):
                return _answering(handler, self._another_version(versions, spoken), self.meter)
        if not self.member():
            return _answering(handler, self._refuse, self.meter)
        roles = None if self.access is None else self.access.get(details.method, frozenset())
        rate = self.rate if details.method not in self.ring else None
        return _guarded(handler, details.method, roles, rate, self.meter, self.refused)

    async def _refuse(self, request: object, context: grpc.aio.ServicerContext) -> None:
        self.refused["not_member"] += 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, NOT_MEMBER)

    def _another_ring(self, theirs: str) -> Behaviour:
        async def refuse(request: object, context: grpc.aio.ServicerContext) -> None:
            self.refused["another_ring"] += 1
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{OF_ANOTHER_RING}: this node is of ring {self.identity}, the caller of {theirs}",
            )

        return refuse

    def _another_version(self, theirs: Versions | None, raw: str) -> Behaviour:
        async def refuse(request: object, context: grpc.aio.ServicerContext) -> None:
            self.refused["version"] += 1
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, refusal(theirs, raw))

        return refuse


@functools.lru_cache(maxsize=64)
def _versions(raw: str) -> Versions | None:
    return Versions.parse(raw)  # a ring's nodes send a handful of values: parsed once each


def _header(metadata: Sequence[tuple[str, str]] | None, name: str) -> str:
    """A call's metadata value of that name ("" if it has none)."""
    return next((value for key, value in metadata or () if key == name), "")


# a client's calls of the ring's own methods: limited like the client API, never a node's
CLIENT_RING_METHODS = ("Lookup", "GetState")


def _answering(
    handler: grpc.RpcMethodHandler, behaviour: Behaviour, meter: Meter | None
) -> grpc.RpcMethodHandler:
    """A handler of the same kind and replies whose behaviour is this one. It takes the
    request's bytes as they came: `behaviour` parses them (_parsed), so that a request that
    is no message of its kind is refused like any bad input, not answered UNKNOWN."""
    if (
        handler.request_streaming
    ):  # Exchange (chord.live.links): its envelopes are parsed as they come
        return grpc.stream_stream_rpc_method_handler(
            behaviour,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    make = (
        grpc.unary_stream_rpc_method_handler
        if handler.response_streaming
        else grpc.unary_unary_rpc_method_handler
    )
    return make(
        behaviour, response_serializer=metered(meter, "serialize", handler.response_serializer)
    )


def _let_go(refusal: BaseException) -> None:
    """gRPC keeps the exception of a refused call after its answer: the frames of its
    traceback, and of the exceptions it was raised handling, must not keep the request
    (64 MiB at most) alive with it."""
    e: BaseException | None = refusal
    while e is not None:
        traceback.clear_frames(e.__traceback__)
        e = e.__context__


async def _parsed(
    handler: grpc.RpcMethodHandler,
    data: bytes,
    context: grpc.aio.ServicerContext,
    meter: Meter | None,
    refused: Counter[str],
) -> Any:
    """The request, parsed as its method's message (INVALID_ARGUMENT if it is none)."""
    parse = handler.request_deserializer
    try:
        return charged(meter, "parse", parse, data) if parse is not None else data
    except Exception:
        refused["malformed"] += 1
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, "the request is no message of its kind"
        )


INTERNAL = "internal error; the node's log has the details"


def _guarded(
    handler: grpc.RpcMethodHandler,
    path: str,
    roles: frozenset[str] | None,
    rate: ClientRate | None,
    meter: Meter | None,
    refused: Counter[str],
) -> grpc.RpcMethodHandler:
    """The handler, for callers whose certificate names one of these roles (None: any
    caller) and within their `rate` (None: any rate), others refused PERMISSION_DENIED or
    RESOURCE_EXHAUSTED with the reason before it runs; and its unexpected exceptions
    logged and answered INTERNAL."""
    method = path.rsplit("/", 1)[-1]

    async def admit(context: grpc.aio.ServicerContext) -> None:
        if (
            rate is not None
            and (roles is None or caller_role(context) != NODE)  # nodes are never limited
            and not rate.admit(caller_name(context), time.monotonic())
        ):
            refused["rate"] += 1
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"more than {rate.rate:g} calls a second from this client "
                f"(bursts of {rate.burst}): slow down",
            )
        if roles is None:
            return
        role = caller_role(context)
        if role not in roles:
            refused["role"] += 1
            may = " or ".join(sorted(roles)) or "nobody"
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{method} is for {may}; this certificate's role is {role}",
            )

    async def failed(context: grpc.aio.ServicerContext) -> None:
        log.exception("%s failed", method)
        refused["internal"] += 1
        await context.abort(grpc.StatusCode.INTERNAL, INTERNAL)

    if handler.request_streaming and inspect.isasyncgenfunction(handler.stream_stream):
        replies = handler.stream_stream  # reflection's: it yields its replies

        async def checked_replies(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            try:
                await admit(context)
                async for reply in replies(requests, context):
                    yield reply
            except grpc.aio.AbortError as e:
                _let_go(e)
                raise
            except Exception:
                await failed(context)

        return _answering(handler, checked_replies, meter)
    if handler.request_streaming:  # Exchange: the caller admitted once, as it opens
        exchange = handler.stream_stream

        async def checked_exchange(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
        ) -> None:
            try:
                await admit(context)
                await exchange(requests, context)
            except grpc.aio.AbortError:
                raise
            except Exception:
                await failed(context)

        return _answering(handler, checked_exchange, meter)
    if handler.response_streaming:
        stream = handler.unary_stream

        async def checked_stream(
            data: bytes, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            request = None
            try:
                await admit(context)
                request = await _parsed(handler, data, context, meter, refused)
                replies = stream(request, context)
                while True:  # each reply's making charged to the method (chord.live.meter)
                    try:
                        reply = await stepped(meter, method, replies.__anext__())
                    except StopAsyncIteration:
                        break
                    yield reply
            except grpc.aio.AbortError as e:
                del data, request  # (see _let_go)
                _let_go(e)
                raise
            except Exception:
                await failed(context)

        return _answering(handler, checked_stream, meter)
    behaviour = handler.unary_unary

    async def checked(data: bytes, context: grpc.aio.ServicerContext) -> Any:
        request = None
        try:
            await admit(context)
            request = await _parsed(handler, data, context, meter, refused)
            # its steps charged to the method: a client's call runs in the handler, not in
            # an operation of the node's (whose steps charge their own accounts)
            return await stepped(meter, method, behaviour(request, context))
        except grpc.aio.AbortError as e:
            del data, request  # (see _let_go)
            _let_go(e)
            raise
        except Exception:
            await failed(context)

    return _answering(handler, checked, meter)
