"""A ring spread over three hosts, each a network namespace with an address of its own, joined
by a bridge in a fourth namespace (the switch): two nodes per host started with `--host` and
`--advertise` and mutual TLS certificates for those addresses. A subscriber in host 1 and
a publisher in host 2 (clients run inside the namespaces too) get the matcher's alerts.
Then host 3's link is cut (its processes run on): the other hosts form a ring of their own
and serve on, host 3 forms another; when the link comes back the two merge into one ring,
and every document accepted has alerted every subscription the matcher says, each once,
those homed in host 3 included.

On the home log (`--home-log on`, docs/home-log.md) documents are published on both
sides of the cut: host 3's homes whose logs have no majority there hold what they are
sent, the other side's successors number their keys in a higher epoch, and after the heal
nothing is shown twice or under two numbers. A document published on host 3 while the cut
lasts reaches only the queries host 3 holds copies of until the heal: then its DN, finding
the other side up all along, announces it again (DN.on_found), and every alert owed is
shown, once.

Needs root and `ip netns`; skipped otherwise. The machine's own network namespace is never
changed: every link and address is made inside the test's namespaces, which are deleted
(and every process stopped by pid) however the test ends.

Run as a script inside a namespace (`ip netns exec NS python THIS agent`), this file is the
client there: it answers calls the test sends over stdin (`Agent`).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

import pytest
from support.live import FAST
from support.netns import netns_usable
from support.oracle import assert_exact, assert_numbered, expected
from support.waiting import eventually
from support.workloads import live_corpus

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv" / "bin"
SUBNET = "10.201.7"  # private, and only inside the test's namespaces
ENGINE = ["--reconcile", "0.5"]  # replicas 3 (the default): each range on 3 nodes
R = 8  # successor list length (the command line's default)
ADMIN, SUBSCRIBER, PUBLISHER = "admin", "alice", "press"


# ---- inside a namespace: the clients --------------------------------------------------


def _credentials(tls: str, name: str):
    from chord.tls import Credentials

    return Credentials.load(Path(tls), name)


def agent_ports(host: str, n: int) -> list[int]:
    from cqengine.live.ports import free_ports

    return free_ports(n, host)


def agent_serving(address: str, tls: str) -> bool:
    from chord.client import serving

    return serving(address, 0.5, _credentials(tls, ADMIN))


def agent_view(addresses: list[str], tls: str) -> dict:
    """The ring as these nodes, and every node they point at, see it: whether it is one
    correct ring, who answers, who is down, and the rings their successors make."""
    from cqengine.live.ring import observe

    view = observe(addresses, R, timeout=0.5, credentials=_credentials(tls, ADMIN))
    succ = {a: s.successors[0].address for a, s in view.states.items() if s.successors}
    rings = set()
    for start in succ:
        seen, at = [], start
        while at in succ and at not in seen:
            seen.append(at)
            at = succ[at]
        if at in seen:
            rings.add(tuple(sorted(seen[seen.index(at) :])))
    return {
        "ok": view.ok,
        "answer": sorted(view.states),
        "down": view.down,
        "problems": view.problems[:3],
        "rings": sorted(rings),
    }


def agent_under_replicated(addresses: list[str], tls: str) -> list[str]:
    from cqengine.live.ring import observe, under_replicated

    view = observe(addresses, R, timeout=0.5, credentials=_credentials(tls, ADMIN))
    return under_replicated(view)


def agent_subscribe(addresses: list[str], queries: list[str], tls: str) -> list:
    """Each query subscribed through a node picked in turn: homes on every host."""
    from cqengine.live.client import Client

    creds = _credentials(tls, SUBSCRIBER)
    out = []
    for i, a in enumerate(addresses):
        with Client(a, credentials=creds) as c:
            out += c.subscribe_many(queries[i :: len(addresses)])
    return out


def agent_publish(address: str, docs: list[tuple[str, str, str]], tls: str) -> list[bool]:
    from cqengine.live.client import Client

    with Client(address, credentials=_credentials(tls, PUBLISHER)) as c:
        return [r.accepted for r in c.publish_many(docs)]


def agent_collect(subs, contacts: list[str], want: int, timeout: float, tls: str) -> list:
    """Alerts of these subscriptions, each drained from the node that serves its home key
    now (as a lookup from the contacts finds it), until `want` have come or time is up;
    at least one round. Each drain acknowledges what it took: the next takes only what
    came since."""
    from concurrent.futures import ThreadPoolExecutor

    from cqengine.live.client import Client, ClientError

    creds = _credentials(tls, SUBSCRIBER)

    def drain(node: str, group) -> list:
        try:
            with Client(node, credentials=creds) as c:
                alerts = c.alerts(group, home=node, timeout=1.0, resume=1.0)
                return [(a.subscription_id, a.docno, a.seq) for a in alerts]
        except ClientError:
            return []  # it serves them no more: the next round finds who does

    got, deadline = [], time.monotonic() + timeout
    with ThreadPoolExecutor(8) as pool, Client(contacts[0], credentials=creds) as finder:
        while True:
            serving = defaultdict(list)
            for s in subs:
                node = finder.find_home(s.home_id, contacts)
                if node is not None:
                    serving[node].append(s)
            for alerts in pool.map(lambda kv: drain(*kv), serving.items()):
                got += alerts
            if len(got) >= want or time.monotonic() > deadline:
                return got


def agent_counters(addresses: list[str], tls: str) -> dict:
    """Each node's alert counters (printed: what the partition cost the engine)."""
    from cqengine.live.client import Client

    out = {}
    for a in addresses:
        with Client(a, 5, _credentials(tls, ADMIN)) as c:
            s = c.stats()
        out[a] = dict(
            delivered=s.alerts_delivered,
            retried=s.alerts_retried,
            repeated=s.alerts_repeated,
            dropped=dict(s.dropped_by),
            sent_again=s.documents_sent_again,
        )
    return out


def agent_quiet(addresses: list[str], tls: str) -> None:
    from cqengine.demo import wait_quiet

    wait_quiet(addresses, _credentials(tls, ADMIN), timeout=20.0)


CALLS = {
    name.removeprefix("agent_"): f for name, f in globals().items() if name.startswith("agent_")
}


def agent() -> None:
    """Answer the test's calls: frames of a pickled (name, args), each answered by a frame
    of (True, value) or (False, the traceback)."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while head := inp.read(8):
        name, args = pickle.loads(inp.read(int.from_bytes(head, "big")))
        try:
            answer = (True, CALLS[name](*args))
        except Exception:
            answer = (False, traceback.format_exc())
        data = pickle.dumps(answer)
        out.write(len(data).to_bytes(8, "big") + data)
        out.flush()


# ---- the test's side ------------------------------------------------------------------


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Agent:
    """A client process inside a host's namespace, called with pickled frames."""

    def __init__(self, ns: str, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, str(VENV / "python"), __file__, "agent"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
            )
        self.ns = ns

    def __call__(self, name: str, *args, timeout: float = 60.0):
        data = pickle.dumps((name, args))
        self.proc.stdin.write(len(data).to_bytes(8, "big") + data)
        self.proc.stdin.flush()
        head = self._read(8, timeout)
        ok, value = pickle.loads(self._read(int.from_bytes(head, "big"), timeout))
        if not ok:
            raise AssertionError(f"{name} in {self.ns} failed:\n{value}")
        return value

    def _read(self, n: int, timeout: float) -> bytes:
        fd, got, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + timeout
        while len(got) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"the agent in {self.ns} did not answer within {timeout} s")
            chunk = os.read(fd, n - len(got))
            if not chunk:
                raise AssertionError(f"the agent in {self.ns} exited")
            got += chunk
        return got


class Hosts:
    """Three host namespaces on one bridge in a switch namespace, each host's end `eth0`
    at SUBNET.i; the switch's end of host i's link is `p<i>`."""

    def __init__(self, n: int = 3) -> None:
        tag = f"cqe{os.getpid()}"
        self.switch = f"{tag}sw"
        self.names = [f"{tag}h{i}" for i in range(1, n + 1)]
        self.addresses = [f"{SUBNET}.{i}" for i in range(1, n + 1)]
        self.made: list[str] = []

    def make(self) -> None:
        for ns in [self.switch, *self.names]:
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (ns, address) in enumerate(zip(self.names, self.addresses), 1):
            # both ends are made in the switch and one moved to the host: never in ours
            veth = ["link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0"]
            ip("-n", self.switch, *veth, "netns", ns)
            ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0")
            ip("-n", self.switch, "link", "set", f"p{i}", "up")
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")

    def link(self, i: int, up: bool) -> None:
        """Host i's link at the switch, up or down (its processes run on)."""
        ip("-n", self.switch, "link", "set", f"p{i}", "up" if up else "down")

    def remove(self) -> None:
        for ns in reversed(self.made):
            try:
                ip("netns", "del", ns)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                print(f"could not delete namespace {ns}: {e}", file=sys.stderr)


def certificates(tls: Path, hosts: list[str]) -> None:
    """The ring's CA, a node certificate per host address, and the clients', by the CLI."""
    from cqengine.cli import main

    commands = [["certs", "init", "--dir", str(tls)]]
    commands += [["certs", "node", "--dir", str(tls), "--name", h] for h in hosts]
    for name, role in [(ADMIN, "admin"), (SUBSCRIBER, "subscriber"), (PUBLISHER, "publisher")]:
        commands.append(["certs", "client", "--dir", str(tls), "--name", name, "--role", role])
    for argv in commands:
        assert main(argv) == 0, argv


def node_command(
    ns: str, host: str, port: int, join: str | None, data: Path, tls: Path, engine: list[str]
):
    cmd = ["ip", "netns", "exec", ns, str(VENV / "cqengine"), "node"]
    cmd += ["--host", host, "--advertise", host, "--port", str(port)]
    cmd += ["--data-dir", str(data), "--tls-dir", str(tls), "--successors", str(R)]
    cmd += ["--stabilize", str(FAST.stabilize), "--fix-fingers", str(FAST.fix_fingers)]
    cmd += ["--check-predecessor", str(FAST.check_predecessor)]
    # a node cut off is silent, not refusing: its peers wait --call-timeout for it (a busy
    # node answers late) before they take it for gone; 5 s, not 30, keeps the test short
    cmd += ["--rpc-timeout", str(FAST.rpc_timeout), "--call-timeout", "5"]
    # a joining node takes the engine settings from the ring; the first node sets them
    return cmd + (["--join", join] if join else engine)


def stop(procs: list[subprocess.Popen], grace: float = 3.0) -> None:
    """Each process by its pid: SIGUSR1 (a node stops at once, handing nothing over; an
    agent exits), then SIGKILL after `grace`; reaped."""
    for p in procs:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass  # it exited meanwhile
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@pytest.fixture(scope="module")
def corpus():
    return live_corpus(90, 150, seed=31, vocab=700)


def assert_once(alerts: list[tuple[int, str, int]], want: set[tuple[int, str]]) -> None:
    class Seq:
        def __init__(self, sub: int, seq: int) -> None:
            self.subscription_id, self.seq = sub, seq

    assert_exact([(s, d) for s, d, _ in alerts], want)
    assert_numbered([Seq(s, q) for s, _, q in alerts])  # 0, 1, 2, ... across the partition


@pytest.mark.parametrize("home_log", [False, True], ids=["copies", "home_log"])
def test_a_ring_over_three_hosts_serves_through_a_cut_link_and_heals(corpus, tmp_path, home_log):
    why = netns_usable()
    if why is not None:
        pytest.skip(why)
    docs, queries = corpus
    as_tuples = [(d.docno, d.text, d.title) for d in docs]
    first, second, inside, third = slice(0, 30), slice(30, 50), slice(50, 60), slice(60, 90)
    if not home_log:  # nothing is published inside the cut
        second = slice(30, 60)
    engine = ENGINE + ["--home-log", "on" if home_log else "off"]
    hosts, procs, agents = Hosts(), [], []
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        hosts.make()
        for i, ns in enumerate(hosts.names, 1):
            agents.append(Agent(ns, logs / f"agent-{i}.log"))
            procs.append(agents[-1].proc)
        tls = tmp_path / "tls"
        certificates(tls, hosts.addresses)
        sub_agent, pub_agent, cut_agent = agents
        tls_s = str(tls)

        # two nodes per host, at ports free in its namespace
        nodes = []  # (host index, address)
        for i, (agent, host) in enumerate(zip(agents, hosts.addresses), 1):
            nodes += [(i, f"{host}:{p}") for p in agent("ports", host, 2)]
        addresses = [a for _, a in nodes]

        def start(i: int, address: str, join: str | None) -> None:
            host, port = address.rsplit(":", 1)
            data = tmp_path / port
            cmd = node_command(hosts.names[i - 1], host, int(port), join, data, tls, engine)
            with open(logs / f"node-{address}.log", "ab") as log:
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))

        start(*nodes[0], None)
        eventually(lambda: sub_agent("serving", addresses[0], tls_s), 30, "the first node")
        for i, address in nodes[1:]:
            start(i, address, addresses[0])

        def converged(agent: Agent, among: list[str], what: str, timeout: float = 40.0) -> dict:
            return eventually(
                lambda: agent("view", among, tls_s),
                timeout,
                what,
                holds=lambda v: v["ok"] and not v["down"] and v["answer"] == sorted(among),
                interval=0.2,
            )

        converged(sub_agent, addresses, "the six nodes to form one ring")
        eventually(
            lambda: sub_agent("under_replicated", addresses, tls_s),
            30,
            "every range to have its copies",
            holds=lambda missing: not missing,
            interval=0.2,
        )

        # subscribe in host 1 (through nodes on every host: homes everywhere)
        subs = sub_agent("subscribe", addresses, queries, tls_s)
        assert all(s.subscription_id for s in subs)
        host_of = {a: i for i, a in nodes}
        assert {host_of[s.home] for s in subs} == {1, 2, 3}
        others = [s for s in subs if host_of[s.home] != 3]  # homed where the link stays

        # publish in host 2; every alert the matcher's, each once
        alerts = []
        assert all(pub_agent("publish", addresses[2], as_tuples[first], tls_s))
        want = expected(subs, docs[first])
        alerts += sub_agent("collect", subs, addresses, len(want), 30.0, tls_s)
        assert_once(alerts, want)

        # cut host 3's link: hosts 1 and 2 form one ring, host 3 another
        hosts.link(3, up=False)
        majority = [a for i, a in nodes if i != 3]
        cut_off = [a for i, a in nodes if i == 3]
        kept = converged(sub_agent, majority, "hosts 1 and 2 to make a ring without host 3")
        assert kept["rings"] == [tuple(sorted(majority))]
        apart = converged(cut_agent, cut_off, "host 3's nodes to make a ring of their own")
        assert apart["rings"] == [tuple(sorted(cut_off))]

        # hosts 1 and 2 serve on: subscribers homed there get their alerts
        assert all(pub_agent("publish", addresses[2], as_tuples[second], tls_s))
        want_apart = expected(others, docs[second])
        alerts += sub_agent("collect", others, majority, len(want_apart), 30.0, tls_s)
        assert_once(alerts, expected(subs, docs[first]) | want_apart)
        if home_log:  # and host 3 publishes too
            assert all(cut_agent("publish", cut_off[0], as_tuples[inside], tls_s))

        # the link back: one ring again, and nothing accepted is lost
        hosts.link(3, up=True)
        healed = converged(sub_agent, addresses, "the two rings to merge into one", 40.0)
        assert healed["rings"] == [tuple(sorted(addresses))]
        assert all(pub_agent("publish", addresses[3], as_tuples[third], tls_s))
        want_all = expected(subs, docs)
        left = len(want_all) - len(alerts)
        alerts += sub_agent("collect", subs, addresses, left, 40.0, tls_s)
        sub_agent("quiet", addresses, tls_s, timeout=30.0)
        alerts += sub_agent("collect", subs, addresses, 0, 0.0, tls_s)  # nothing more comes
        counters = sub_agent("counters", addresses, tls_s)
        for address, counts in counters.items():
            print(address, counts)
    finally:
        try:
            stop(procs)
        finally:
            hosts.remove()
        for log in sorted(logs.glob("*.log")):
            print(f"--- {log.name}\n{tail(log)}")
    assert_once(alerts, want_all)
    if home_log:
        numbers = {(s, q) for s, _, q in alerts}
        assert len(numbers) == len(alerts)  # no number names two documents
        again = sum(c["sent_again"] for c in counters.values())
        assert again >= len(docs[inside])  # host 3's DNs sent theirs again


if __name__ == "__main__":
    if sys.argv[1:] == ["agent"]:
        agent()
