"""A live ring under hostile input: fuzzed calls and attacks change nothing they should not.

A ring of N node processes (`ring up`, mutual TLS) carries a canary: subscriptions whose
alerts are checked against the brute-force matcher at the end, documents published before
and after the hostile phases, health checks every 100 ms (the "ping"). Then:

(a) fuzzing: `--calls` calls over every method of every service (Chord, Engine, CQEngine,
    health), each with random bytes or a random well-typed message of the method's request
    (drawn by hypothesis), from a client in each role (subscriber, publisher, admin) and
    from one without credentials; a node certificate's holder is a ring member, trusted
    with well-formed messages, so its turn is (b)'s poison scenario;
(b) attacks, one scenario each: forged deliveries, hijacked or removed entries, range
    theft, oversized messages, poison (malformed messages under a node certificate),
    floods, and guessed subscription ids.

Reported: node crashes, calls answered UNKNOWN, refused calls after which the node's state
digest (Stats.state_digest) differed from before (and again when the call was repeated
once the ring was quiet: else something still running moved it, listed apart), the
canary's alerts against the matcher, whether the ring is still one correct ring, the
health checks' worst and p99 latency, and each node's memory (RSS) at the start and the
end.

    python experiments/bench_hostile.py [--nodes 8] [--calls 10000] [--seed 1]
        [--out experiments/results] [--name bench_hostile]

Writes experiments/results/NAME.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from chord.live.server import Limits
from chord.live.tls import Credentials, channel
from chord.proto import chord_pb2 as cpb
from cqengine.demo import collect_alerts
from cqengine.evaluation.setup.matcher import document_terms, matches
from cqengine.live.certs import issue
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import observe
from cqengine.live.ring.processes import pid_alive, stop_processes
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

RESULTS = Path(__file__).resolve().parent / "results"
ROLES = ("none", "subscriber", "publisher", "admin")
OPTIONS = [("grpc.max_send_message_length", 128 << 20)]
CALL_TIMEOUT = 5.0
OBSERVER = "observer"  # the admin that reads Stats for the bench
SLOWED = 0.05  # s the observer waits when told to slow down
# canary words: no fuzzed text holds them, so no fuzzed document alerts a canary
CANARY = ["kestrelqa", "lanternqb", "marigoldqc", "nutmegqd", "oxbowqe", "pebbleqf"]


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ---- the methods, and random messages for them -----------------------------------------


def methods() -> list[tuple[str, type, bool]]:
    """Every method of every service a node serves: path, request class, server-streaming."""
    out = []
    for module, name in ((cpb, "Chord"), (pb, "Engine"), (pb, "CQEngine")):
        service = module.DESCRIPTOR.services_by_name[name]
        for m in service.methods:
            out.append(
                (
                    f"/{service.full_name}/{m.name}",
                    GetMessageClass(m.input_type),
                    m.server_streaming,
                )
            )
    out.append(("/grpc.health.v1.Health/Check", health_pb2.HealthCheckRequest, False))
    return out


INTS = st.one_of(st.integers(0, 16), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1))


def scalar(field: FieldDescriptor) -> st.SearchStrategy:
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.text(max_size=24), st.text(min_size=200, max_size=2000))
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_ENUM):
        return st.integers(-(2**31), 2**31 - 1)
    if t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64):
        return st.integers(-(2**63), 2**63 - 1)
    return INTS  # uint64, fixed64


def messages(descriptor, depth: int = 0) -> st.SearchStrategy:
    """Random well-typed messages of this kind: any fields set, repeated ones a few times,
    nested messages a few levels deep."""
    cls = GetMessageClass(descriptor)
    fields = {}
    for f in descriptor.fields:
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                entry = f.message_type.fields_by_name
                fields[f.name] = st.dictionaries(
                    scalar(entry["key"]), scalar(entry["value"]), max_size=4
                )
                continue
            if depth >= 3:
                continue
            one = messages(f.message_type, depth + 1)
        else:
            one = scalar(f)
        fields[f.name] = st.lists(one, max_size=6) if f.is_repeated else one

    def build(values: dict):
        msg = cls()
        for name, value in values.items():
            target = getattr(msg, name) if descriptor.fields_by_name[name].is_repeated else None
            if isinstance(value, dict):
                getattr(msg, name).update(value)
            elif isinstance(value, list):
                target.extend(value)
            elif hasattr(value, "SerializeToString"):
                getattr(msg, name).CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return st.fixed_dictionaries({}, optional=fields).map(build)


def payloads(request_class) -> st.SearchStrategy[bytes]:
    """A request's bytes: random bytes, or a random message of the method's kind."""
    return st.one_of(
        st.binary(max_size=256),
        messages(request_class.DESCRIPTOR).map(lambda m: m.SerializeToString()),
    )


# ---- the ring's side: clients, digests, pings, memory -----------------------------------


class Callers:
    """A channel per role per node; raw calls on them, and the admin's view of state."""

    def __init__(self, addresses: list[str], tls: Path) -> None:
        self.credentials = {
            "none": None,
            **{role: Credentials.load(tls, f"hostile-{role}") for role in ROLES[1:]},
            "node": Credentials.load(tls, "hostile-node"),
            # the bench's own Stats calls: an admin apart, so they neither spend the fuzzed
            # admin's client rate nor have theirs spent by it
            OBSERVER: Credentials.load(tls, f"hostile-{OBSERVER}"),
        }
        self.channels = {
            (role, a): channel(a, creds, OPTIONS)
            for role, creds in self.credentials.items()
            for a in addresses
        }
        self.admin = self.credentials["admin"]

    def call(self, role: str, address: str, path: str, data: bytes, streaming: bool) -> str:
        """The status code of one raw call (OK, or the refusal's)."""
        return self.reply(role, address, path, data, streaming)[0]

    def reply(
        self, role: str, address: str, path: str, data: bytes, streaming: bool = False
    ) -> tuple[str, bytes]:
        """The status code of one raw call, and its reply's bytes."""
        c = self.channels[(role, address)]
        try:
            if streaming:
                stream = c.unary_stream(path, request_serializer=bytes, response_deserializer=bytes)
                for reply in stream(data, timeout=2.0):
                    return "OK", reply  # a stream that answers at all has answered
                return "OK", b""
            reply = c.unary_unary(path, request_serializer=bytes, response_deserializer=bytes)(
                data, timeout=CALL_TIMEOUT
            )
            return "OK", reply
        except grpc.RpcError as e:
            return e.code().name, b""

    def stats(self, address: str) -> pb.StatsReply | None:
        """The node's Stats; None if it does not answer. Told to slow down (the bench
        reads Stats around every call, faster than a low --client-rate lets one client
        call), it asks again once its rate allows: a refused look is no digest, and read
        as one it would pass for the state moving under the call it brackets."""
        stub = self.channels[(OBSERVER, address)].unary_unary(
            "/cqengine.CQEngine/Stats",
            request_serializer=pb.StatsRequest.SerializeToString,
            response_deserializer=pb.StatsReply.FromString,
        )
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            try:
                return stub(pb.StatsRequest(), timeout=CALL_TIMEOUT)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                    return None
            time.sleep(SLOWED)

    def digest(self, address: str) -> int | None:
        stats = self.stats(address)
        return None if stats is None else stats.state_digest

    def settle(self, addresses: list[str], timeout: float = 10.0) -> None:
        """Until what an accepted call set off has ended (no node runs anything in the
        background or waits for a batch's reports) and no node's state moves between two
        looks 50 ms apart, or `timeout` s pass. Digests alone are not enough: a batch in
        flight leaves its DN's digest still until it is released."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            stats = [self.stats(a) for a in addresses]
            now = [None if s is None else s.state_digest for s in stats]
            busy = any(s is not None and (s.background or s.batches_in_flight) for s in stats)
            if now == last and not busy:
                return
            last = now
            time.sleep(0.05)

    def close(self) -> None:
        for c in self.channels.values():
            c.close()


class Pinger(threading.Thread):
    """Health checks of every node every 100 ms: their latencies, in ms."""

    def __init__(self, addresses: list[str], credentials: Credentials) -> None:
        super().__init__(daemon=True)
        self.addresses, self.credentials = addresses, credentials
        self.latencies: list[float] = []
        self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        channels = [channel(a, self.credentials) for a in self.addresses]
        check = [
            c.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            for c in channels
        ]
        while not self.stop.wait(0.1):
            for one in check:
                start = time.perf_counter()
                try:
                    one(health_pb2.HealthCheckRequest(), timeout=5.0)
                    self.latencies.append(1000 * (time.perf_counter() - start))
                except grpc.RpcError:
                    self.failed += 1
        for c in channels:
            c.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Canary:
    """Subscriptions whose alerts must stay exact whatever else the ring is sent."""

    def __init__(self, addresses: list[str], credentials: Credentials, rng: random.Random):
        self.addresses, self.credentials, self.rng = addresses, credentials, rng
        self.queries = [" ".join(rng.sample(CANARY, 2)) for _ in range(12)]
        with Client(addresses[0], credentials=credentials) as c:
            self.subs = [c.subscribe(q) for q in self.queries]
        self.docs: list[tuple[str, str]] = []

    def publish(self, n: int, prefix: str) -> None:
        for i in range(n):
            words = self.rng.sample(CANARY, self.rng.randint(1, 4)) + ["plain", "words", "here"]
            docno, text = f"{prefix}-{i}", " ".join(words)
            with Client(self.rng.choice(self.addresses), credentials=self.credentials) as c:
                c.publish(docno, text, "")
            self.docs.append((docno, text))

    def exact(self) -> tuple[bool, int, int]:
        got = collect_alerts(self.subs, self.addresses, self.credentials)
        want = matches(
            {s.subscription_id: s.terms for s in self.subs},
            {d: document_terms(t, "") for d, t in self.docs},
        )
        return len(got) == len(set(got)) and set(got) == want, len(got), len(want)


# ---- (a) fuzzing -----------------------------------------------------------------------


def fuzz(callers: Callers, addresses: list[str], calls: int, rng_seed: int) -> dict:
    table = methods()
    codes: Counter = Counter()
    by_role: dict[str, Counter] = {r: Counter() for r in ROLES}
    changed: list[str] = []
    drifted: list[str] = []  # the digest moved under a refused call, not when asked again
    count = [0]
    subscribed: list[tuple[str, pb.SubscribeReply]] = []  # to undo: they are no attack

    def undo_later(path: str, role: str, code: str, reply: bytes) -> None:
        if code == "OK" and path.endswith("/Subscribe"):
            subscribed.append((role, pb.SubscribeReply.FromString(reply)))

    @seed(rng_seed)
    @settings(
        max_examples=calls,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def one(data) -> None:
        path, request, streaming = data.draw(st.sampled_from(table))
        role = data.draw(st.sampled_from(ROLES))
        address = data.draw(st.sampled_from(addresses))
        payload = data.draw(payloads(request))
        before = callers.digest(address)
        code, reply = callers.reply(role, address, path, payload, streaming)
        undo_later(path, role, code, reply)
        if code == "OK":
            callers.settle(addresses)  # what it set off (replicas, batches) ends before the next
        codes[code] += 1
        by_role[role][code] += 1
        # a caller with no certificate never completes the handshake: its call reaches
        # neither the gate nor the node, so a digest that moves meanwhile is background
        reached = not (role == "none" and code == "UNAVAILABLE")
        if code != "OK" and reached and before is not None and callers.digest(address) != before:
            # the call, or something still running when it came? Asked again of a quiet
            # ring, a call that changes state changes it again (or is now accepted)
            callers.settle(addresses)
            again = callers.digest(address)
            code, reply = callers.reply(role, address, path, payload, streaming)
            undo_later(path, role, code, reply)
            moved = code == "OK" or callers.digest(address) != again
            (changed if moved else drifted).append(f"{path} as {role}: {code}")
            callers.settle(addresses)
        count[0] += 1
        if count[0] % 1000 == 0:
            say(f"  {count[0]} fuzzed calls")

    one()
    for role, sub in subscribed:  # what the fuzzing subscribed goes, as a client's would
        request = pb.UnsubscribeRequest(subscription_id=sub.subscription_id, token=sub.token)
        callers.call(
            role, sub.home, "/cqengine.CQEngine/Unsubscribe", request.SerializeToString(), False
        )
    return {
        "subscribed_and_undone": len(subscribed),
        "calls": sum(codes.values()),
        "codes": dict(codes),
        "codes_by_role": {r: dict(c) for r, c in by_role.items()},
        "unknown": codes["UNKNOWN"],
        "state_changed_by_refused": len(changed),
        "examples": changed[:10],
        "moved_under_refused_not_again": drifted[:10],
    }


# ---- (b) attacks -----------------------------------------------------------------------


def attacks(
    callers: Callers, addresses: list[str], canary: Canary, rng: random.Random, flood_calls: int
) -> list:
    target = canary.subs[0]
    home = target.home
    entry = pb.QueryEntry(
        subscription_id=target.subscription_id,
        term_ids=[],
        terms=[],
        index_id=0,
        home="127.0.0.1:1",
    )
    forged = pb.AlertBatch(
        docnos=["click-here"], titles=["You won"], subscription_ids=[target.subscription_id]
    )
    me_id = int(observe([home], 8, credentials=callers.admin).states[home].node.id)
    thief = cpb.NodeInfo(id=(me_id - 1) % 2**64, address="127.0.0.1:1")
    clients = ("none", "subscriber", "publisher", "admin")
    e = "/cqengine.Engine/"
    c = "/chord.Chord/"
    api = "/cqengine.CQEngine/"
    scenarios: dict[str, list[tuple[str, str, str, bytes]]] = {
        "forged delivery": [(r, home, e + "Deliver", forged.SerializeToString()) for r in clients],
        "hijacked or removed entries": [
            (r, a, e + method, msg)
            for r in clients
            for a in addresses
            for method, msg in (
                ("Index", pb.IndexRequest(entry=entry).SerializeToString()),
                (
                    "Unindex",
                    pb.UnindexRequest(
                        index_id=term_id(target.index_term),
                        subscription_id=target.subscription_id,
                    ).SerializeToString(),
                ),
                ("Repair", pb.Records().SerializeToString()),
            )
        ],
        "range theft": [
            (r, home, c + method, msg)
            for r in clients
            for method, msg in (
                ("Notify", cpb.NotifyRequest(node=thief).SerializeToString()),
                ("Leave", cpb.LeaveRequest(leaving=thief).SerializeToString()),
            )
        ]
        + [
            (
                "node",
                home,
                c + "Notify",
                cpb.NotifyRequest(
                    node=cpb.NodeInfo(id=me_id, address="127.0.0.1:1")
                ).SerializeToString(),
            )
        ],
        "oversized": [
            (
                "subscriber",
                home,
                api + "Subscribe",
                pb.SubscribeRequest(query="levee " * 200_000).SerializeToString(),
            ),
            (
                "publisher",
                home,
                api + "Publish",
                pb.PublishRequest(docno="BIG", text=b"x " * (3 << 20)).SerializeToString(),
            ),
            (
                "publisher",
                home,
                api + "PublishBatch",
                pb.PublishBatchRequest(
                    documents=[pb.PublishRequest(docno=f"D{i}", text=b"a") for i in range(10_001)]
                ).SerializeToString(),
            ),
            ("admin", home, api + "Stats", bytes(70 << 20)),  # past any message's limit
        ],
        "poison": [
            (
                "node",
                home,
                e + "Deliver",
                pb.AlertBatch(docnos=["x"], counts=[5], subscription_ids=[1]).SerializeToString(),
            ),
            ("node", home, e + "Index", pb.IndexRequest(entry=entry).SerializeToString()),
            (
                "node",
                home,
                e + "Gossip",
                pb.GossipRequest(term_ids=[1, 2], values=b"\x01", hashes=1).SerializeToString(),
            ),
            (
                "node",
                home,
                c + "FindSuccessor",
                cpb.FindSuccessorRequest(key=1, avoid=list(range(5000))).SerializeToString(),
            ),
        ],
        "guessed ids": [
            (
                "subscriber",
                rng.choice(addresses),
                api + "Unsubscribe",
                pb.UnsubscribeRequest(
                    subscription_id=rng.getrandbits(64), token=f"{rng.getrandbits(128):032x}"
                ).SerializeToString(),
            )
            for _ in range(50)
        ]
        + [
            (
                "subscriber",
                home,
                api + "Unsubscribe",
                pb.UnsubscribeRequest(
                    subscription_id=target.subscription_id, token="0" * 32
                ).SerializeToString(),
            )
        ],
    }
    out = []
    for name, calls in scenarios.items():
        callers.settle(addresses)  # what came before has ended
        before = {a: callers.digest(a) for a in addresses}
        codes = Counter(callers.call(r, a, p, d, False) for r, a, p, d in calls)
        after = {a: callers.digest(a) for a in addresses}
        out.append(
            {
                "scenario": name,
                "calls": len(calls),
                "codes": dict(codes),
                "refused": len(calls) - codes["OK"],
                "nodes_changed": sum(before[a] != after[a] for a in addresses),
            }
        )
        say(f"  {name}: {dict(codes)}; {out[-1]['nodes_changed']} nodes changed")
    out.append(flood(callers, addresses, flood_calls))
    return out


def flood(callers: Callers, addresses: list[str], calls: int) -> dict:
    """One subscriber calling one node as fast as 8 threads can (cheap calls: unsubscribing
    what does not exist): past its burst it is told to slow down; the nodes keep answering
    health checks (the pinger measures them)."""
    junk = pb.UnsubscribeRequest(subscription_id=1, token="0" * 32).SerializeToString()
    path = "/cqengine.CQEngine/Unsubscribe"
    with ThreadPoolExecutor(8) as pool:
        codes = Counter(
            pool.map(
                lambda i: callers.call("subscriber", addresses[0], path, junk, False), range(calls)
            )
        )
    say(f"  flood: {dict(codes)}")
    return {"scenario": "flood", "calls": calls, "codes": dict(codes)}


# ---- the run ---------------------------------------------------------------------------


def run(args) -> dict:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        say(f"starting {args.nodes} nodes ...")
        limits = ["--client-rate", str(args.client_rate), "--client-burst", str(args.client_burst)]
        ring = ring_up(args.nodes, Path(tmp) / "ring.json", out=io.StringIO(), node_args=limits)
        tls = Path(ring.tls)
        for role in ROLES[1:]:
            issue(tls, f"hostile-{role}", role)
        issue(tls, f"hostile-{OBSERVER}", "admin")
        issue(tls, "hostile-node", "node", host="127.0.0.1")
        addresses = ring.addresses()
        callers = Callers(addresses, tls)
        pinger = Pinger(addresses, callers.admin)
        try:
            canary = Canary(addresses, callers.admin, rng)
            canary.publish(args.canary_docs, "C1")
            memory_start = {e.address: rss_mb(e.pid) for e in ring.nodes}
            pinger.start()
            say(f"fuzzing: {args.calls} calls")
            start = time.monotonic()
            fuzzed = fuzz(callers, addresses, args.calls, args.seed)
            fuzz_seconds = time.monotonic() - start
            say("attacks")
            attacked = attacks(callers, addresses, canary, rng, args.flood)
            canary.publish(args.canary_docs, "C2")
            exact, got, want = canary.exact()
            time.sleep(args.settle)
            pinger.stop.set()
            pinger.join()
            crashed = [e.address for e in ring.nodes if not pid_alive(e.pid, e.port)]
            view = observe(addresses, ring.r, credentials=callers.admin)
            memory_end = {e.address: rss_mb(e.pid) for e in ring.nodes if e.address not in crashed}
        finally:
            pinger.stop.set()
            callers.close()
            stop_processes(ring.nodes, grace=2.0)
    lat = np.array(pinger.latencies or [0.0])
    growth = [memory_end[a] / memory_start[a] - 1 for a in memory_end]
    return {
        "benchmark": "bench_hostile",
        "nodes": args.nodes,
        "seed": args.seed,
        "cores": os.cpu_count(),
        "fuzz": {**fuzzed, "seconds": fuzz_seconds},
        "attacks": attacked,
        "node_crashes": len(crashed),
        "unknown_statuses": fuzzed["unknown"] + sum(a["codes"].get("UNKNOWN", 0) for a in attacked),
        "state_changed_by_refused": fuzzed["state_changed_by_refused"]
        + sum(a.get("nodes_changed", 0) for a in attacked),
        "canary": {"exact": exact, "alerts": got, "expected": want},
        "ring_consistent": view.ok and not view.down,
        "ping_ms": {
            "max": float(lat.max()),
            "p99": float(np.percentile(lat, 99)),
            "failed": pinger.failed,
        },
        "memory_mb": {"start": memory_start, "end": memory_end},
        "memory_growth_max": max(growth) if growth else None,
        "goals": {
            "node_crashes": 0,
            "unknown_statuses": 0,
            "state_changed_by_refused": 0,
            "canary_exact": True,
            "ring_consistent": True,
            "ping_p99_ms": 200,
            "memory_growth_max": 0.10,
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--calls", type=int, default=10_000, help="fuzzed calls")
    p.add_argument("--canary-docs", type=int, default=20, help="canary documents, each side")
    p.add_argument("--settle", type=float, default=5.0, help="seconds before memory is read")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flood", type=int, default=10_000, help="calls of the flood")
    p.add_argument(
        "--client-rate", type=float, default=Limits.client_rate, help="each node's client rate"
    )
    p.add_argument(
        "--client-burst", type=int, default=Limits.client_burst, help="each node's client burst"
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="bench_hostile", help="the results file: NAME.json")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = run(args)
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    ok = (
        result["node_crashes"] == 0
        and result["unknown_statuses"] == 0
        and result["state_changed_by_refused"] == 0
        and result["canary"]["exact"]
        and result["ring_consistent"]
    )
    print(
        f"crashes {result['node_crashes']}, UNKNOWN {result['unknown_statuses']}, state changed "
        f"by refused calls {result['state_changed_by_refused']}, canary "
        f"{'exact' if result['canary']['exact'] else 'NOT exact'}, ring "
        f"{'consistent' if result['ring_consistent'] else 'NOT consistent'}, ping p99 "
        f"{result['ping_ms']['p99']:.1f} ms (max {result['ping_ms']['max']:.1f}), memory growth "
        f"at most {100 * (result['memory_growth_max'] or 0):.1f}%"
    )
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
