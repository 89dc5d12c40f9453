"""SubscribeBatch on a live loopback ring (mutual TLS, 3 replicas): each query subscribed
or refused on its own, the good ones alerted exactly as the brute-force matcher says, an
empty or oversized batch refused whole; and `cqengine subscribe --file` on top of it."""

import io
import json
import random
from collections import Counter

import pytest
from support.live import FAST
from support.oracle import assert_exact, expected

from cqengine.cli import main
from cqengine.core.basis.limits import MAX_BATCH_QUERIES
from cqengine.demo import collect_alerts
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.client import Client, ClientError
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze
from cqengine.text.corpus import generate_corpus
from cqengine.text.workload import generate_queries

# bad queries, each with what its refusal says
BAD = {
    "": "no terms left",
    "the of and": "no terms left",
    " ".join(f"w{i}x" for i in range(65)): "at most 64",
    "levee " * 1000: "the limit is 4096",
}


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    path = tmp_path_factory.mktemp("ring") / "ring.json"
    ring = ring_up(4, path, timing=FAST, out=io.StringIO(), engine=["--strategy", "mhi"])
    try:
        yield ring
    finally:
        stop_processes(ring.nodes, grace=2.0)


def ledger(stats) -> Counter:
    out = Counter()
    for s in stats:
        for c in s.ledger:
            out[c.kind] += c.messages
    return out


def test_each_query_is_subscribed_or_refused_alone_and_alerts_equal_the_matcher(ring):
    rng = random.Random(41)
    credentials, addresses = ring.credentials(), ring.addresses()
    docs = list(generate_corpus(80, seed=41, vocab_size=1200, mean_terms=40))
    df = document_frequencies(docs)
    queries = [" ".join(q) for q in generate_queries(df, 600, "skew", mean_size=2.0, seed=41)]
    texts = list(queries)
    for bad in BAD:  # each bad query somewhere among the good ones
        texts.insert(rng.randrange(len(texts)), bad)
    clients = {a: Client(a, credentials=credentials) for a in addresses}
    try:
        before = ledger(c.stats() for c in clients.values())
        # through two homes, in calls of 97 queries and of the most a call takes
        half = len(texts) // 2
        results = clients[addresses[0]].subscribe_many(texts[:half], per_call=97)
        results += clients[addresses[1]].subscribe_many(texts[half:])
        assert len(results) == len(texts)
        subs = []
        for text, r in zip(texts, results):
            if text in BAD:
                assert r.code == "INVALID_ARGUMENT" and BAD[text] in r.error, (text[:20], r)
                assert not r.subscription_id
            else:
                assert not r.code and r.subscription_id, r
                assert list(r.terms) == analyze(text) and r.index_term in r.terms
                subs.append(r)
        sent = ledger(c.stats() for c in clients.values())
        for d in docs:
            clients[rng.choice(addresses)].publish(d.docno, d.text, d.title)
        got = collect_alerts(subs, addresses, credentials=credentials)
        stats = [c.stats() for c in clients.values()]
    finally:
        for c in clients.values():
            c.close()
    want = expected(subs, docs)
    assert len(want) > 300  # the workload really exercises matching
    assert_exact(got, want)
    assert sum(s.primary_entries for s in stats) == len(subs)  # each indexed once
    assert sum(s.replica_entries for s in stats) == 2 * len(subs)  # and copied twice
    assert sum(s.subscriptions for s in stats) == len(subs)
    # on the home log (the default) no home is copied: each home key's log is led once
    assert sum(s.replica_homes for s in stats) == 0
    assert sum(s.logs_led for s in stats) == len({s.home_id for s in subs})
    # one Index message per owner and call (7 + 1 calls, 4 nodes): far fewer than queries
    assert sent["Index"] - before["Index"] <= 8 * 4 < len(subs)


def test_an_empty_or_oversized_batch_is_refused_whole(ring):
    with Client(ring.addresses()[2], credentials=ring.credentials()) as c:
        before = c.stats().subscriptions
        with pytest.raises(ClientError, match="at least one query") as e:
            c._call("SubscribeBatch", pb.SubscribeBatchRequest())
        assert e.value.code == "INVALID_ARGUMENT"
        too_many = [pb.SubscribeRequest(query="levee")] * (MAX_BATCH_QUERIES + 1)
        with pytest.raises(ClientError, match=f"at most {MAX_BATCH_QUERIES}") as e:
            c._call("SubscribeBatch", pb.SubscribeBatchRequest(queries=too_many))
        assert e.value.code == "INVALID_ARGUMENT"
        with pytest.raises(ClientError, match="per_call"):
            c.subscribe_many(["levee"], per_call=MAX_BATCH_QUERIES + 1)
        assert c.stats().subscriptions == before


def test_cli_subscribe_file_writes_each_result_as_it_comes(ring, tmp_path, capsys):
    queries = tmp_path / "queries.txt"
    good = [f"storm{i} levee" for i in range(25)]
    queries.write_text(
        "# queries\n" + "\n".join(good[:10]) + "\n\nthe and\n" + "\n".join(good[10:])
    )
    out = tmp_path / "subs.jsonl"
    rf = ["--ring-file", str(ring.path)]
    code = main(["subscribe", "--file", str(queries), "--out", str(out), "--per-call", "7", *rf])
    assert code == 1  # one query was refused
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["query"] for x in lines] == good[:10] + ["the and"] + good[10:]
    refused = [x for x in lines if "error" in x]
    assert len(refused) == 1 and refused[0]["code"] == "INVALID_ARGUMENT"
    placed = [x for x in lines if "error" not in x]
    assert all(len(x["subscription_id"]) == 16 and x["token"] and x["home"] for x in placed)
    err = capsys.readouterr().err
    assert "subscribed 7 of 26" in err and "subscribed 26 of 26 (1 refused)" in err
    # the ids and tokens written are the subscriptions': each can be unsubscribed with them
    with Client(placed[0]["home"], credentials=ring.credentials()) as c:
        for x in placed:
            c.unsubscribe(int(x["subscription_id"], 16), x["token"], int(x["home_id"], 16))
    # a file that exists is never overwritten: it may hold the only copy of tokens
    assert main(["subscribe", "--file", str(queries), "--out", str(out), *rf]) == 1
    assert "exists" in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == len(lines)
