"""A ring's certificates (cqengine.live.certs): its CA, a certificate per node port
(`node-<port>`) and the admin client's (`client`), kept in tls/ beside the ring file and
made once."""

from __future__ import annotations

from pathlib import Path

from chord.live.tls import ADMIN, NODE
from cqengine.live.ports import HOST
from cqengine.live.ringfile import CLIENT, RingError


def node_certificate(port: int) -> str:
    return f"node-{port}"


def make_certificates(tls: Path, ports: list[int]) -> None:
    """The ring's CA in `tls` (kept if it is there), a certificate for each node port and
    the admin client's; what is there already is kept, unless the CA is new."""
    from cqengine.live import certs

    fresh = not all(p.exists() for p in certs.ca_paths(tls))
    try:
        if fresh:
            certs.init_ca(tls, force=True)
        wanted = [(node_certificate(p), NODE) for p in ports] + [(CLIENT, ADMIN)]
        for name, role in wanted:
            if fresh or not all(p.exists() for p in certs.paths(tls, name)):
                certs.issue(tls, name, role, force=True, host=HOST if role == NODE else None)
    except certs.CertError as e:
        raise RingError(f"cannot make the ring's certificates: {e}") from None
