"""The commands of a ring on one machine: `ring up`, `ring status`, `ring down`.

`ring up` starts one `cqengine node` process per node on loopback, waits until every
successor, predecessor and finger is correct, and records the nodes (address, id, pid, log,
data directory) in a ring file (cqengine.live.ringfile) that the other commands read.

With a data root, node i keeps its state in ROOT/<its port> (cqengine.live.storage).
`ring down` stops every node without handing anything over, so each keeps its own state;
`ring up` then starts nodes at the ports whose directories hold data, and each takes its
state back. `ring down --purge` removes the data.

A ring runs mutual TLS unless `ring up` is told --insecure: it keeps the ring's CA, a
certificate per node (`node-<port>`) and an admin client's (`client`) in tls/ beside the
ring file (made once, kept across `ring down`), and records that directory in the ring
file, where clients on this machine find it.
"""

from __future__ import annotations

import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from chord.live.client import serving
from chord.live.server import Timing
from chord.live.tls import Credentials
from chord.protocol.ids import short, spread_ids
from chord.protocol.routing import SUCCESSORS
from cqengine.live.datadir import FILE
from cqengine.live.ports import free_ports, port_free
from cqengine.live.ring.certificates import make_certificates
from cqengine.live.ring.convergence import (
    observe,
    under_replicated,
    wait_converged,
    wait_replicated,
)
from cqengine.live.ring.processes import pid_alive, spawn, stop_processes, wait_serving
from cqengine.live.ring.table import format_table
from cqengine.live.ringfile import NodeEntry, RingError, RingFile

DATA = "data"  # the nodes' data root beside the ring file, unless `ring up --data-dir` says
TLS = "tls"  # the ring's certificates beside the ring file


def ring_up(
    n: int,
    ring_path: Path,
    base_port: int | None = None,
    r: int = SUCCESSORS,
    timing: Timing | None = None,
    timeout: float | None = None,
    out: TextIO = sys.stdout,
    progress: Callable[[str], None] = lambda s: None,
    engine: list[str] = (),
    node_args: list[str] = (),
    data_root: Path | None = None,
    insecure: bool = False,
    metrics: bool = False,
    balanced_ids: bool = True,
) -> RingFile:
    """Start n node processes on loopback, the first with the ring-wide `engine` options,
    every one with `node_args` (options of each node, such as how it batches) and, with a
    data root, its data directory there, and wait until the ring has converged. The ring
    runs mutual TLS with the certificates in tls/ beside the ring file (made if missing),
    unless `insecure`. With `balanced_ids` a new ring's ids are evenly spaced in port order
    (chord.protocol.ids.spread_ids); a node restarted from its data takes the id it had."""
    if n < 1:
        raise RingError(f"a ring needs at least one node, not {n}")
    timing = timing or Timing()
    if ring_path.exists():
        old = RingFile.load(ring_path)
        if any(pid_alive(e.pid, e.port) for e in old.nodes):
            raise RingError(
                f"a ring is already running from {ring_path}; `cqengine ring down` first"
            )
    kept = stored_ports(data_root) if data_root is not None else []
    if base_port is not None:
        if not 0 < base_port <= 65535 - n + 1:
            raise RingError(f"--base-port {base_port} leaves no room for {n} ports")
        ports = list(range(base_port, base_port + n))
        busy = [p for p in ports if not port_free(p)]
        if busy:
            raise RingError(f"port {busy[0]} is in use; choose another --base-port")
    else:
        busy = [p for p in kept if not port_free(p)]
        if busy:
            raise RingError(
                f"port {busy[0]}, where the node with data in {data_root / str(busy[0])} "
                "listens, is in use"
            )
        ports = (
            kept[:n]
            + [p for p in free_ports(n + len(kept)) if p not in kept][: max(0, n - len(kept))]
        )
    left_out = [p for p in kept if p not in ports]
    if left_out:
        raise RingError(
            f"{data_root} holds the state of {len(kept)} nodes (ports {', '.join(map(str, kept))}),"
            f" {len(left_out)} of them not in this ring: their subscriptions would not be served;"
            " start them all (without --base-port), or `cqengine ring down --purge` first"
        )
    log_dir = ring_path.parent / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    tls = None if insecure else (ring_path.parent / TLS).resolve()
    if tls is not None:
        make_certificates(tls, ports)
    ring = RingFile(path=ring_path, r=r, engine=list(engine), tls=str(tls or ""))
    credentials = ring.credentials()

    def data(port: int) -> Path | None:
        return data_root / str(port) if data_root is not None else None

    exporters = dict(zip(ports, free_ports(n, exclude=ports))) if metrics else {}

    # a ring that keeps some nodes' data is not new: its new nodes' ids are hashed
    ids = dict(zip(sorted(ports), spread_ids(n, min(ports)))) if balanced_ids and not kept else {}

    def start(port: int, join: str | None) -> NodeEntry:
        own = [*node_args, *(["--id", hex(ids[port])] if port in ids else [])]
        return spawn(
            port, join, r, timing, log_dir, engine, own, data(port), tls, exporters.get(port)
        )

    try:
        first = start(ports[0], None)
        ring.nodes.append(first)
        wait_serving(first, 20, credentials)
        ring.nodes += [start(port, first.address) for port in ports[1:]]
        ring.save()  # from here `ring down` can clean up even if we are interrupted
        for entry in ring.nodes[1:]:
            wait_serving(entry, 20, credentials)
        view = wait_converged(ring.addresses(), r, timeout or 30 + n, progress, credentials)
        wait_replicated(view, timeout or 30 + n, progress)
    except BaseException:
        stop_processes(ring.nodes, grace=1.0)
        ring_path.unlink(missing_ok=True)
        raise
    for entry in ring.nodes:
        entry.id = short(view.states[entry.address].node.id)
    ring.save()
    print(format_table(view, r), file=out)
    print(f"ring of {n} nodes converged; ring file {ring_path}", file=out)
    print(
        f"mutual TLS: certificates in {tls} (clients here find them in the ring file)"
        if tls is not None
        else "PLAINTEXT (--insecure): anyone who reaches these ports may call every service",
        file=out,
    )
    if data_root is not None:
        print(
            f"node data in {data_root}"
            + (f" ({len(kept)} nodes restarted from theirs)" if kept else ""),
            file=out,
        )
    return ring


def stored_ports(data_root: Path) -> list[int]:
    """The ports of the nodes whose state is kept under data_root."""
    if not data_root.is_dir():
        return []
    return sorted(
        int(d.name) for d in data_root.iterdir() if d.name.isdigit() and (d / FILE).exists()
    )


def any_node(ring_path: Path, credentials: Credentials | None = None) -> str:
    """The address of a node of the ring file that answers (to a client presenting these
    credentials, or else the ring file's)."""
    ring = RingFile.load(ring_path)
    credentials = credentials or ring.credentials()
    for entry in ring.nodes:
        if serving(entry.address, 1.0, credentials):
            return entry.address
    raise RingError(f"no node of {ring_path} answers; `cqengine ring status` shows the ring")


def ring_metrics(ring_path: Path) -> str:
    """Prometheus file_sd JSON naming the ring file's metrics endpoints."""
    from cqengine.live.metrics import scrape_config

    ring = RingFile.load(ring_path)
    targets = [e.metrics for e in ring.nodes if e.metrics]
    if not targets:
        raise RingError(
            f"the nodes of {ring_path} serve no metrics: start the ring with `ring up --metrics`"
        )
    return scrape_config(targets)


def ring_status(ring_path: Path, out: TextIO = sys.stdout) -> bool:
    """Print the ring's table and what is wrong with it; whether it is one correct ring with
    every range fully replicated."""
    ring = RingFile.load(ring_path)
    view = observe(ring.addresses(), ring.r, credentials=ring.credentials())
    if not view.states:
        raise RingError(
            f"no node of {ring_path} answers ({len(view.down)} down); "
            "`cqengine ring down` clears it"
        )
    print(format_table(view, ring.r), file=out)
    if not view.ok:
        print(f"ring NOT converged: {len(view.problems)} problems", file=out)
        for p in view.problems[:20]:
            print(f"  {p}", file=out)
        return False
    print(
        f"ring OK: {len(view.states)} nodes answer and form one correct ring"
        + (f"; {len(view.down)} down" if view.down else ""),
        file=out,
    )
    missing = under_replicated(view)
    if missing:
        print(f"under-replicated: {len(missing)} ranges", file=out)
        for p in missing[:20]:
            print(f"  {p}", file=out)
        return False
    print("every range has all its copies", file=out)
    return True


def ring_down(ring_path: Path, out: TextIO = sys.stdout, purge: bool = False) -> int:
    """Stop every node of the ring file, each keeping its state (the whole ring stops: there
    is nobody to hand it to); with `purge`, remove their data directories too."""
    if purge and not ring_path.exists():
        root = ring_path.parent / DATA
        if not root.exists():
            raise RingError(f"no ring file at {ring_path} and no data in {root}")
        shutil.rmtree(root)
        print(f"no ring was running; removed {root}", file=out)
        return 0
    ring = RingFile.load(ring_path)
    stopped = stop_processes(ring.nodes, how=signal.SIGUSR1)
    ring_path.unlink(missing_ok=True)
    dirs = [Path(e.data) for e in ring.nodes if e.data]
    if purge:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        for root in {d.parent for d in dirs}:
            if root.is_dir() and not any(root.iterdir()):
                root.rmdir()
    if stopped == 0 and not purge:
        raise RingError(
            f"no process of {ring_path} was running ({len(ring.nodes)} gone); removed the file"
        )
    print(f"stopped {stopped} of {len(ring.nodes)} nodes; removed {ring_path}", file=out)
    if dirs:
        roots = ", ".join(sorted({str(d.parent) for d in dirs}))
        print(
            f"removed their data in {roots}"
            if purge
            else f"their data stays in {roots}: `ring up` restarts from it, "
            "`ring down --purge` removes it",
            file=out,
        )
    return stopped
