"""Live nodes on mutual TLS (loopback): a ring of nodes presenting their certificates forms
and stays correct; the ring's own services answer only callers whose certificate names
them a ring node: a client's certificate is refused PERMISSION_DENIED, no certificate (or
another CA's) fails the handshake."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from chord.grpc_transport import GrpcTransport
from chord.live import LiveNode, Timing
from chord.node import PeerUnreachable
from chord.proto import chord_pb2 as pb
from chord.tls import Credentials, TlsError
from cqengine.live.certs import init_ca, issue
from cqengine.live.ring import free_ports

FAST = Timing(stabilize=0.05, fix_fingers=0.1, check_predecessor=0.1)


@pytest.fixture
def tls(tmp_path):
    init_ca(tmp_path)
    issue(tmp_path, "127.0.0.1", "node")
    issue(tmp_path, "alice", "subscriber")
    other = tmp_path / "other"
    init_ca(other)
    issue(other, "127.0.0.1", "node")
    return tmp_path


def test_a_ring_on_mutual_tls_forms_and_only_nodes_call_its_services(tls):
    node_credentials = Credentials.load(tls, "127.0.0.1")

    async def status(transport: GrpcTransport, node: LiveNode) -> str:
        try:
            await transport.call(node.me, "GetNeighbors", pb.Empty())
            return "OK"
        except PeerUnreachable as e:
            return "UNAVAILABLE" if e.refused else "unreachable"
        except grpc.aio.AioRpcError as e:
            return e.code().name

    async def main():
        nodes = [
            LiveNode("127.0.0.1", port, timing=FAST, credentials=node_credentials)
            for port in free_ports(3)
        ]
        outsiders = {
            "node": GrpcTransport(timeout=2.0, credentials=node_credentials),
            "subscriber": GrpcTransport(timeout=2.0, credentials=Credentials.load(tls, "alice")),
            "other ring": GrpcTransport(
                timeout=2.0, credentials=Credentials.load(tls / "other", "127.0.0.1")
            ),
            "plaintext": GrpcTransport(timeout=2.0),
        }
        try:
            await nodes[0].start()
            for n in nodes[1:]:
                await n.start(join=nodes[0].me.address)
            ring = sorted(nodes, key=lambda n: n.me.id)
            for _ in range(100):  # bounded: 5 s
                if all(n.node.table.successor == ring[(i + 1) % 3].me for i, n in enumerate(ring)):
                    break
                await asyncio.sleep(0.05)
            assert [n.node.table.successor for n in ring] == [ring[1].me, ring[2].me, ring[0].me]
            got = {who: await status(t, nodes[1]) for who, t in outsiders.items()}
            assert got == {
                "node": "OK",
                "subscriber": "PERMISSION_DENIED",
                "other ring": "UNAVAILABLE",
                "plaintext": "UNAVAILABLE",
            }
        finally:
            for t in outsiders.values():
                await t.close()
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_missing_credentials_say_which_file_and_how_to_make_it(tmp_path):
    with pytest.raises(TlsError, match="no ca.pem in .*cqengine certs"):
        Credentials.load(tmp_path, "127.0.0.1")
