"""Batches end to end on live 8-node loopback rings: documents published in batches
(PublishBatch, and the DN's own gathering by linger time and batch size) alert exactly
the subscribers the brute-force matcher names, each once, for every strategy and both
resolution methods; conjunctions and queries
with OR, NOT and phrases alike, with term-presence headers and without."""

from __future__ import annotations

import io
import random
from collections import Counter

import pytest
from support.live import FAST
from support.oracle import assert_exact, expected
from support.workloads import boolean_expected, boolean_queries_of

from cqengine.demo import collect_alerts, write_inputs
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes
from cqengine.text.corpus import generate_corpus
from cqengine.text.workload import generate_queries

# (strategy, resolution, documents per batch at most, linger ms, term-presence header
# terms): every strategy with both resolutions, with and without headers
CASES = [
    ("ri", "td", 64, 5, 0),
    ("ri", "bf", 4, 20, 64),
    ("oi", "td", 16, 2, 0),
    ("oi", "bf", 1, 0, 64),
    ("mhi", "td", 1, 0, 256),
    ("mhi", "bf", 64, 50, 0),
    ("sap-mhi", "td", 8, 5, 32),
    ("sap-mhi", "bf", 32, 1, 0),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs = list(generate_corpus(120, seed=12, vocab_size=1500, mean_terms=40))
    df = document_frequencies(docs)
    queries = [" ".join(q) for q in generate_queries(df, 300, "skew", mean_size=2.0, seed=12)]
    boolean = boolean_queries_of(docs, df, seed=12, n=80)
    return docs, queries, boolean, write_inputs(df, tmp_path_factory.mktemp("inputs"))


def subscribed(clients: dict, queries: list[str], rng: random.Random) -> list:
    """Each query subscribed at a node picked at random, a SubscribeBatch call per node:
    the replies, in the queries' order."""
    by_node: dict[str, list[int]] = {}
    for i in range(len(queries)):
        by_node.setdefault(rng.choice(sorted(clients)), []).append(i)
    out: list = [None] * len(queries)
    for address, at in by_node.items():
        for i, r in zip(at, clients[address].subscribe_many([queries[i] for i in at])):
            assert not r.code, r.error
            out[i] = r
    return out


@pytest.mark.parametrize("strategy,resolution,batch_docs,linger_ms,headers", CASES)
def test_batched_publishing_alerts_each_matching_subscriber_once(
    corpus, tmp_path, strategy, resolution, batch_docs, linger_ms, headers
):
    docs, queries, boolean, files = corpus
    engine = [
        "--strategy",
        strategy,
        "--resolution",
        resolution,
        "--bloom-bits",
        "256",
        "--stats",
        str(files["stats"]),
        "--popular",
        str(files["popular"]),
        "--header-terms",
        str(headers),
    ]
    ring = ring_up(
        8,
        tmp_path / "ring.json",
        timing=FAST,
        out=io.StringIO(),
        engine=engine,
        node_args=["--batch-docs", str(batch_docs), "--linger-ms", str(linger_ms)],
    )
    try:
        rng = random.Random(batch_docs)
        addresses, credentials = ring.addresses(), ring.credentials()
        clients = {a: Client(a, credentials=credentials) for a in addresses}
        subs, booleans = subscribed(clients, queries, rng), subscribed(clients, boolean, rng)
        # most documents in PublishBatch calls of various sizes to random nodes, some alone
        rest = list(docs)
        while rest:
            n = rng.choice([1, 7, 30])
            chunk, rest = rest[:n], rest[n:]
            client = clients[rng.choice(addresses)]
            if n == 1:
                assert client.publish(chunk[0].docno, chunk[0].text, chunk[0].title).accepted
            else:
                assert all(
                    r.accepted
                    for r in client.publish_many([(d.docno, d.text, d.title) for d in chunk])
                )
        got = collect_alerts(subs + booleans, addresses, credentials=credentials)
        stats = [c.stats() for c in clients.values()]
        for c in clients.values():
            c.close()
    finally:
        stop_processes(ring.nodes, grace=2.0)
    want = expected(subs, docs)
    assert len(want) > 200  # the workload really exercises matching
    owed = boolean_expected({r.subscription_id: q for r, q in zip(booleans, boolean)}, docs)
    assert len(owed) > 100
    assert_exact(got, want | owed)
    assert sum(s.documents_published for s in stats) == len(docs)
    assert sum(s.alerts_dropped for s in stats) == 0
    announced = Counter()
    for s in stats:
        for c in s.ledger:
            announced[c.kind] += c.messages
    if batch_docs >= 32:  # the batches were real: fewer announcements than documents
        assert announced["Announce"] < len(docs)
    if batch_docs == 1:  # a batch of one: every document announced on its own
        assert announced["Announce"] >= len(docs)
    # the cost model's meter (chord.live.meter): each node that published analyzed, every node
    # handled announcements, and the accounts never hold more than the process spent
    for s in stats:
        cpu = s.cpu_seconds
        assert cpu["unmetered"] >= 0 and all(v >= 0 for v in cpu.values())
        assert (cpu["analysis"] > 0) == (s.documents_published > 0)
    assert sum(s.cpu_seconds["op Announcer.announce"] > 0 for s in stats) >= 2
    # the clients' calls, each step of their handlers charged to the method (chord.live.gate)
    assert sum(s.cpu_seconds["PublishBatch"] + s.cpu_seconds["Publish"] > 0 for s in stats) >= 1
    assert all(s.config.header_terms == headers for s in stats)  # every node reads them alike
    assert (sum(s.header_bytes for s in stats) > 0) == (headers > 0)
