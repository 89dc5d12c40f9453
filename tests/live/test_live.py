"""Live rings of node processes on loopback, checked against the global oracle."""

import io
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.command_line import assert_one_line_error, cqengine
from support.live import FAST, wait_gone
from support.waiting import eventually

from chord.live.client import fetch_state, lookup, serving
from chord.protocol.ids import SPACE
from chord.protocol.messages import to_ref
from chord.simulation.oracle import RingOracle
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import observe, wait_converged
from cqengine.live.ring.processes import pid_alive, stop_processes
from cqengine.live.ringfile import RingFile


@pytest.fixture
def ring16(tmp_path):
    path = tmp_path / "ring.json"
    ring = ring_up(16, path, timing=FAST, out=io.StringIO())
    try:
        yield ring
    finally:
        stop_processes(ring.nodes, grace=2.0)


def test_a_node_caught_inside_exec_is_alive(monkeypatch):
    """Popen returns once exec is under way, before the new program's arguments show in
    /proc: a node just spawned may have no command line yet, and is not dead."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "cqengine", "node", "--port", "7"]
    )
    try:
        real, blank = Path.read_bytes, [True]

        def read_bytes(path):
            if path.name == "cmdline" and blank:
                blank.pop()  # once: exec under way
                return b""
            return real(path)

        monkeypatch.setattr(Path, "read_bytes", read_bytes)
        assert pid_alive(proc.pid, 7)
        assert not pid_alive(proc.pid, 8)
    finally:
        proc.kill()
        proc.wait()
    assert not pid_alive(proc.pid, 7)


def test_a_node_that_exited_is_dead_at_once(monkeypatch):
    """An exited node not yet reaped (a zombie) has no command line either, like one caught
    inside exec, but it is dead: no wait for arguments that will never come (stopping a
    ring of 16 took 15 s of such waits)."""
    from cqengine.live.ring import processes

    proc = subprocess.Popen([sys.executable, "-c", "pass", "cqengine", "node", "--port", "7"])
    try:
        eventually(
            lambda: Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0],
            10,
            "the process to exit, unreaped",
            holds=lambda state: state == "Z",
        )
        waits = []
        monkeypatch.setattr(processes.time, "sleep", waits.append)
        assert not pid_alive(proc.pid, 7)
        assert waits == []
    finally:
        proc.wait()


def assert_lookups_from_every_node(addresses, credentials, rng, per_node=8):
    view = observe(addresses, 8, credentials=credentials)
    oracle = RingOracle(to_ref(s.node) for s in view.states.values())
    assert sorted(oracle.nodes, key=lambda n: n.address) == sorted(
        (to_ref(s.node) for s in view.states.values()), key=lambda n: n.address
    )
    for address in addresses:
        for _ in range(per_node):
            key = rng.getrandbits(64)
            owner, _ = lookup(address, key, credentials=credentials)
            assert owner == oracle.owner(key), (address, key)


def test_sixteen_nodes_converge_survive_leave_and_kill(ring16):
    rng = random.Random(16)
    addresses, credentials = ring16.addresses(), ring16.credentials()
    view = observe(addresses, 8, credentials=credentials)
    assert view.ok and len(view.states) == 16 and not view.down
    # the standard gRPC health service
    assert all(serving(a, credentials=credentials) for a in addresses)
    assert_lookups_from_every_node(addresses, credentials, rng)

    # every node counted its maintenance traffic in its ledger
    ledger = {e.kind: e for e in fetch_state(addresses[0], credentials=credentials).ledger}
    assert ledger["Notify"].messages > 0 and ledger["GetNeighbors.reply"].bytes > 0

    leaving, killed = [], []
    order = rng.sample(ring16.nodes, 8)
    leaving, killed = order[:4], order[4:]
    for e in leaving:
        os.kill(e.pid, signal.SIGTERM)
    wait_gone(leaving)
    survivors = [e.address for e in ring16.nodes if e not in leaving]
    view = wait_converged(survivors, 8, timeout=60, credentials=credentials)
    assert len(view.states) == 12
    assert_lookups_from_every_node(survivors, credentials, rng)

    for e in killed:
        os.kill(e.pid, signal.SIGKILL)
    wait_gone(killed)
    survivors = [a for a in survivors if a not in {e.address for e in killed}]
    view = wait_converged(survivors, 8, timeout=60, credentials=credentials)
    assert len(view.states) == 8
    assert_lookups_from_every_node(survivors, credentials, rng)

    # status lists the eight gone as down and still calls the ring correct, and (once the
    # survivors have reconciled their new ranges) fully replicated
    def status():
        proc = cqengine("ring", "status", "--ring-file", ring16.path)
        if proc.returncode:
            assert "under-replicated" in proc.stdout, proc.stdout + proc.stderr
        return proc

    proc = eventually(
        status, 30, "ring status to exit 0", holds=lambda p: p.returncode == 0, interval=0.5
    )
    assert "every range has all its copies" in proc.stdout
    down_rows = [line for line in proc.stdout.splitlines() if line.split()[2:3] == ["down"]]
    assert len(down_rows) == 8 and "ring OK: 8 nodes answer" in proc.stdout


def test_cli_ring_up_status_down(tmp_path):
    path = tmp_path / "ring.json"
    up = cqengine(
        "ring",
        "up",
        "-n",
        3,
        "--ring-file",
        path,
        "--stabilize",
        FAST.stabilize,
        "--fix-fingers",
        FAST.fix_fingers,
        timeout=90,
    )
    ring = RingFile.load(path) if path.exists() else None
    try:
        assert up.returncode == 0, up.stderr
        assert "ring of 3 nodes converged" in up.stdout
        assert len(ring.nodes) == 3 and all(pid_alive(e.pid, e.port) for e in ring.nodes)
        # evenly spaced ids by default: every node's region a third of the circle
        view = observe(ring.addresses(), 3, credentials=ring.credentials())
        ids = sorted(state.node.id for state in view.states.values())
        gaps = [(b - a) % SPACE for a, b in zip(ids, ids[1:] + ids[:1])]
        assert max(gaps) - min(gaps) <= 1
        again = cqengine("ring", "up", "-n", 2, "--ring-file", path)
        assert_one_line_error(again, "already running")
        status = cqengine("ring", "status", "--ring-file", path)
        assert status.returncode == 0 and "ring OK: 3 nodes" in status.stdout
        down = cqengine("ring", "down", "--ring-file", path)
        assert down.returncode == 0 and "stopped 3 of 3" in down.stdout
        wait_gone(ring.nodes)
        assert not path.exists()
        # restarted from their data, the nodes keep their ids, whatever a new ring would get
        up = cqengine("ring", "up", "-n", 3, "--ring-file", path, "--hashed-ids", timeout=90)
        ring = RingFile.load(path) if path.exists() else None
        assert up.returncode == 0, up.stderr
        view = observe(ring.addresses(), 3, credentials=ring.credentials())
        assert sorted(state.node.id for state in view.states.values()) == ids
        assert cqengine("ring", "down", "--ring-file", path).returncode == 0
        wait_gone(ring.nodes)
    finally:
        if ring:
            stop_processes(ring.nodes, grace=1.0)


def test_status_fails_when_nodes_do_not_form_one_ring(tmp_path):
    # two separate one-node rings recorded as one: both answer, but they are two rings
    # (their ring files share a directory, so they share its tls/: one CA, one client)
    a = ring_up(1, tmp_path / "a.json", timing=FAST, out=io.StringIO())
    b = ring_up(1, tmp_path / "b.json", timing=FAST, out=io.StringIO())
    try:
        assert a.tls == b.tls
        both = RingFile(path=tmp_path / "both.json", nodes=a.nodes + b.nodes, tls=a.tls)
        both.save()
        proc = cqengine("ring", "status", "--ring-file", both.path)
        assert proc.returncode == 1
        assert "ring NOT converged" in proc.stdout and "successor ring holds 1 of 2" in proc.stdout
    finally:
        stop_processes(a.nodes + b.nodes, grace=1.0)


def test_demo_command():
    proc = cqengine("demo", "--nodes", 4, "--queries", 60, "--docs", 15, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": OK") == 4  # one live ring per strategy, alerts = matcher
    assert "every alert matched the brute-force matcher" in proc.stdout
