"""A blocking client for inspecting live nodes: state, lookups, health. On a ring that runs
mutual TLS, each call presents `credentials` (an admin's may see a node's state; anyone's
may look up a key and check health)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chord.live.tls import Credentials, channel
from chord.proto import chord_pb2 as pb
from chord.proto import chord_pb2_grpc as pb_grpc
from chord.protocol.ids import BITS
from chord.protocol.messages import to_ref
from chord.protocol.routing import NodeRef, RoutingTable


def _call(
    address: str, method: str, request: Any, timeout: float, credentials: Credentials | None
) -> Any:
    """The reply of the node's Chord method to the request (each method its own message)."""
    with channel(address, credentials) as c:
        # protoc's gRPC glue (chord_pb2_grpc) is untyped: it has no stubs
        stub = pb_grpc.ChordStub(c)  # type: ignore[no-untyped-call]
        return getattr(stub, method)(request, timeout=timeout)


def fetch_state(
    address: str, timeout: float = 1.0, credentials: Credentials | None = None
) -> pb.StateReply | None:
    """The node's whole view, or None when it does not answer."""
    try:
        state: pb.StateReply = _call(address, "GetState", pb.Empty(), timeout, credentials)
    except grpc.RpcError:
        return None
    return state


def fetch_states(
    addresses: list[str], timeout: float = 1.0, credentials: Credentials | None = None
) -> dict[str, pb.StateReply | None]:
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(addresses)))) as pool:
        states = pool.map(lambda a: fetch_state(a, timeout, credentials), addresses)
        return dict(zip(addresses, states))


def table_from_state(state: pb.StateReply, r: int) -> RoutingTable:
    t = RoutingTable(to_ref(state.node), r=r)
    t.predecessor = to_ref(state.predecessor) if state.HasField("predecessor") else None
    t.successors = [to_ref(s) for s in state.successors]
    t.fingers = [to_ref(f) for f in state.fingers[:BITS]]
    return t


def lookup(
    address: str, key: int, timeout: float = 5.0, credentials: Credentials | None = None
) -> tuple[NodeRef, int]:
    reply = _call(address, "Lookup", pb.LookupRequest(key=key), timeout, credentials)
    return to_ref(reply.owner), reply.hops


def serving(address: str, timeout: float = 1.0, credentials: Credentials | None = None) -> bool:
    try:
        with channel(address, credentials) as c:
            reply = health_pb2_grpc.HealthStub(c).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        # grpc_health has no types: to mypy the comparison is Any, not a bool
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
    except grpc.RpcError:
        return False
