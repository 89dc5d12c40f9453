"""Live nodes on mutual TLS (loopback): a ring of nodes presenting their certificates forms
and stays correct; the ring's own services answer only callers whose certificate names
them a ring node: a client's certificate is refused PERMISSION_DENIED, no certificate (or
another CA's) fails the handshake."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from support.waiting import eventually, eventually_async

from chord.live.grpc_transport import GrpcTransport
from chord.live.server import LiveNode, Timing
from chord.live.tls import Credentials, TlsError
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import PeerFailed, PeerUnreachable
from cqengine.live.certs import init_ca, issue
from cqengine.live.ports import free_ports

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
        except PeerFailed as e:  # it answered, refusing
            return e.code
        except PeerUnreachable as e:
            return "UNAVAILABLE" if e.refused else "unreachable"

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
            await eventually_async(
                lambda: [n.node.table.successor for n in ring],
                5,
                "each node's successor the next in the ring",
                holds=lambda succ: succ == [ring[1].me, ring[2].me, ring[0].me],
            )
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


def test_each_role_calls_what_it_may_and_is_told_why_not_otherwise(tls):
    """One engine node with the client API on mutual TLS: a subscriber subscribes (one
    query or a batch) but cannot publish, a publisher publishes but cannot subscribe, only
    an admin sees stats, anyone finds a key's owner, and no client, admin included, calls
    the engine's own methods (Deliver would put a forged alert on a stream)."""
    from support.live import engine_node, start_with_client_api

    from cqengine.live.service import CLIENT_ACCESS
    from cqengine.proto import cqengine_pb2 as cpb

    for role in ("publisher", "admin"):
        issue(tls, role, role)

    async def main():
        node = engine_node(
            timing=FAST, credentials=Credentials.load(tls, "127.0.0.1"), access=CLIENT_ACCESS
        )
        await start_with_client_api(node)
        try:

            async def code(role: str, path: str, request, reply) -> str:
                creds = Credentials.load(tls, role).channel()
                async with grpc.aio.secure_channel(node.me.address, creds) as channel:
                    call = channel.unary_unary(
                        path,
                        request_serializer=type(request).SerializeToString,
                        response_deserializer=reply.FromString,
                    )
                    try:
                        await call(request, timeout=10)
                        return "OK"
                    except grpc.aio.AioRpcError as e:
                        assert e.code() != grpc.StatusCode.PERMISSION_DENIED or "role" in (
                            e.details() or ""
                        )
                        return e.code().name

            api = "/cqengine.CQEngine/"
            subscribe = (api + "Subscribe", cpb.SubscribeRequest(query="storm warning"))
            batch = cpb.SubscribeBatchRequest(queries=[cpb.SubscribeRequest(query="gale")])
            subscribe_batch = (api + "SubscribeBatch", batch)
            publish = (
                api + "Publish",
                cpb.PublishRequest(docno="D1", text=b"a storm warning", title="t"),
            )
            stats = (api + "Stats", cpb.StatsRequest())
            lookup = ("/chord.Chord/Lookup", pb.LookupRequest(key=1))
            deliver = ("/cqengine.Engine/Deliver", cpb.AlertBatch())
            replies = {
                subscribe[0]: cpb.SubscribeReply,
                subscribe_batch[0]: cpb.SubscribeBatchReply,
                publish[0]: cpb.PublishReply,
                stats[0]: cpb.StatsReply,
                lookup[0]: pb.LookupReply,
                deliver[0]: cpb.DeliverReply,
            }
            want = {
                "alice": [
                    "OK",
                    "OK",
                    "PERMISSION_DENIED",
                    "PERMISSION_DENIED",
                    "OK",
                    "PERMISSION_DENIED",
                ],
                "publisher": [
                    "PERMISSION_DENIED",
                    "PERMISSION_DENIED",
                    "OK",
                    "PERMISSION_DENIED",
                    "OK",
                    "PERMISSION_DENIED",
                ],
                "admin": ["OK", "OK", "OK", "OK", "OK", "PERMISSION_DENIED"],
            }
            for who, codes in want.items():
                got = [
                    await code(who, path, request, replies[path])
                    for path, request in (
                        subscribe,
                        subscribe_batch,
                        publish,
                        stats,
                        lookup,
                        deliver,
                    )
                ]
                assert got == codes, who
        finally:
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_certificates_of_the_command_line_secure_a_ring_of_node_processes(tmp_path):
    """`cqengine certs` makes a CA and certificates; two `cqengine node` processes form a
    ring on them, and the command line's clients are let in as their role allows, or told
    in one line why not: no certificate, another CA's, the wrong role, a node without
    credentials, a client certificate trying to join as a node."""
    import subprocess
    import sys

    from support.command_line import assert_one_line_error, cqengine

    from chord.live.client import serving
    from cqengine.live.ring.convergence import wait_converged
    from cqengine.live.ring.processes import stop_processes
    from cqengine.live.ringfile import NodeEntry

    d, other = tmp_path / "tls", tmp_path / "other"
    made = [
        ("init", "--dir", d),
        ("node", "--dir", d, "--name", "n1", "--host", "127.0.0.1"),
        ("node", "--dir", d, "--name", "n2", "--host", "127.0.0.1"),
        ("client", "--dir", d, "--name", "pub", "--role", "publisher"),
        ("client", "--dir", d, "--name", "sub", "--role", "subscriber"),
        ("client", "--dir", d, "--name", "client", "--role", "admin"),
        ("init", "--dir", other),
        ("client", "--dir", other, "--name", "client", "--role", "admin"),
    ]
    for args in made:
        assert cqengine("certs", *args).returncode == 0, args
    p1, p2, p3 = free_ports(3)
    first = f"127.0.0.1:{p1}"
    admin = Credentials.load(d, "client")
    entries = []

    def node(port: int, *args) -> None:
        log = open(tmp_path / f"node-{port}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cqengine", "node", "--port", str(port), *map(str, args)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        entries.append(NodeEntry(f"127.0.0.1:{port}", port, proc.pid, log.name))

        def serves() -> bool:
            if serving(entries[-1].address, 0.5, admin):
                return True
            assert proc.poll() is None, (tmp_path / f"node-{port}.log").read_text()
            return False

        eventually(serves, 20, f"node {port} to serve", interval=0.1)

    try:
        node(p1, "--tls-dir", d, "--tls-name", "n1", "--replicas", 1)
        node(p2, "--tls-dir", d, "--tls-name", "n2", "--join", first)
        wait_converged([e.address for e in entries], 8, timeout=30, credentials=admin)
        at = ("--node", first, "--ring-file", tmp_path / "none.json")
        text = ("--text", "a storm warning", "--docno", "D1")
        ok = cqengine("publish", *text, *at, "--tls-dir", d, "--tls-name", "pub")
        assert ok.returncode == 0 and "published D1" in ok.stdout, ok.stderr
        stats = cqengine("stats", *at, "--tls-dir", d)  # `client`, an admin
        assert stats.returncode == 0 and "documents published  1" in stats.stdout, stats.stderr
        refusals = {
            ("publish", *text, "--tls-dir", d, "--tls-name", "sub"): (
                "Publish is for admin or publisher",
                "role is subscriber",
            ),
            ("stats", "--tls-dir", d, "--tls-name", "pub"): ("Stats is for admin",),
            ("publish", *text): ("requires mutual TLS",),
            ("publish", *text, "--tls-dir", other): ("do not trust each other",),
            ("publish", *text, "--tls-dir", d, "--tls-name", "nobody"): ("no nobody.pem",),
        }
        for args, fragments in refusals.items():
            assert_one_line_error(cqengine(*args, *at, timeout=30), *fragments)
        joins = {
            ("--insecure",): "requires mutual TLS",
            ("--tls-dir", d, "--tls-name", "client"): "GetConfig is for node",
            ("--tls-dir", other, "--tls-name", "client"): "do not trust each other",
        }
        for args, fragment in joins.items():
            proc = cqengine("node", "--port", p3, "--join", first, *args, timeout=30)
            assert fragment in proc.stderr.strip().splitlines()[-1], proc.stderr
            assert proc.returncode == 1
        assert_one_line_error(cqengine("node", "--port", p3), "give --tls-dir", "--insecure")
    finally:
        stop_processes(entries, grace=2.0)


def test_no_client_certificate_calls_any_internal_method(tls):
    """Every method of the ring's own services (Chord, Engine), called with an empty
    request under each client role: PERMISSION_DENIED, before the request is even
    looked at, except Lookup (anyone) and GetState (admin); without a certificate the
    handshake fails (UNAVAILABLE) and nothing is called."""
    from support.live import engine_node

    from chord.live.grpc_transport import CHORD_SERVICE
    from cqengine.core.node import ENGINE_SERVICE

    for role in ("publisher", "admin"):
        issue(tls, role, role)
    paths = [f"/{s.full_name}/{m.name}" for s in (CHORD_SERVICE, ENGINE_SERVICE) for m in s.methods]
    allowed = {("alice", "Lookup"), ("publisher", "Lookup"), ("admin", "Lookup")}
    allowed |= {("admin", "GetState")}

    async def main():
        node = engine_node(timing=FAST, credentials=Credentials.load(tls, "127.0.0.1"))
        await node.start()
        try:
            for who in ("alice", "publisher", "admin", None):
                creds = Credentials.load(tls, who).channel() if who else None
                async with (
                    grpc.aio.secure_channel(node.me.address, creds)
                    if creds
                    else grpc.aio.insecure_channel(node.me.address)
                ) as channel:
                    for path in paths:
                        call = channel.unary_unary(
                            path, request_serializer=bytes, response_deserializer=bytes
                        )
                        try:
                            await call(b"", timeout=5)
                            code = "OK"
                        except grpc.aio.AioRpcError as e:
                            code = e.code().name
                        method = path.rsplit("/", 1)[-1]
                        want = (
                            "UNAVAILABLE"
                            if who is None
                            else "OK"
                            if (who, method) in allowed
                            else "PERMISSION_DENIED"
                        )
                        assert code == want, (who, path, code)
        finally:
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_clients_lookups_are_rate_limited_and_a_nodes_calls_are_not(tls):
    """Lookup is open to every client and costs the ring a whole lookup: a client past
    its rate is told to slow down there too; a node's calls are never limited."""
    from chord.live.server import Limits

    async def main():
        (port,) = free_ports(1)
        node = LiveNode(
            "127.0.0.1",
            port,
            timing=FAST,
            credentials=Credentials.load(tls, "127.0.0.1"),
            limits=Limits(client_rate=0.5, client_burst=3),
        )
        await node.start()
        try:
            codes = {}
            for who in ("alice", "127.0.0.1"):
                creds = Credentials.load(tls, who).channel()
                async with grpc.aio.secure_channel(node.me.address, creds) as channel:
                    lookup = channel.unary_unary(
                        "/chord.Chord/Lookup",
                        request_serializer=pb.LookupRequest.SerializeToString,
                        response_deserializer=pb.LookupReply.FromString,
                    )
                    got = []
                    for _ in range(6):
                        try:
                            await lookup(pb.LookupRequest(key=1), timeout=5)
                            got.append("OK")
                        except grpc.aio.AioRpcError as e:
                            got.append(e.code().name)
                    codes[who] = got
            assert codes["alice"] == ["OK"] * 3 + ["RESOURCE_EXHAUSTED"] * 3
            assert codes["127.0.0.1"] == ["OK"] * 6  # a node's certificate
        finally:
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))
