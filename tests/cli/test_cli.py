"""Bad input to the command line: one clear line, a non-zero exit, nothing left running.
And the defaults it shows and gives are the dataclasses' own."""

import argparse
import json
import re
import socket
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from support.command_line import assert_one_line_error, cqengine

from chord.live.server import Limits, Timing
from chord.protocol.routing import RoutingTable
from cqengine.cli import build_parser, main
from cqengine.cli.options import (
    ENGINE_FLAGS,
    FILES,
    limits_from,
    publishing_from,
    settings_from,
    timing_from,
)
from cqengine.core.terms.presence import DEFAULT_HEADER_TERMS
from cqengine.core.terms.settings import LOG_MEMBERS, REPLICAS, Settings
from cqengine.live.ports import free_ports
from cqengine.live.publishing import Publishing
from cqengine.live.ring.processes import pid_alive


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


def test_metrics_port_in_use(node_tls):
    (port,) = free_ports(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        proc = cqengine("node", "--port", port, "--metrics-port", taken, *node_tls, timeout=30)
    assert_one_line_error(proc, f"cannot serve metrics on 127.0.0.1:{taken}")


def test_headers_are_on_by_default_where_they_pay(tmp_path):
    """With term statistics and Term Dialogue a ring gets term-presence headers unless
    told otherwise; with Bloom filters (where they cost bytes), or without statistics, none."""
    stats = tmp_path / "stats.tsv"
    stats.write_text("levee\t3\nriver\t2\n")
    parser = command("node")

    def headers(*args) -> int:
        return settings_from(parser.parse_args(["--port", "7000", *map(str, args)])).header_terms

    assert headers("--stats", stats) == DEFAULT_HEADER_TERMS
    assert headers("--stats", stats, "--resolution", "bf") == 0
    assert headers("--stats", stats, "--header-terms", 0) == 0
    assert headers("--stats", stats, "--header-terms", 8) == 8
    assert headers() == 0


def test_a_ring_on_the_home_log_has_five_members_unless_told():
    """Three copies survive two nodes failing at once; a log of three only one (a majority
    must be left): on the home log (the default), each log has five members unless told
    otherwise, while the index keeps its three copies; with --replicas 1 nothing is
    copied, the log neither."""
    parser = command("node")

    def sizes(*args) -> tuple[int, int]:
        s = settings_from(parser.parse_args(["--port", "7000", *args]))
        return s.replicas, s.members

    assert sizes() == sizes("--home-log", "on") == (REPLICAS, LOG_MEMBERS) == (3, 5)
    assert sizes("--home-log", "off") == (3, 3)
    assert sizes("--log-members", "3") == (3, 3)
    assert sizes("--replicas", "2") == (2, 5)
    assert sizes("--replicas", "1") == (1, 1)


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


# each option whose default is a dataclass field's -> (dataclass, field); the engine options
# are in ENGINE_FLAGS
FIELDS = {
    "--stabilize": (Timing, "stabilize"),
    "--fix-fingers": (Timing, "fix_fingers"),
    "--check-predecessor": (Timing, "check_predecessor"),
    "--rpc-timeout": (Timing, "rpc_timeout"),
    "--call-timeout": (Timing, "call_timeout"),
    "--successors": (RoutingTable, "r"),
    "--linger-ms": (Publishing, "linger_ms"),
    "--batch-docs": (Publishing, "batch_docs"),
    "--max-channels": (Limits, "channels"),
    "--max-background": (Limits, "background"),
    "--client-rate": (Limits, "client_rate"),
    "--client-burst": (Limits, "client_burst"),
}


def command(*words):
    """The parser of a (sub)command, e.g. command("ring", "up")."""
    parser = build_parser()
    for word in words:
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    return parser


def field_default(kind, name: str):
    [default] = [f.default for f in fields(kind) if f.name == name]
    return default


def stated_default(action) -> str | None:
    """The default an option's help states, as `--help` shows it."""
    found = re.search(r"\(default ([^;,)]+)\)", (action.help or "") % vars(action))
    return found and found.group(1)


def same(stated: str, value) -> bool:
    if isinstance(value, str):
        return stated == value
    if isinstance(value, bool):
        return stated == ("on" if value else "off")
    if stated.endswith(" MiB"):
        return int(stated.removesuffix(" MiB")) << 20 == value
    return float(stated) == value


@pytest.mark.parametrize(
    "words,args", [(("node",), ["--port", "7000"]), (("ring", "up"), ["-n", "3"])]
)
def test_defaults_are_the_dataclasses_own(words, args):
    """Each default is written once, in its dataclass: what an option left out gives, and
    what its help says it gives, is the field's default (a ring of the command line keeps
    REPLICAS copies, where Settings' own default is the paper's one)."""
    parser = command(*words)
    parsed = parser.parse_args(args)
    assert timing_from(parsed) == Timing()
    assert limits_from(parsed) == Limits()
    assert publishing_from(parsed) == Publishing()
    assert settings_from(parsed) == Settings(
        replicas=REPLICAS, home_log=True, log_members=LOG_MEMBERS
    )
    engine = {flag: (Settings, name) for flag, (name, _, _) in ENGINE_FLAGS.items()}
    groups = [
        g
        for g in parser._action_groups
        if g.title.split()[0] in ("ring", "publishing", "limits", "engine")
    ]
    options = {a.option_strings[-1]: a for g in groups for a in g._group_actions}
    assert set(options) == set(FIELDS | engine)  # every option of those groups is checked
    for flag, (kind, name) in (FIELDS | engine).items():
        default = {"--replicas": REPLICAS, "--log-members": LOG_MEMBERS, "--home-log": True}.get(
            flag
        )
        default = field_default(kind, name) if default is None else default
        if flag in engine:
            assert options[flag].default is None  # not given: the ring's, not passed on
        else:
            assert options[flag].default == default, flag
        stated = stated_default(options[flag])
        if flag in FILES:
            assert stated is None, flag
        else:
            assert stated is not None and same(stated, default), (flag, stated, default)


@pytest.mark.parametrize(
    "args,fragment",
    [
        ([], "give a QUERY"),
        (["levee", "--out", "new.jsonl"], "--out goes with --file"),
        (["--file", "q.txt"], "needs --out"),
        (["levee", "--file", "q.txt", "--out", "new.jsonl"], "give no QUERY"),
        (["--file", "none.txt", "--out", "new.jsonl"], "none.txt: no such file"),
        (["--file", "blank.txt", "--out", "new.jsonl"], "no queries in it"),
        (["--file", "q.txt", "--out", "old.jsonl"], "old.jsonl exists"),
    ],
)
def test_subscribe_file_mistakes_touch_no_ring_and_no_file(
    args, fragment, tmp_path, monkeypatch, capsys
):
    """`subscribe --file` refuses what it cannot do before it connects (no ring runs here),
    in one line, and never writes over a file that exists."""
    monkeypatch.chdir(tmp_path)
    Path("q.txt").write_text("levee\n")
    Path("blank.txt").write_text("# only a comment\n\n   \n")
    Path("old.jsonl").write_text("kept\n")
    assert main(["subscribe", *args, "--ring-file", "none.json"]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("cqengine: error: ") and fragment in line, line
    assert not Path("new.jsonl").exists() and Path("old.jsonl").read_text() == "kept\n"


def test_subscribe_file_against_an_unreachable_node_leaves_no_file(tmp_path, capsys):
    dead = free_ports(1)[0]
    queries, out = tmp_path / "q.txt", tmp_path / "out.jsonl"
    queries.write_text("levee\nstorm surge\n")
    args = [
        "subscribe",
        "--file",
        str(queries),
        "--out",
        str(out),
        "--ring-file",
        str(tmp_path / "r"),
    ]
    assert main([*args, "--node", f"127.0.0.1:{dead}"]) == 1
    assert f"node 127.0.0.1:{dead} does not answer" in capsys.readouterr().err
    assert not out.exists()  # nothing was placed: the next run may use the name
