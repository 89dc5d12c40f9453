"""A ring's node processes on one machine: each `cqengine node`'s command line, the
process started in a session of its own (it outlives `ring up`) with its log beside the
ring file, found alive by pid and port, waited on until it serves, and stopped by signal."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from chord.live.client import serving
from chord.live.server import Timing
from chord.live.tls import Credentials
from cqengine.live.ports import HOST
from cqengine.live.ring.certificates import make_certificates, node_certificate
from cqengine.live.ringfile import NodeEntry, RingError

EXEC_WAITS = 50  # 10 ms looks at a process whose command line is not there yet (pid_alive)


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


def wait_serving(entry: NodeEntry, timeout: float, credentials: Credentials | None = None) -> None:
    """Until the node serves; RingError if its process exits first (with the last line of
    its log), or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not serving(entry.address, 0.5, credentials):
        if not pid_alive(entry.pid, entry.port):
            _reap()
            raise RingError(f"node {entry.address} exited: {log_tail(entry) or 'no output'}")
        if time.monotonic() > deadline:
            raise RingError(f"node {entry.address} did not start within {timeout:.0f}s")
        time.sleep(0.1)


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
