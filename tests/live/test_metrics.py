"""The operator's windows on a live ring: each node's Prometheus endpoint says what its
Stats says (counters equal after a known workload whose alerts equal the matcher's, the
latency histogram one observation per alert delivered), `ring metrics` names the
endpoints, and gRPC server reflection answers node and admin certificates only."""

from __future__ import annotations

import io
import json
import random
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.waiting import eventually

from chord.live.tls import Credentials, channel
from chord.protocol.versions import OLDEST, PROTOCOL, software
from cqengine.demo import collect_alerts, sample_corpus
from cqengine.evaluation.setup.matcher import document_terms, matches
from cqengine.live.certs import issue
from cqengine.live.client import Client
from cqengine.live.metrics import _Collected
from cqengine.live.ring.commands import ring_down, ring_metrics, ring_up
from cqengine.live.ringfile import NodeEntry, RingError, RingFile
from cqengine.proto import cqengine_pb2 as pb

ENGINE_KINDS = ("Announce", "Matched", "Deliver", "Index", "TermDialogue")


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    path = tmp_path_factory.mktemp("metrics") / "ring.json"
    ring = ring_up(3, path, out=io.StringIO(), metrics=True)
    try:
        yield ring
    finally:
        ring_down(path, out=io.StringIO())


def scrape(endpoint: str) -> dict:
    """A node's metrics: {(name, labels as a sorted tuple): value}, parsed by
    prometheus_client's own parser."""
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def as_stats(m: dict, s: pb.StatsReply) -> dict:
    """What the metrics and the Stats reply each say of the workload's counters."""
    kinds = {c.kind: c for c in s.ledger}
    said = {}
    for field in ("documents_published", "candidates", "matches", "alerts_delivered"):
        said[field] = (m[(f"cqengine_{field}_total", ())], getattr(s, field))
    for field in ("index_entries", "subscriptions", "alerts_waiting"):
        said[field] = (m[(f"cqengine_{field}", ())], getattr(s, field))
    for kind in ENGINE_KINDS:
        label = (("kind", kind),)
        said[kind] = (
            (
                m.get(("cqengine_messages_sent_total", label), 0),
                m.get(("cqengine_sent_bytes_total", label), 0),
            ),
            (kinds[kind].messages, kinds[kind].bytes) if kind in kinds else (0, 0),
        )
    return said


def test_metrics_equal_stats_after_a_known_workload(ring):
    rng = random.Random(7)
    addresses, credentials = ring.addresses(), ring.credentials()
    docs = sample_corpus()[:24]
    terms = {d.docno: document_terms(d.text, d.title) for d in docs}
    queries = [" ".join(rng.sample(sorted(terms[d.docno]), 2)) for d in docs[:16]]
    clients = {a: Client(a, credentials=credentials) for a in addresses}
    try:
        subs = [clients[rng.choice(addresses)].subscribe(q) for q in queries]
        for d in docs:
            clients[rng.choice(addresses)].publish(d.docno, d.text, d.title)
        got = collect_alerts(subs, addresses, credentials)
        want = matches({s.subscription_id: s.terms for s in subs}, terms)
        assert len(got) == len(set(got)) and set(got) == want and want

        def compared():
            out = {}
            for entry in ring.nodes:
                said = as_stats(scrape(entry.metrics), clients[entry.address].stats())
                out[entry.address] = {k: v for k, v in said.items() if v[0] != v[1]}
            return out

        eventually(
            compared,
            10,
            "every node's metrics equal its Stats",
            holds=lambda d: not any(d.values()),
        )
        stats = [clients[a].stats() for a in addresses]
        metrics = [scrape(e.metrics) for e in ring.nodes]
    finally:
        for c in clients.values():
            c.close()
    assert all(s.cpu_seconds["metrics"] > 0 for s in stats)  # each scrape charged to its account
    assert sum(s.documents_published for s in stats) == len(docs)
    assert sum(s.alerts_delivered for s in stats) == len(want)
    # one latency observation per alert put in a mailbox, each of a real delay
    count = sum(m[("cqengine_alert_latency_seconds_count", ())] for m in metrics)
    total = sum(m[("cqengine_alert_latency_seconds_sum", ())] for m in metrics)
    assert count == len(want) and 0 < total < 60 * count
    for m, s in zip(metrics, stats):
        inf = m[("cqengine_alert_latency_seconds_bucket", (("le", "+Inf"),))]
        assert inf == s.alerts_delivered == m[("cqengine_alert_latency_seconds_count", ())]
        labels = (("oldest_protocol", str(OLDEST)), ("protocol", str(PROTOCOL)))
        assert m[("cqengine_build_info", (*labels, ("software", software())))] == 1


def test_ring_metrics_names_every_endpoint_bound_to_loopback(ring, tmp_path):
    config = json.loads(ring_metrics(ring.path))
    assert config == [{"targets": [e.metrics for e in ring.nodes], "labels": {"job": "cqengine"}}]
    assert all(e.metrics.startswith("127.0.0.1:") for e in ring.nodes)
    bare = RingFile(tmp_path / "ring.json", nodes=[NodeEntry("127.0.0.1:1", 1, 1, "log")])
    bare.save()
    with pytest.raises(RingError, match="ring up --metrics"):
        ring_metrics(bare.path)


def reflected(address: str, credentials: Credentials) -> list[str]:
    """The services the node lists to a reflection client with these credentials."""
    with channel(address, credentials) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (reply,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
        return sorted(s.name for s in reply.list_services_response.service)


def test_reflection_answers_admins_and_refuses_subscribers(ring):
    tls = Path(ring.tls)
    issue(tls, "reflecting-subscriber", "subscriber")
    entry = ring.nodes[0]
    services = reflected(entry.address, ring.credentials())
    assert {"cqengine.CQEngine", "cqengine.Engine", "chord.Chord", "grpc.health.v1.Health"} <= set(
        services
    )
    assert "grpc.reflection.v1alpha.ServerReflection" in services
    refused_before = scrape(entry.metrics)[("cqengine_calls_refused_total", (("reason", "role"),))]
    with pytest.raises(grpc.RpcError) as e:
        reflected(entry.address, Credentials.load(tls, "reflecting-subscriber"))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    refused = scrape(entry.metrics)[("cqengine_calls_refused_total", (("reason", "role"),))]
    assert refused == refused_before + 1


def test_the_exposition_follows_prometheus_conventions():
    reply = pb.StatsReply(
        documents_published=5,
        alerts_delivered=7,
        dropped_by={"home_unreachable": 2},
        ledger=[pb.Count(kind="Announce", messages=3, bytes=300)],
        alert_latency=pb.Histogram(bounds=[0.1, 1.0], counts=[4, 2, 1], sum=3.5),
    )
    text = generate_latest(_Collected(reply)).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("cqengine_documents_published_total", ())] == 5
    assert samples[("cqengine_sent_bytes_total", (("kind", "Announce"),))] == 300
    assert samples[("cqengine_alerts_dropped_total", (("reason", "home_unreachable"),))] == 2
    assert samples[("cqengine_alerts_dropped_total", (("reason", "mailbox_full"),))] == 0
    buckets = [
        samples[("cqengine_alert_latency_seconds_bucket", (("le", le),))]
        for le in ("0.1", "1.0", "+Inf")
    ]
    assert buckets == [4, 6, 7]  # cumulative, as Prometheus reads them
    assert samples[("cqengine_alert_latency_seconds_count", ())] == 7
    assert samples[("cqengine_alert_latency_seconds_sum", ())] == 3.5
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("cqengine_")
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)


def test_the_latency_counts_from_the_publish_call_so_the_linger_too(tmp_path):
    """A document waits up to --linger-ms at its DN for others to share its batch: that is
    part of what its subscriber waits, so the homes' histogram counts it."""
    path = tmp_path / "ring.json"
    ring = ring_up(1, path, out=io.StringIO(), node_args=["--linger-ms", "400"])
    try:
        with Client(ring.addresses()[0], credentials=ring.credentials()) as c:
            sub = c.subscribe("levee hurricane")
            c.publish("D1", "The levee held as the hurricane passed.")
            stream = c.alerts(sub, timeout=10)
            assert next(stream).docno == "D1"  # (StopIteration: none within 10 s)
            stream.close()
            latency = c.stats().alert_latency
    finally:
        ring_down(path, out=io.StringIO())
    assert sum(latency.counts) == 1
    assert 0.4 <= latency.sum < 10  # the linger, and the rest of the way
