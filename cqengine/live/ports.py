"""Ports on this machine for the nodes `ring up` starts: whether one is free, and free ones
to take, from anywhere the kernel gives or from a range named by $CQENGINE_PORT_RANGE.

A range keeps several rings on one machine apart: the test suite gives each of its workers
its own, so no two tests pick the same port between looking and listening. Ranges below the
kernel's ephemeral ports (32768 and up on Linux) meet no outgoing connection either."""

from __future__ import annotations

import os
import random
import socket

from cqengine.live.ringfile import RingError

HOST = "127.0.0.1"
PORT_RANGE = "CQENGINE_PORT_RANGE"


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a node could listen on the port now (as it does, with SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def port_range() -> range | None:
    """The ports of $CQENGINE_PORT_RANGE (LO-HI, both included), or None when it is unset."""
    spec = os.environ.get(PORT_RANGE, "").strip()
    if not spec:
        return None
    try:
        lo, hi = (int(p) for p in spec.split("-"))
    except ValueError:
        raise RingError(f"${PORT_RANGE} must be LO-HI (two port numbers), not {spec!r}") from None
    if not 0 < lo <= hi <= 65535:
        raise RingError(f"${PORT_RANGE} {spec!r} is not a range of ports within 1-65535")
    return range(lo, hi + 1)


def free_ports(n: int, host: str = HOST, exclude=()) -> list[int]:
    """n distinct ports free now (none of `exclude`): from $CQENGINE_PORT_RANGE when it is
    set, else any the kernel gives."""
    within = port_range()
    if within is not None:
        return _free_in(within, n, host, exclude)
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
            if s.getsockname()[1] not in exclude:
                ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


_cursor: dict[range, int] = {}  # where this process looks next in each range


def _free_in(within: range, n: int, host: str, exclude) -> list[int]:
    """n free ports of `within`, looked for from where this process left off (a random place
    at first), so that it gives no port twice before it has gone round the range: a port it
    gave may not be listened on yet."""
    start = _cursor.get(within, random.randrange(len(within)))
    ports: list[int] = []
    for step in range(len(within)):
        i = (start + step) % len(within)
        if within[i] not in exclude and port_free(within[i], host):
            ports.append(within[i])
            if len(ports) == n:
                _cursor[within] = i + 1
                return ports
    raise RingError(
        f"{len(ports)} of the {n} ports wanted are free in ${PORT_RANGE} ({within.start}-"
        f"{within.stop - 1})"
    )
