import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chord.live import Timing

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative: str):
    """Import a script that is not part of a package (benchmarks, generators) by path."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Fast maintenance so live rings converge in seconds on a 2-core machine.
FAST = Timing(stabilize=0.15, fix_fingers=0.3, check_predecessor=0.3, rpc_timeout=1.0)


def wait_gone(entries, timeout=10.0):
    """Until these node processes (ring file entries) have exited, reaped (bounded)."""
    from cqengine.live.ring import pid_alive

    deadline = time.monotonic() + timeout
    while any(pid_alive(e.pid, e.port) for e in entries):
        assert time.monotonic() < deadline, "nodes did not exit"
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)


def kill_hard(entry) -> None:
    """SIGKILL a node process: it vanishes without a word, as in a crash."""
    os.kill(entry.pid, signal.SIGKILL)
    wait_gone([entry])


def restart(entry, join: str, ring, log_dir: Path, data: Path):
    """Start a node of `ring` again at its port from its data directory, joining through
    `join`, with its certificate of the ring; its new ring file entry, once it serves."""
    from cqengine.live.ring import _wait_serving, spawn

    back = spawn(entry.port, join, ring.r, FAST, log_dir, data=data, tls=Path(ring.tls))
    _wait_serving(back, 20, ring.credentials())
    return back


def engine_node(**kw):
    """An engine node on the live shell at a free loopback port, default settings, not
    started; `kw` go to LiveNode (timing, credentials, access, limits)."""
    from chord.live import LiveNode
    from cqengine.core.node import EngineNode
    from cqengine.core.settings import Settings
    from cqengine.live.ring import free_ports

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


def cqengine(*args, timeout=120, env=None):
    """Run the real command line; returns the finished process (never raises on exit code)."""
    return subprocess.run(
        [sys.executable, "-m", "cqengine", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cqengine: error: "), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture
def fast():
    return FAST


@pytest.fixture(scope="session")
def spark():
    """One embedded Spark for the whole run (a JVM takes seconds to start)."""
    from cqengine.spark.session import session

    s = session("local[2]", app="cqengine-tests")
    try:
        yield s
    finally:
        s.stop()
