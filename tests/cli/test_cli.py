"""Bad input to the command line: one clear line, a non-zero exit, nothing left running."""

import json
import socket
import subprocess
import sys

import pytest
from support.command_line import assert_one_line_error, cqengine

from cqengine.live.ring import free_ports, pid_alive


@pytest.fixture
def node_tls(tmp_path):
    """The arguments of a node with certificates of its own ring (`cqengine certs`)."""
    d = tmp_path / "tls"
    assert cqengine("certs", "init", "--dir", d).returncode == 0
    assert cqengine("certs", "node", "--dir", d, "--name", "127.0.0.1").returncode == 0
    return ["--tls-dir", d]


def test_join_through_an_unreachable_address(node_tls):
    port, dead = free_ports(2)
    proc = cqengine("node", "--port", port, "--join", f"127.0.0.1:{dead}", *node_tls, timeout=30)
    assert_one_line_error(proc, f"cannot reach 127.0.0.1:{dead}")


def test_port_in_use(node_tls):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = cqengine("node", "--port", port, *node_tls, timeout=30)
    assert_one_line_error(proc, f"cannot listen on 127.0.0.1:{port}")


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["node", "--port", "7000", "--id", "xyz"], "malformed id 'xyz'"),
        (["node", "--port", "7000", "--id", str(2**64)], "outside the identifier space"),
        (["node", "--port", "70000"], "port 70000 is outside"),
        (["node", "--port", "7000", "--join", "nohostport"], "is not HOST:PORT"),
        (["node", "--port", "7000", "--host", "0.0.0.0"], "--advertise"),
        (["ring", "up", "-n", "0"], "at least one node"),
        (["ring", "up", "-n", "3", "--stabilize", "-1"], "must be positive"),
        (["ring"], "required"),
    ],
)
def test_malformed_arguments(args, fragment, tmp_path):
    proc = (
        cqengine(*args, "--ring-file", tmp_path / "r.json")
        if args[0] == "ring" and len(args) > 1
        else cqengine(*args)
    )
    assert_one_line_error(proc, fragment)


def test_ring_commands_without_a_ring_file(tmp_path):
    for action in ("status", "down"):
        proc = cqengine("ring", action, "--ring-file", tmp_path / "none.json")
        assert_one_line_error(proc, "no ring file")


def test_malformed_ring_file(tmp_path):
    path = tmp_path / "ring.json"
    path.write_text("{not json")
    assert_one_line_error(cqengine("ring", "status", "--ring-file", path), "malformed")


def test_ring_file_pointing_at_dead_processes(tmp_path):
    ports = free_ports(3)
    path = tmp_path / "ring.json"
    nodes = [
        {"address": f"127.0.0.1:{p}", "port": p, "pid": 999999 - i, "log": "", "id": ""}
        for i, p in enumerate(ports)
    ]
    path.write_text(json.dumps({"r": 8, "nodes": nodes}))
    assert not any(pid_alive(n["pid"]) for n in nodes)
    assert_one_line_error(cqengine("ring", "status", "--ring-file", path), "no node of", "3 down")
    assert_one_line_error(cqengine("ring", "down", "--ring-file", path), "no process of")
    assert not path.exists()


def test_base_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = cqengine(
            "ring", "up", "-n", 2, "--base-port", port - 1, "--ring-file", tmp_path / "r.json"
        )
    assert_one_line_error(proc, f"port {port} is in use")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "command", [["subscribe", "some query"], ["publish", "--text", "x"], ["stats"]]
)
def test_client_commands_against_an_unreachable_node(command):
    dead = free_ports(1)[0]
    proc = cqengine(*command, "--node", f"127.0.0.1:{dead}", timeout=60)
    assert_one_line_error(proc, f"node 127.0.0.1:{dead} does not answer")


def test_output_cut_short_by_its_reader_ends_quietly():
    """`cqengine ... | head -1`: the reader closes the pipe; no traceback, SIGPIPE's status."""
    words = " ".join(f"levee{i}" for i in range(10_000))  # more than a pipe buffer holds
    proc = subprocess.run(
        f"{sys.executable} -m cqengine analyze '{words}' | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.strip() == "levee0"
    assert proc.stderr == ""
    assert proc.returncode == 141
