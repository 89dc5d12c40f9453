"""A ring's certificate authority, and the certificates of its nodes and clients.

`cqengine certs` keeps everything in one directory: the CA (`ca.pem`, `ca-key.pem`) and,
per node or client NAME, `NAME.pem` and `NAME-key.pem`. Keys are written readable by their
owner only and never leave the directory. A certificate names its holder's *role* in its
subject alternative names, as the URI `urn:cqengine:role:<role>`: `node` for a ring
member (it serves and calls the internal services), and `subscriber`, `publisher` or
`admin` for a client. A node's certificate also carries its host name (a DNS name, or an
IP address) for the clients that connect to it by that name. Keys are ECDSA P-256.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from chord.live.tls import NODE, ROLE_URI

CLIENT_ROLES = ("subscriber", "publisher", "admin")
ROLES = (NODE, *CLIENT_ROLES)
CA_DAYS = 3650
DAYS = 825  # a leaf certificate's validity (what browsers still accept)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}$")  # a DNS name, or an IPv4/v6 address


class CertError(Exception):
    """Certificates cannot be made as asked; the message says why, in one line."""


def ca_paths(directory: Path) -> tuple[Path, Path]:
    return directory / "ca.pem", directory / "ca-key.pem"


def paths(directory: Path, name: str) -> tuple[Path, Path]:
    """Where NAME's certificate and key live."""
    return directory / f"{name}.pem", directory / f"{name}-key.pem"


def init_ca(directory: Path, days: int = CA_DAYS, force: bool = False) -> list[Path]:
    """Make a new certificate authority in `directory` (created if missing)."""
    cert_path, key_path = ca_paths(directory)
    _writable(directory, [cert_path, key_path], force)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cqengine ring CA")])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return [cert_path, key_path]


def issue(
    directory: Path,
    name: str,
    role: str,
    days: int = DAYS,
    force: bool = False,
    host: str | None = None,
) -> list[Path]:
    """A certificate for NAME in ROLE, signed by the directory's CA: a node's carries
    `host` (default NAME) as the host name or address clients reach it by; a client's,
    NAME as who it is."""
    if role not in ROLES:
        raise CertError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    if not NAME.match(name):
        raise CertError(
            f"{name!r} cannot name a certificate: use letters, digits, '.', '_' or '-' "
            "(at most 63), starting with a letter or digit"
        )
    if host is not None and not HOST.match(host):
        raise CertError(f"{host!r} is not a host name or IP address")
    ca_cert, ca_key = load_ca(directory)
    cert_path, key_path = paths(directory, name)
    if cert_path in ca_paths(directory) or key_path in ca_paths(directory):
        raise CertError(f"{name!r} is the CA's own file name: choose another")
    _writable(directory, [cert_path, key_path], force)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    alt: list[x509.GeneralName] = [x509.UniformResourceIdentifier(ROLE_URI + role)]
    if role == NODE:
        alt.insert(0, _host(host or name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(
            # a node serves, and calls other nodes; a client only calls
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                if role == NODE
                else [ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return [cert_path, key_path]


def load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = ca_paths(directory)
    if not cert_path.exists() or not key_path.exists():
        raise CertError(
            f"no certificate authority in {directory}: run 'cqengine certs init --dir {directory}'"
        )
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{key_path} is not the key cqengine certs init makes")
    return cert, key


def _host(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _writable(directory: Path, files: list[Path], force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise CertError(f"{directory} is not a directory")
    there = [f for f in files if f.exists()]
    if there and not force:
        raise CertError(f"{there[0]} exists already: give --force to replace it")
    directory.mkdir(parents=True, exist_ok=True)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    """Write a file; a key is created readable by its owner only (never, even for a
    moment, by anyone else)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
