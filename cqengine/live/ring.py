"""Running a ring on one machine: `ring up`, `ring status`, `ring down`.

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

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from chord.live.client import fetch_states, serving, table_from_state
from chord.live.server import Timing
from chord.live.tls import ADMIN, NODE, Credentials
from chord.protocol.ids import short, spread_ids
from chord.protocol.messages import to_ref
from chord.protocol.routing import SUCCESSORS
from chord.simulation.oracle import RingOracle, ring_problems
from cqengine.live.client import Client, ClientError
from cqengine.live.datadir import FILE
from cqengine.live.ports import HOST, free_ports, port_free
from cqengine.live.ringfile import CLIENT, NodeEntry, RingError, RingFile

DATA = "data"  # the nodes' data root beside the ring file, unless `ring up --data-dir` says
TLS = "tls"  # the ring's certificates beside the ring file
EXEC_WAITS = 50  # 10 ms looks at a process whose command line is not there yet (pid_alive)


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


# ---- processes ------------------------------------------------------------------------


def pid_alive(pid: int, port: int | None = None) -> bool:
    """True if pid is a running (not zombie) cqengine node, on `port` when given."""
    try:
        for _ in range(EXEC_WAITS):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return False  # exited (a zombie has no command line: no need to wait)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if cmdline:
                break
            # a node just spawned may be caught inside exec, its arguments not yet there
            # (Popen returns once exec is under way): it was taken for dead in CI
            time.sleep(0.01)
    except OSError:
        return False
    args = [a.decode(errors="replace") for a in cmdline.split(b"\0")]
    if "cqengine" not in " ".join(args) or "node" not in args:
        return False  # the pid was reused by something else
    return port is None or str(port) in args


def node_command(
    port: int,
    join: str | None,
    r: int,
    timing: Timing,
    engine: list[str] = (),
    node_args: list[str] = (),
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "cqengine",
        "node",
        "--host",
        HOST,
        "--port",
        str(port),
        "--successors",
        str(r),
        "--stabilize",
        str(timing.stabilize),
        "--fix-fingers",
        str(timing.fix_fingers),
        "--check-predecessor",
        str(timing.check_predecessor),
        "--rpc-timeout",
        str(timing.rpc_timeout),
        "--call-timeout",
        str(timing.call_timeout),
        *node_args,
    ]
    # a joining node takes the engine settings from the ring; the first node sets them
    return cmd + (["--join", join] if join else list(engine))


def spawn(
    port: int,
    join: str | None,
    r: int,
    timing: Timing,
    log_dir: Path,
    engine: list[str] = (),
    node_args: list[str] = (),
    data: Path | None = None,
    tls: Path | None = None,
    metrics: int | None = None,
    env: dict[str, str] | None = None,
) -> NodeEntry:
    """Start a node process at `port`; with `tls`, the ring's certificate directory, it
    speaks mutual TLS with its certificate there (made if the port is new), else plaintext;
    with `metrics`, a port, it serves Prometheus metrics there. `env`: variables set for it
    beside this process's (a benchmark's injected fault)."""
    if tls is not None:
        make_certificates(tls, [port])
    log_path = log_dir / f"node-{port}.log"
    node_args = [*node_args, *(["--data-dir", str(data)] if data is not None else [])]
    node_args += ["--metrics-port", str(metrics)] if metrics is not None else []
    node_args += (
        ["--tls-dir", str(tls), "--tls-name", node_certificate(port)]
        if tls is not None
        else ["--insecure"]
    )
    with open(log_path, "ab") as log:  # a node restarted at its port adds to its log
        proc = subprocess.Popen(
            node_command(port, join, r, timing, engine, node_args),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **env} if env else None,
        )  # outlives `ring up`
    return NodeEntry(
        address=f"{HOST}:{port}",
        port=port,
        pid=proc.pid,
        log=str(log_path),
        data=str(data) if data is not None else "",
        metrics=f"{HOST}:{metrics}" if metrics is not None else "",
    )


def log_tail(entry: NodeEntry, lines: int = 1) -> str:
    try:
        text = Path(entry.log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def stop_processes(
    entries: list[NodeEntry], grace: float = 5.0, how: signal.Signals = signal.SIGTERM
) -> int:
    """SIGTERM (the node leaves gracefully) or SIGUSR1 (it stops, keeping what it holds),
    then SIGKILL after `grace`; returns how many ran."""
    running = [e for e in entries if pid_alive(e.pid, e.port)]
    for e in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(e.pid, how)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(e.pid, e.port) for e in running):
        _reap()
        time.sleep(0.05)
    for e in running:
        if pid_alive(e.pid, e.port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(e.pid, signal.SIGKILL)
    _reap()
    return len(running)


def _reap() -> None:
    """Collect exited children of this process (nodes started by an in-process `ring up`)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


# ---- inspection -----------------------------------------------------------------------


@dataclass
class RingView:
    states: dict  # address -> StateReply of every node that answered
    down: list[str]
    problems: list[str]
    credentials: Credentials | None = None  # what it was observed with

    @property
    def ok(self) -> bool:
        return bool(self.states) and not self.problems


def observe(
    addresses: list[str], r: int, timeout: float = 1.0, credentials: Credentials | None = None
) -> RingView:
    """Ask every known node, and every node they point at, for its view; check the ring."""
    known, states, down = list(addresses), {}, []
    pending = list(addresses)
    while pending:
        for address, state in fetch_states(pending, timeout, credentials).items():
            if state is None:
                down.append(address)
                continue
            states[address] = state
        pointed = {
            n.address
            for s in states.values()
            for n in [s.predecessor, *s.successors, *s.fingers]
            if n.address
        }
        pending = sorted(pointed - set(known))
        known += pending
    tables = [table_from_state(s, r) for s in states.values()]
    problems = ring_problems(tables, r) if tables else ["no node answers"]
    # a node that answers but points at a dead one is a problem the table check names already
    return RingView(
        states=states, down=sorted(set(down)), problems=problems, credentials=credentials
    )


def wait_converged(
    addresses: list[str],
    r: int,
    timeout: float,
    progress: Callable[[str], None] = lambda s: None,
    credentials: Credentials | None = None,
) -> RingView:
    deadline = time.monotonic() + timeout
    while True:
        view = observe(addresses, r, credentials=credentials)
        if view.ok and not view.down and len(view.states) == len(addresses):
            return view
        progress(
            f"converging: {len(view.states)}/{len(addresses)} nodes answer, "
            f"{len(view.problems)} problems left"
        )
        if time.monotonic() > deadline:
            first = view.problems[0] if view.problems else f"down: {', '.join(view.down)}"
            raise RingError(f"ring did not converge within {timeout:.0f}s ({first})")
        time.sleep(0.3)


def format_table(view: RingView, r: int) -> str:
    rows = [("address", "id", "predecessor", "successor", "fingers ok", "keys")]
    oracle_tables = {}
    if view.states:
        oracle = RingOracle(to_ref(s.node) for s in view.states.values())
        oracle_tables = {a: oracle.table(to_ref(s.node), r) for a, s in view.states.items()}
    for address, s in sorted(view.states.items(), key=lambda kv: kv[1].node.id):
        t = table_from_state(s, r)
        good = sum(a == b for a, b in zip(t.fingers, oracle_tables[address].fingers))
        rows.append(
            (
                address,
                short(t.me.id),
                t.predecessor.address if t.predecessor else "-",
                t.successor.address,
                f"{good}/{len(t.fingers)}",
                str(s.keys),
            )
        )
    for address in view.down:
        rows.append((address, "-", "down", "-", "-", "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


# ---- the three commands ---------------------------------------------------------------


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
        _wait_serving(first, 20, credentials)
        ring.nodes += [start(port, first.address) for port in ports[1:]]
        ring.save()  # from here `ring down` can clean up even if we are interrupted
        for entry in ring.nodes[1:]:
            _wait_serving(entry, 20, credentials)
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


def _wait_serving(entry: NodeEntry, timeout: float, credentials: Credentials | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not serving(entry.address, 0.5, credentials):
        if not pid_alive(entry.pid, entry.port):
            _reap()
            raise RingError(f"node {entry.address} exited: {log_tail(entry) or 'no output'}")
        if time.monotonic() > deadline:
            raise RingError(f"node {entry.address} did not start within {timeout:.0f}s")
        time.sleep(0.1)


def under_replicated(view: RingView, timeout: float = 2.0) -> list[str]:
    """The nodes whose range has fewer copies than the ring keeps (or the ring's size
    allows), as their last reconciliation with their replicas found: one line each."""

    def stats(address: str):
        try:
            with Client(address, timeout, view.credentials) as c:
                return c.stats()
        except ClientError:
            return None

    addresses = sorted(view.states, key=lambda a: view.states[a].node.id)
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(addresses)))) as pool:
        replies = dict(zip(addresses, pool.map(stats, addresses)))
    out = []
    for address, s in replies.items():
        if s is None:
            out.append(f"{address}: its engine does not answer")
            continue
        want = min(s.config.replicas, len(view.states))
        if s.copies < want:
            state = view.states[address]
            lo = short(state.predecessor.id) if state.HasField("predecessor") else "?"
            out.append(
                f"range ({lo}, {short(state.node.id)}] of {address} has {s.copies} of "
                f"{want} copies (its replicas have not all agreed with it yet)"
            )
    return out


def wait_replicated(
    view: RingView, timeout: float, progress: Callable[[str], None] = lambda s: None
) -> None:
    """Until every node's range has all its copies (a restarted ring's replicas reconcile)."""
    deadline = time.monotonic() + timeout
    while missing := under_replicated(view):
        progress(f"replicating: {len(missing)} ranges lack copies")
        if time.monotonic() > deadline:
            raise RingError(
                f"the ring was not fully replicated within {timeout:.0f}s ({missing[0]})"
            )
        time.sleep(0.3)


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
