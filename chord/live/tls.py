"""Mutual TLS for the ring: what a node (or client) presents, and who is calling.

Every certificate of a ring is signed by the ring's CA and names its holder's role in its
subject alternative names as the URI `urn:cqengine:role:<role>` (`cqengine certs` makes
them). A server that requires client certificates finds the caller's in the call's auth
context; its role decides what the caller may do, never anything the caller sends.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import grpc
from cryptography import x509

ROLE_URI = "urn:cqengine:role:"
NODE = "node"
SUBSCRIBER, PUBLISHER, ADMIN = "subscriber", "publisher", "admin"
EVERYONE = frozenset({NODE, SUBSCRIBER, PUBLISHER, ADMIN})
ChannelOption = tuple[str, int | str]  # a gRPC channel argument: its name, its value


class TlsError(Exception):
    """The credentials cannot be read; the message says which file, in one line."""


@dataclass(frozen=True)
class Credentials:
    """The ring's CA certificate, and a certificate with its key, as PEM."""

    ca: bytes
    cert: bytes
    key: bytes

    @classmethod
    def load(cls, directory: Path, name: str) -> Credentials:
        """`directory`'s ca.pem, NAME.pem and NAME-key.pem."""
        files = [directory / "ca.pem", directory / f"{name}.pem", directory / f"{name}-key.pem"]
        for f in files:
            if not f.is_file():
                raise TlsError(
                    f"no {f.name} in {directory}: make it with 'cqengine certs' "
                    f"(init, then node or client --name {name})"
                )
        ca, cert, key = (f.read_bytes() for f in files)
        return cls(ca, cert, key)

    def server(self) -> grpc.ServerCredentials:
        """A server's: it presents its certificate and accepts only callers whose
        certificate the ring's CA signed."""
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True
        )

    def channel(self) -> grpc.ChannelCredentials:
        """A caller's: it trusts only servers the ring's CA signed, and presents its own."""
        return grpc.ssl_channel_credentials(self.ca, self.key, self.cert)


def role_of(cert: x509.Certificate) -> str | None:
    """The role a certificate names (None: none of ours)."""
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    for uri in alt.get_values_for_type(x509.UniformResourceIdentifier):
        if uri.startswith(ROLE_URI) and uri[len(ROLE_URI) :] in EVERYONE:
            return uri[len(ROLE_URI) :]
    return None


@lru_cache(maxsize=4096)
def role_in(pem: bytes) -> str | None:
    """The role a PEM certificate names (None: none). Read once per certificate."""
    try:
        return role_of(x509.load_pem_x509_certificate(pem))
    except ValueError:
        return None


def caller_name(context: grpc.aio.ServicerContext) -> str:
    """Who is calling, to count its calls: its certificate's subject (mutual TLS), else
    the host it calls from."""
    auth: dict[str, list[bytes]] = context.auth_context()
    subject = auth.get("x509_subject")
    if subject:
        return subject[0].decode(errors="replace")
    peer: str = context.peer()  # ipv4:HOST:PORT, ipv6:[HOST]:PORT
    return peer.rsplit(":", 1)[0]


def caller_role(context: grpc.aio.ServicerContext) -> str | None:
    """The role of the certificate the caller presented (None: none, or plaintext)."""
    auth: dict[str, list[bytes]] = context.auth_context()
    pems = auth.get("x509_pem_cert")
    return role_in(pems[0]) if pems else None


def channel(
    address: str, credentials: Credentials | None = None, options: Sequence[ChannelOption] = ()
) -> grpc.Channel:
    """A blocking channel to a node: mutual TLS with these credentials, or plaintext."""
    if credentials is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, credentials.channel(), options=list(options))


def aio_channel(
    address: str, credentials: Credentials | None = None, options: Sequence[ChannelOption] = ()
) -> grpc.aio.Channel:
    """An asyncio channel to a node: mutual TLS with these credentials, or plaintext."""
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, credentials.channel(), options=list(options))


def tls_failure(e: grpc.RpcError, address: str, credentials: Credentials | None) -> str | None:
    """Why a call that could not connect failed, if TLS is why: one line for whoever gave
    the credentials (None: the connection failed for another reason, or none at all)."""
    if e.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    details = e.details() or ""
    if credentials is not None:
        if "WRONG_VERSION_NUMBER" in details:
            return f"node {address} speaks plaintext (its ring runs --insecure), not TLS"
        if "handshake failed" in details.lower():
            reason = details.rsplit("SSL routines:OPENSSL_internal:", 1)[-1].split(":")[0]
            return (
                f"node {address} and this client do not trust each other ({reason}): "
                "is the certificate from the ring's own CA?"
            )
        return None
    if "Socket closed" in details and speaks_tls(address):
        return (
            f"node {address} requires mutual TLS: present a certificate of its ring "
            "(--tls-dir, $CQENGINE_TLS_DIR, or the ring file that `ring up` wrote)"
        )
    return None


def speaks_tls(address: str, timeout: float = 1.0) -> bool:
    """Does the server at HOST:PORT answer a TLS handshake? (A plaintext one does not; a
    mutual-TLS one accepts it, or refuses the missing certificate with a TLS alert.)"""
    host, _, port = address.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw,
            context.wrap_socket(raw, do_handshake_on_connect=False) as tls,
        ):
            tls.do_handshake()
        return True
    except ssl.SSLError as e:
        return "ALERT" in (e.reason or "")
    except (OSError, ValueError):
        return False
