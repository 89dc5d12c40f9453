"""`cqengine certs`: a ring's CA and its nodes' and clients' certificates, made by the command
line in its own process, work for mutual TLS on loopback, name their holder's role where a
server reads it (the peer's certificate in the call's auth context), and are refused when
another CA signed them."""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from chord.live.tls import role_of
from chord.proto import chord_pb2 as pb
from cqengine.live.certs import CertError, issue

PING = "/chord.Chord/Ping"


def certs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cqengine", "certs", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def made(*args: str) -> list[Path]:
    done = certs(*args)
    assert done.returncode == 0, done.stderr
    return [Path(line) for line in done.stdout.split()]


@pytest.fixture(scope="module")
def ring_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    made("init", "--dir", str(d))
    made("node", "--dir", str(d), "--name", "127.0.0.1")
    for role in ("subscriber", "publisher", "admin"):
        made("client", "--dir", str(d), "--name", role, "--role", role)
    return d


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_each_certificate_is_signed_by_the_ring_ca_names_its_role_and_keeps_its_key_private(
    ring_dir,
):
    ca = cert(ring_dir / "ca.pem")
    for name, role in [("127.0.0.1", "node"), ("subscriber", "subscriber"), ("admin", "admin")]:
        c = cert(ring_dir / f"{name}.pem")
        c.verify_directly_issued_by(ca)
        assert role_of(c) == role
        key = ring_dir / f"{name}-key.pem"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((ring_dir / "ca-key.pem").stat().st_mode) == 0o600
    alt = cert(ring_dir / "127.0.0.1.pem").extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert [str(ip) for ip in alt.value.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert role_of(ca) is None


def test_certs_refuse_with_one_line_that_says_what_to_do(tmp_path):
    missing = certs("node", "--dir", str(tmp_path / "none"), "--name", "host")
    assert missing.returncode == 1
    assert missing.stderr.strip().count("\n") == 0 and "cqengine certs init" in missing.stderr
    made("init", "--dir", str(tmp_path))
    again = certs("init", "--dir", str(tmp_path))
    assert again.returncode == 1 and "--force" in again.stderr
    assert made("init", "--dir", str(tmp_path), "--force")  # replaced when asked
    bad_role = certs("client", "--dir", str(tmp_path), "--name", "x", "--role", "root")
    assert bad_role.returncode == 2 and "invalid choice" in bad_role.stderr
    with pytest.raises(CertError, match="cannot name a certificate"):
        issue(tmp_path, "../escape", "admin")
    assert not (tmp_path.parent / "escape.pem").exists()


def serve_ping(credentials: grpc.ServerCredentials, seen: list) -> tuple[grpc.aio.Server, int]:
    async def ping(request, context):
        pem = dict(context.auth_context()).get("x509_pem_cert", [b""])[0]
        seen.append(role_of(x509.load_pem_x509_certificate(pem)) if pem else None)
        return pb.Empty()

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "chord.Chord",
                {
                    "Ping": grpc.unary_unary_rpc_method_handler(
                        ping,
                        request_deserializer=pb.Empty.FromString,
                        response_serializer=pb.Empty.SerializeToString,
                    )
                },
            )
        ]
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    return server, port


def test_mutual_tls_with_ring_certificates_tells_the_server_the_callers_role(ring_dir, tmp_path):
    made("init", "--dir", str(tmp_path))  # another ring's CA
    made("client", "--dir", str(tmp_path), "--name", "stranger", "--role", "admin")

    def read(d: Path, name: str) -> bytes:
        return (d / name).read_bytes()

    server_credentials = grpc.ssl_server_credentials(
        [(read(ring_dir, "127.0.0.1-key.pem"), read(ring_dir, "127.0.0.1.pem"))],
        root_certificates=read(ring_dir, "ca.pem"),
        require_client_auth=True,
    )

    def client(d: Path, name: str | None) -> grpc.ChannelCredentials:
        if name is None:
            return grpc.ssl_channel_credentials(read(ring_dir, "ca.pem"))
        return grpc.ssl_channel_credentials(
            read(ring_dir, "ca.pem"), read(d, f"{name}-key.pem"), read(d, f"{name}.pem")
        )

    async def main():
        seen: list = []
        server, port = serve_ping(server_credentials, seen)
        await server.start()
        try:

            async def call(credentials) -> grpc.StatusCode:
                async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as ch:
                    stub = ch.unary_unary(
                        PING,
                        request_serializer=pb.Empty.SerializeToString,
                        response_deserializer=pb.Empty.FromString,
                    )
                    try:
                        await stub(pb.Empty(), timeout=10)
                        return grpc.StatusCode.OK
                    except grpc.aio.AioRpcError as e:
                        return e.code()

            for name in ("subscriber", "publisher", "admin", "127.0.0.1"):
                assert await call(client(ring_dir, name)) == grpc.StatusCode.OK
            assert seen == ["subscriber", "publisher", "admin", "node"]
            assert await call(client(tmp_path, "stranger")) == grpc.StatusCode.UNAVAILABLE
            assert await call(client(ring_dir, None)) == grpc.StatusCode.UNAVAILABLE
            assert len(seen) == 4  # neither reached the handler
        finally:
            await server.stop(None)

    asyncio.run(asyncio.wait_for(main(), 60))
