"""The web console: in headless Chromium on a live ring it draws the ring's N nodes, draws a
killed node down within seconds, and shows the alerts of documents published on the page
for a query subscribed on the page, exactly the matcher's; it refuses to listen beyond
loopback without a token, and with one answers 401 to a request without it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from support.command_line import assert_one_line_error, cqengine
from support.netns import netns_usable
from support.repo import load_script

from cqengine.live.console import COOKIE
from cqengine.live.ports import free_ports
from cqengine.live.ring.commands import ring_down, ring_up

bench = load_script("experiments/bench_console.py")


@pytest.mark.skipif(bench.have_browser() is not None, reason=str(bench.have_browser()))
def test_the_console_in_a_browser_on_a_live_ring(tmp_path):
    shot = tmp_path / "console.png"
    args = ["--nodes", "4", "--docs", "4", "--traffic", "0", "--screenshot", str(shot)]
    # with a token: the page's script, styles, events and calls must all carry it (a cookie)
    args += ["--token", "browser-token"]
    assert bench.main([*args, "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench_console.json").read_text())
    assert result["alerts_exact"] and result["alerts_expected"]  # every match, only matches
    assert len(result["publish_to_alert_shown_ms"]["all"]) == len(result["alerts_expected"])
    assert result["node_killed_drawn_down_s"] < 10  # within seconds (the console looks each 1 s)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def status(url: str, headers: dict | None = None, body: bytes | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {}, data=body)
    try:
        with urllib.request.urlopen(request, timeout=5):
            return 200
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    path = tmp_path_factory.mktemp("console") / "ring.json"
    ring = ring_up(1, path, out=io.StringIO())
    try:
        yield ring
    finally:
        ring_down(path, out=io.StringIO())


def test_with_a_token_every_request_must_carry_it(ring, tmp_path):
    port = free_ports(1, exclude=[e.port for e in ring.nodes])[0]
    token = "s3cret-token"
    console = bench.start_console(ring.path, port, tmp_path / "log", ["--token", token])
    try:
        base = f"http://127.0.0.1:{port}"
        for path in ("/", "/events", "/static/console.js"):
            assert status(base + path) == 401
            assert status(f"{base}{path}?token=wrong-token") == 401
        assert status(f"{base}/?token={token}") == 200
        assert status(base + "/", {"Authorization": f"Bearer {token}"}) == 200
        cookie = {"Cookie": f"{COOKIE}={token}"}  # what the page got with it
        assert status(base + "/static/console.js", cookie) == 200
        assert status(base + "/static/console.js", {"Cookie": f"{COOKIE}=wrong-token"}) == 401
        # calls only as JSON from the console's own page: no cross-site form post
        publish, json_type = f"{base}/api/publish", {"Content-Type": "application/json"}
        body = b'{"text": "levee", "docno": "T1"}'
        assert status(publish, json_type, body) == 401
        assert status(publish, {**cookie, "Content-Type": "text/plain"}, body) == 403
        evil = {**cookie, **json_type, "Origin": "http://evil.example"}
        assert status(publish, evil, body) == 403
        assert status(publish, {**cookie, **json_type}, body) == 200
    finally:
        bench.stop(console)


def test_without_a_token_it_answers_only_to_its_loopback_names(ring, tmp_path):
    port = free_ports(1, exclude=[e.port for e in ring.nodes])[0]
    console = bench.start_console(ring.path, port, tmp_path / "log")
    try:
        base = f"http://127.0.0.1:{port}"
        assert status(base + "/") == 200
        # a page of another site whose name was rebound to 127.0.0.1 names itself
        assert status(base + "/", {"Host": f"evil.example:{port}"}) == 421
    finally:
        bench.stop(console)


def test_it_will_not_listen_beyond_loopback_without_a_token(ring):
    proc = cqengine("console", "--host", "0.0.0.0", "--ring-file", str(ring.path))
    assert_one_line_error(proc, "--host 0.0.0.0", "--token")


@pytest.mark.skipif(netns_usable() is not None, reason=str(netns_usable()))
def test_beyond_loopback_it_answers_401_without_its_token(ring, tmp_path):
    """The console bound to an address of a network namespace this test made (never the
    machine's own interfaces), reached from inside it."""
    ns, address, token = f"cq-console-{os.getpid()}", "10.203.0.1", "s3cret-token"
    inside = ["ip", "netns", "exec", ns]
    console = None
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for command in (
            "ip link set lo up",
            "ip link add cq0 type veth peer name cq1",  # an interface that is not loopback
            f"ip addr add {address}/24 dev cq0",
            "ip link set cq1 up",
            "ip link set cq0 up",
        ):
            subprocess.run([*inside, *command.split()], check=True)
        port = 18080
        with open(tmp_path / "console.log", "wb") as log:
            console = subprocess.Popen(
                [*inside, sys.executable, "-m", "cqengine", "console", "--host", address]
                + ["--port", str(port), "--token", token, "--ring-file", str(ring.path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        probe = (
            "import sys, time, urllib.request, urllib.error\n"
            "def code(url):\n"
            "    try:\n"
            "        urllib.request.urlopen(url, timeout=2); return 200\n"
            "    except urllib.error.HTTPError as e: return e.code\n"
            "    except OSError: return 0\n"
            "end = time.monotonic() + 30\n"
            f"while code('http://{address}:{port}/static/console.css?token={token}') != 200:\n"
            "    assert time.monotonic() < end, 'the console did not answer within 30 s'\n"
            "    time.sleep(0.1)\n"
            f"print(code('http://{address}:{port}/'), code('http://{address}:{port}/?token={token}'))\n"
        )
        out = subprocess.run(
            [*inside, sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["401", "200"]
    finally:
        if console is not None:
            bench.stop(console)
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
