"""A ring over hosts made of Linux network namespaces, for the tests and benchmarks that cut
links between hosts (tests/live/test_multihost.py, experiments/bench_partition.py).

Each host is a namespace with an address of its own (SUBNET.i, its end `eth0`), on a
bridge in a switch namespace. Hosts sit on one of two bridges (`sides`), joined by a
link that `apart` takes down and up: a partition that drops packets silently, as a
pulled cable does. `link` takes one host's own link down and up. Nodes run in the
hosts' namespaces with `--host` and `--advertise` and mutual TLS certificates for those
addresses; clients run there too, as agents this module starts: run as a script inside
a namespace (`ip netns exec NS python THIS agent`), it answers calls sent over stdin.

Needs root and `ip netns`. The machine's own network namespace is never changed: every
link and address is made inside the namespaces, which `remove` deletes; every process is
stopped by its pid (`stop`).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBNET = "10.201.7"  # private, and only inside the namespaces made here
R = 8  # successor list length (the command line's default)
ADMIN, SUBSCRIBER, PUBLISHER = "admin", "alice", "press"
# the ring's maintenance as the live tests run it: quick to notice a node gone
TIMING = ["--stabilize", "0.15", "--fix-fingers", "0.3", "--check-predecessor", "0.3"]


# ---- inside a namespace: the clients ----------------------------------------------------


def _credentials(tls: str, name: str):
    from chord.live.tls import Credentials

    return Credentials.load(Path(tls), name)


def agent_ports(host: str, n: int) -> list[int]:
    from cqengine.live.ports import free_ports

    return free_ports(n, host)


def agent_serving(address: str, tls: str) -> bool:
    from chord.live.client import serving

    return serving(address, 0.5, _credentials(tls, ADMIN))


def agent_view(addresses: list[str], tls: str) -> dict:
    """The ring as these nodes, and every node they point at, see it: whether it is one
    correct ring, who answers, who is down, and the rings their successors make."""
    from cqengine.live.ring.convergence import observe

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
    from cqengine.live.ring.convergence import observe, under_replicated

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
    """Each document published through this node, one call each; whether it was accepted
    (a call that fails is a document not accepted)."""
    from cqengine.live.client import Client, ClientError

    out = []
    with Client(address, 10, _credentials(tls, PUBLISHER)) as c:
        for docno, text, title in docs:
            try:
                out.append(c.publish(docno, text, title).accepted)
            except ClientError:
                out.append(False)
    return out


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
            for alerts in pool.map(lambda kv: drain(*kv), _by_home(finder, subs, contacts)):
                got += alerts
            if len(got) >= want or time.monotonic() > deadline:
                return got


def _by_home(finder, subs, contacts: list[str]) -> list:
    """(node, its subscriptions) for the node that serves each subscription's home key
    now, as a lookup from the contacts finds it (once per home key)."""
    keys = defaultdict(list)
    for s in subs:
        keys[s.home_id].append(s)
    serving = defaultdict(list)
    for key, group in keys.items():
        node = finder.find_home(key, contacts)
        if node is not None:
            serving[node] += group
    return list(serving.items())


class RawStreams:
    """Subscribers reading the raw stream, as the Stream RPC sends it: every alert of every
    message logged as (subscription, seq, docno, when), repeats included, rounds of one
    second at whichever node serves each home key now, each round acknowledging the
    first number not yet seen of each subscription."""

    def __init__(self, subs, contacts: list[str], tls: str) -> None:
        from cqengine.live.client import Client

        self.subs, self.contacts = subs, contacts
        self.creds = _credentials(tls, SUBSCRIBER)
        self.finder = Client(contacts[0], 1.0, self.creds)  # a lookup waits 1 s at most
        self.log: list[tuple[int, int, str, float]] = []
        self.nexts = {s.subscription_id: 0 for s in subs}
        self.errors: dict[str, int] = defaultdict(int)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:
            while not self.stopping.is_set():
                groups = _by_home(self.finder, self.subs, self.contacts)
                list(pool.map(lambda kv: self._round(*kv), groups))
                if not groups:
                    time.sleep(0.5)

    def _round(self, node: str, group) -> None:
        import grpc

        from cqengine.live.client import Client, ClientError, stream_request
        from cqengine.proto import cqengine_pb2 as pb

        request = stream_request(group, self.nexts)
        try:
            with Client(node, 2.0, self.creds) as c:  # a paused home holds no round up long
                try:
                    for batch in c._stub.StreamAlerts(request, timeout=1.0):
                        self._took(batch)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                        self.errors[e.code().name] += 1
                acks = [
                    pb.SubscriptionKey(
                        subscription_id=s.subscription_id,
                        token=s.token,
                        next=self.nexts[s.subscription_id],
                    )
                    for s in group
                ]
                c._call("AckAlerts", pb.AckRequest(subscriptions=acks))
        except ClientError as e:
            self.errors[e.code] += 1

    def _took(self, batch) -> None:
        from cqengine.live.client import unbatched

        now = time.time()
        for a in unbatched(batch):
            self.log.append((a.subscription_id, a.seq, a.docno, now))
            if a.seq == self.nexts[a.subscription_id]:
                self.nexts[a.subscription_id] = a.seq + 1

    def stop(self) -> dict:
        self.stopping.set()
        self.thread.join(30)
        self.finder.close()
        return {"log": self.log, "errors": dict(self.errors)}


STREAMS: list[RawStreams] = []


def agent_streams_start(subs, contacts: list[str], tls: str) -> None:
    STREAMS.append(RawStreams(subs, contacts, tls))


def agent_streams_stop() -> dict:
    return STREAMS.pop().stop()


def agent_streams_shown() -> set[tuple[int, str]]:
    """(subscription, docno) of every alert the streams have shown so far."""
    return {(sub, docno) for sub, _, docno, _ in list(STREAMS[-1].log)}


def agent_counters(addresses: list[str], tls: str) -> dict:
    """Each node's alert counters (what the partition cost the engine)."""
    from cqengine.live.client import Client

    out = {}
    for a in addresses:
        with Client(a, 5, _credentials(tls, ADMIN)) as c:
            s = c.stats()
        out[a] = dict(
            delivered=s.alerts_delivered,
            retried=s.alerts_retried,
            repeated=s.alerts_repeated,
            held=s.alerts_held,
            dropped=dict(s.dropped_by),
            sent_again=s.documents_sent_again,
            unkept=s.documents_unkept,
        )
    return out


def agent_quiet(addresses: list[str], tls: str) -> None:
    from cqengine.demo import wait_quiet

    wait_quiet(addresses, _credentials(tls, ADMIN), timeout=20.0)


CALLS = {
    name.removeprefix("agent_"): f for name, f in globals().items() if name.startswith("agent_")
}


def agent() -> None:
    """Answer calls: frames of a pickled (name, args), each answered by a frame of
    (True, value) or (False, the traceback)."""
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


# ---- outside: the hosts, their nodes and agents ---------------------------------------------


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Agent:
    """A client process inside a host's namespace, called with pickled frames."""

    def __init__(self, ns: str, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, __file__, "agent"],
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
    """n host namespaces, host i at SUBNET.i; the first `split` on bridge br0 of a switch
    namespace, the others on br1, the bridges joined by the link x0-x1 (all on br0 when
    `split` is n). The switch's end of host i's link is `p<i>`."""

    def __init__(self, n: int = 3, split: int | None = None) -> None:
        tag = f"cqe{os.getpid()}"
        self.switch = f"{tag}sw"
        self.names = [f"{tag}h{i}" for i in range(1, n + 1)]
        self.addresses = [f"{SUBNET}.{i}" for i in range(1, n + 1)]
        self.split = n if split is None else split
        self.made: list[str] = []

    def make(self) -> None:
        for ns in [self.switch, *self.names]:
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        sw = ["-n", self.switch]
        for br in ("br0", "br1"):
            ip(*sw, "link", "add", br, "type", "bridge")
            ip(*sw, "link", "set", br, "up")
        ip(*sw, "link", "add", "x0", "type", "veth", "peer", "name", "x1")
        for end, br in (("x0", "br0"), ("x1", "br1")):
            ip(*sw, "link", "set", end, "master", br)
            ip(*sw, "link", "set", end, "up")
        for i, (ns, address) in enumerate(zip(self.names, self.addresses), 1):
            # both ends are made in the switch and one moved to the host: never in ours
            ip(*sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip(*sw, "link", "set", f"p{i}", "master", "br0" if i <= self.split else "br1")
            ip(*sw, "link", "set", f"p{i}", "up")
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")

    def link(self, i: int, up: bool) -> None:
        """Host i's link at the switch, up or down (its processes run on)."""
        ip("-n", self.switch, "link", "set", f"p{i}", "up" if up else "down")

    def apart(self, cut: bool) -> None:
        """The link between the two bridges down (the hosts of each side see only their
        side) or up again."""
        ip("-n", self.switch, "link", "set", "x0", "down" if cut else "up")

    def remove(self) -> None:
        for ns in reversed(self.made):
            try:
                ip("netns", "del", ns)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                print(f"could not delete namespace {ns}: {e}", file=sys.stderr)


def certificates(tls: Path, hosts: list[str]) -> None:
    """The ring's CA, a node certificate per host address, and the clients', by the CLI
    (what it prints, the files it wrote, is not shown)."""
    import contextlib
    import io

    from cqengine.cli import main

    commands = [["certs", "init", "--dir", str(tls)]]
    commands += [["certs", "node", "--dir", str(tls), "--name", h] for h in hosts]
    for name, role in [(ADMIN, "admin"), (SUBSCRIBER, "subscriber"), (PUBLISHER, "publisher")]:
        commands.append(["certs", "client", "--dir", str(tls), "--name", name, "--role", role])
    for argv in commands:
        with contextlib.redirect_stdout(io.StringIO()):
            done = main(argv)
        assert done == 0, argv


def node_command(
    ns: str, host: str, port: int, join: str | None, data: Path, tls: Path, engine: list[str]
) -> list[str]:
    """`cqengine node` inside a host's namespace, by the interpreter running this."""
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "cqengine", "node"]
    cmd += ["--host", host, "--advertise", host, "--port", str(port)]
    cmd += ["--data-dir", str(data), "--tls-dir", str(tls), "--successors", str(R), *TIMING]
    # a node cut off is silent, not refusing: its peers wait --call-timeout for it (a busy
    # node answers late) before they take it for gone; 5 s, not 30, keeps a run short
    cmd += ["--rpc-timeout", "1.0", "--call-timeout", "5"]
    # a joining node takes the engine settings from the ring; the first node sets them
    return cmd + (["--join", join] if join else engine)


def stop(procs: list[subprocess.Popen], grace: float = 3.0) -> None:
    """Each process by its pid: SIGUSR1 (a node stops at once, handing nothing over; an
    agent exits), SIGCONT (a paused one must hear it), then SIGKILL after `grace`; reaped."""
    for p in procs:
        if p.poll() is None:
            for sig in (signal.SIGUSR1, signal.SIGCONT):
                try:
                    os.kill(p.pid, sig)
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


if __name__ == "__main__":
    if sys.argv[1:] == ["agent"]:
        agent()
