"""Live rings on loopback: fast maintenance, engine nodes in-process, node processes
killed and restarted, subscriptions spread over a ring's nodes."""

import contextlib
import os
import random
import signal
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chord.live.server import Timing
from support.waiting import eventually

# Fast maintenance so live rings converge in seconds on a 2-core machine.
FAST = Timing(stabilize=0.15, fix_fingers=0.3, check_predecessor=0.3, rpc_timeout=1.0)


def wait_gone(entries, timeout=10.0):
    """Until these node processes (ring file entries) have exited, reaped (bounded)."""
    from cqengine.live.ring.processes import pid_alive

    def alive() -> list[str]:
        left = [e.address for e in entries if pid_alive(e.pid, e.port)]
        if left:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(-1, os.WNOHANG)
        return left

    eventually(alive, timeout, "the nodes to exit", holds=lambda left: not left)


def kill_hard(entry) -> None:
    """SIGKILL a node process: it vanishes without a word, as in a crash."""
    os.kill(entry.pid, signal.SIGKILL)
    wait_gone([entry])


def restart(entry, join: str, ring, log_dir: Path, data: Path):
    """Start a node of `ring` again at its port from its data directory, joining through
    `join`, with its certificate of the ring; its new ring file entry, once it serves."""
    from cqengine.live.ring.processes import spawn, wait_serving

    back = spawn(entry.port, join, ring.r, FAST, log_dir, data=data, tls=Path(ring.tls))
    wait_serving(back, 20, ring.credentials())
    return back


def engine_node(**kw):
    """An engine node on the live shell at a free loopback port, default settings, not
    started; `kw` go to LiveNode (timing, credentials, access, limits)."""
    from chord.live.server import LiveNode
    from cqengine.core.node import EngineNode
    from cqengine.core.terms.settings import Settings
    from cqengine.live.ports import free_ports

    settings = Settings().validate()
    return LiveNode(
        "127.0.0.1",
        free_ports(1)[0],
        app=lambda chord, spawn: EngineNode(chord, settings, spawn),
        **kw,
    )


async def start_with_client_api(node) -> None:
    """Start an engine node serving the client API beside the ring's own services."""
    from cqengine.live.publishing import Publishing
    from cqengine.live.service import ClientAPI
    from cqengine.proto import cqengine_pb2_grpc

    await node.start(
        add_services=lambda server: cqengine_pb2_grpc.add_CQEngineServicer_to_server(
            ClientAPI(node, node.app, Publishing()), server
        )
    )


def subscribe(addresses, queries, credentials, seed):
    """Subscribe each query at a node of the ring picked at random (seeded); the replies."""
    from cqengine.live.client import Client

    rng = random.Random(seed)
    clients = {a: Client(a, credentials=credentials) for a in addresses}
    try:
        return [clients[rng.choice(addresses)].subscribe(q) for q in queries]
    finally:
        for c in clients.values():
            c.close()


def publish(address, docs, credentials):
    from cqengine.live.client import Client

    with Client(address, credentials=credentials) as c:
        replies = c.publish_many([(d.docno, d.text, d.title) for d in docs])
    assert all(r.accepted for r in replies)


def serving(subs, addresses, credentials) -> dict[str, list]:
    """The subscriptions by the node that serves them now, as a lookup of each home key
    from a live node finds it."""
    from cqengine.live.client import Client

    out = defaultdict(list)
    with Client(addresses[0], credentials=credentials) as c:
        for s in subs:
            out[c.find_home(s.home_id, addresses)].append(s)
    return out


def collect(subs, addresses, want: int, credentials, timeout: float = 60.0) -> list:
    """Alerts from the nodes serving these subscriptions, until `want` have come or time is
    up (each drain acknowledges what it took: the next takes only what came since). A drain
    listens its full second, so the nodes are drained side by side, not one after another."""
    from cqengine.live.client import Client

    def drain(node: str, group: list) -> list:
        with Client(node, credentials=credentials) as c:
            return list(c.alerts(group, home=node, timeout=1.0))

    got, deadline = [], time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        homes = serving(subs, addresses, credentials)
        with ThreadPoolExecutor(len(homes) or 1) as pool:
            got += [a for alerts in pool.map(drain, homes, homes.values()) for a in alerts]
    return got
