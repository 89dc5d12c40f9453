"""The engine on a live loopback ring: alerts equal the brute-force matcher; bad input is
refused."""

import io
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.command_line import assert_one_line_error, cqengine
from support.live import FAST
from support.oracle import assert_exact, expected
from support.waiting import eventually

from chord.live import tls
from chord.protocol import versions
from cqengine.demo import collect_alerts, wait_quiet
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.client import Client, ClientError
from cqengine.live.ports import free_ports
from cqengine.live.ring.certificates import make_certificates, node_certificate
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import wait_converged
from cqengine.live.ring.processes import stop_processes
from cqengine.live.service import MAX_REQUEST_DOCS
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.corpus import generate_corpus
from cqengine.text.trec import write_trec
from cqengine.text.workload import generate_queries


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    path = tmp_path_factory.mktemp("ring") / "ring.json"
    ring = ring_up(
        8,
        path,
        timing=FAST,
        out=io.StringIO(),
        engine=[
            "--strategy",
            "mhi",
            "--piggyback",
            "2",
            "--resolution",
            "bf",
            "--max-doc-bytes",
            "200000",
        ],
    )
    try:
        yield ring
    finally:
        stop_processes(ring.nodes, grace=2.0)


@pytest.fixture(scope="module")
def credentials(ring):
    """The admin client certificate of the ring (it runs mutual TLS)."""
    return ring.credentials()


def test_thousand_subscriptions_two_hundred_documents_match_the_oracle(ring, credentials):
    rng = random.Random(8)
    docs = list(generate_corpus(200, seed=8, vocab_size=3000, mean_terms=50))
    df = document_frequencies(docs)
    queries = [" ".join(q) for q in generate_queries(df, 1000, "skew", mean_size=2.0, seed=8)]
    clients = {a: Client(a, credentials=credentials) for a in ring.addresses()}
    subs = [clients[rng.choice(ring.addresses())].subscribe(q) for q in queries]
    for d in docs:
        clients[rng.choice(ring.addresses())].publish(d.docno, d.text, d.title)
    got = collect_alerts(subs, ring.addresses(), credentials=credentials)
    want = expected(subs, docs)
    assert len(want) > 500  # the workload really exercises matching
    assert_exact(got, want)
    stats = [c.stats() for c in clients.values()]
    assert sum(s.primary_entries for s in stats) == 1000  # every query indexed exactly once
    assert sum(s.replica_entries for s in stats) == 2000  # and copied twice (3 replicas)
    assert sum(s.subscriptions for s in stats) == 1000
    # on the home log (the default) no home is copied: each home key's log is led once, and
    # kept by five members (the home and its next four successors)
    assert sum(s.replica_homes for s in stats) == 0
    assert sum(s.logs_led for s in stats) == len({s.home_id for s in subs})
    assert sum(1 for s in stats if s.log_entries) >= 5
    assert sum(s.documents_published for s in stats) == 200
    assert sum(s.alerts_delivered for s in stats) == len(want)
    assert sum(s.alerts_dropped for s in stats) == 0

    # once every batch is resolved and delivered, no node counts work in flight
    def work() -> list[tuple[int, int]]:
        return [(s.batches_in_flight, s.background) for s in (c.stats() for c in clients.values())]

    eventually(
        work,
        10,
        "no node counting work in flight (batches, background)",
        holds=lambda seen: not any(batches or background for batches, background in seen),
        interval=0.1,
    )
    for c in clients.values():
        c.close()


def test_bad_input_is_refused_and_changes_nothing(ring, credentials):
    address = ring.addresses()[0]
    with Client(address, credentials=credentials) as c:
        before = c.stats()
        for query in ("", "the and of", " ".join(f"w{i}x" for i in range(70))):
            with pytest.raises(ClientError) as e:
                c.subscribe(query)
            assert e.value.code == "INVALID_ARGUMENT"
        # a query of a few terms in megabytes of stop words: refused before analysis
        with pytest.raises(ClientError, match="the limit is 4096") as e:
            c.subscribe("the " * 500_000 + "levee")
        assert e.value.code == "INVALID_ARGUMENT"
        with pytest.raises(ClientError, match="limit is 200000") as e:
            c.publish("BIG", "word " * 50000)
        assert e.value.code == "INVALID_ARGUMENT"
        with pytest.raises(ClientError, match="not UTF-8") as e:
            c.publish("BAD", b"caf\xe9 au lait")
        with pytest.raises(ClientError, match="docno"):
            c.publish("  ", "text")
        sub = c.subscribe("hurricane levee")
        for call in (
            lambda: c.unsubscribe(sub.subscription_id, "wrong"),
            lambda: list(c.alerts((sub.subscription_id, "wrong"), timeout=1)),
        ):
            with pytest.raises(ClientError) as e:
                call()
            assert e.value.code == "NOT_FOUND"  # as for an unknown id: a guesser learns nothing
        with pytest.raises(ClientError) as e:
            c.unsubscribe(12345, "x")
        assert e.value.code == "NOT_FOUND"
        c.unsubscribe(sub.subscription_id, sub.token)
        after = c.stats()
        assert after.subscriptions == before.subscriptions
        assert after.documents_published == before.documents_published


def test_a_bad_document_in_a_batch_is_refused_alone(ring, credentials):
    """Each document of a PublishBatch call gets its own status: the bad ones are refused
    with why, the rest are published and alert their subscribers."""
    a = ring.addresses()[1]
    with Client(a, credentials=credentials) as c:
        sub = c.subscribe("walrus tusk")
        before = c.stats().documents_published
        replies = c.publish_many(
            [
                ("W1", "a walrus tusk of ivory", ""),
                ("W2", b"caf\xe9 au lait", ""),
                ("W3", "walrus " * 50000, ""),
                ("  ", "walrus tusk", ""),
                ("W4", "the walrus lost a tusk", "Tusk"),
            ]
        )
        assert [r.accepted for r in replies] == [True, False, False, False, True]
        assert [r.code for r in replies] == [
            "",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "",
        ]
        assert "not UTF-8" in replies[1].error and "limit is 200000" in replies[2].error
        assert "docno" in replies[3].error
        assert replies[0].terms == 3 and replies[0].doc_key != replies[4].doc_key
        assert c.stats().documents_published == before + 2
        wait_quiet(ring.addresses(), credentials=credentials)
        assert sorted(x.docno for x in c.alerts(sub, timeout=0.5)) == ["W1", "W4"]
        c.unsubscribe(sub.subscription_id, sub.token)


def test_an_empty_or_oversized_batch_is_refused_whole(ring, credentials):
    with Client(ring.addresses()[2], credentials=credentials) as c:
        before = c.stats().documents_published
        with pytest.raises(ClientError, match="at least one document") as e:
            c._call("PublishBatch", pb.PublishBatchRequest())
        assert e.value.code == "INVALID_ARGUMENT"
        too_many = [
            pb.PublishRequest(docno=f"T{i}", text=b"tiny") for i in range(MAX_REQUEST_DOCS + 1)
        ]
        with pytest.raises(ClientError, match=f"at most {MAX_REQUEST_DOCS}") as e:
            c._call("PublishBatch", pb.PublishBatchRequest(documents=too_many))
        assert e.value.code == "INVALID_ARGUMENT"
        assert c.stats().documents_published == before


def test_a_node_answers_health_checks_while_it_analyzes_a_large_batch(ring, credentials):
    """Analysis runs beside the event loop: while ~20 MB of documents are analyzed (a second
    or more), the node still answers every health check."""
    a = ring.addresses()[3]
    words = [d.text for d in generate_corpus(40, seed=3, vocab_size=20000, mean_terms=400)]
    text = " ".join(words)
    docs = [(f"H{i}", (text * (150_000 // len(text) + 1))[:150_000], "") for i in range(130)]
    with Client(a, timeout=120, credentials=credentials) as c, ThreadPoolExecutor(1) as pool:
        published = pool.submit(c.publish_many, docs)
        answered = 0
        with tls.channel(a, credentials) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while not published.done():
                # the count below tells analysis on the loop from beside it; this deadline
                # only bounds a check, which the engine's own work on these batches may hold
                # up a second or more on a loaded machine (the suite's other workers)
                reply = health.Check(health_pb2.HealthCheckRequest(), timeout=10.0)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
                answered += 1
                time.sleep(0.05)
        assert all(r.accepted for r in published.result())
    # the node analyzes 130 documents as 3 batches of at most 64: were it to analyze on its
    # event loop, a check could be answered only between two batches, 4 at the most
    assert answered >= 5


def test_unsubscribed_queries_get_no_alerts_and_streams_end(ring, credentials):
    a, b = ring.addresses()[:2]
    with Client(a, credentials=credentials) as c:
        keep = c.subscribe("zebra crossing")
        gone = c.subscribe("zebra stripes")
        c.unsubscribe(gone.subscription_id, gone.token)
        c.publish("Z1", "the zebra stripes at the zebra crossing")
        wait_quiet(ring.addresses(), credentials=credentials)
        assert [x.docno for x in c.alerts(keep, timeout=0.5)] == ["Z1"]
        with pytest.raises(ClientError) as e:
            list(c.alerts(gone, timeout=0.5))
        assert e.value.code == "NOT_FOUND"
        c.unsubscribe(keep.subscription_id, keep.token)


def test_an_ended_subscription_on_a_stream_holds_back_neither_the_others_acks_nor_streams(
    ring, credentials
):
    """A subscriber reads its home's subscriptions on one stream, and one of them ends
    (through another client, say): acknowledging them all, and opening the stream again,
    still serve the others; the ended one is named back (AckReply.unknown). Refused
    whole, the others' acknowledgements were lost and their alerts sent again for ever."""
    with Client(ring.addresses()[2], credentials=credentials) as c:
        keep, gone = c.subscribe("quagga herd"), c.subscribe("quagga foal")
        assert keep.home == gone.home
        c.publish("Q1", "a quagga foal in the quagga herd")
        wait_quiet(ring.addresses(), credentials=credentials)
        c.unsubscribe(gone.subscription_id, gone.token)
        keys = [
            pb.SubscriptionKey(subscription_id=s.subscription_id, token=s.token, next=1)
            for s in (gone, keep)
        ]
        reply = c._call("AckAlerts", pb.AckRequest(subscriptions=keys, home_id=keep.home_id))
        assert list(reply.unknown) == [gone.subscription_id]
        assert list(c.alerts([gone, keep], timeout=0.5)) == []  # Q1 was acknowledged
        c.publish("Q2", "a quagga herd")
        wait_quiet(ring.addresses(), credentials=credentials)
        assert [x.docno for x in c.alerts([gone, keep], timeout=0.5)] == ["Q2"]
        with pytest.raises(ClientError) as e:
            c._call("AckAlerts", pb.AckRequest(subscriptions=keys[:1]))
        assert e.value.code == "NOT_FOUND"  # naming nothing it serves: refused as before
        c.unsubscribe(keep.subscription_id, keep.token)


def test_a_stream_acknowledges_only_the_subscriptions_whose_alerts_it_handed_out(ring, credentials):
    """The home hashes the token of each subscription an acknowledgement names, and a
    stream may carry thousands: only those with alerts handed out since are named (by
    tokens: here the last acknowledgement, which the stream, ended at the timeout, can
    no longer take by its watermark)."""
    with Client(ring.addresses()[3], credentials=credentials) as c:
        quiet, busy = c.subscribe("okapi calf"), c.subscribe("okapi forest")
        assert quiet.home == busy.home == c.address
        c.publish("O1", "an okapi in the forest")
        wait_quiet(ring.addresses(), credentials=credentials)
        sent, call = [], c._call

        def recording(method, request):
            if method == "AckAlerts":
                sent.append([k.subscription_id for k in request.subscriptions])
            return call(method, request)

        c._call = recording
        assert [a.docno for a in c.alerts([quiet, busy], timeout=0.5)] == ["O1"]
        assert [ids for ids in sent if ids] == [[busy.subscription_id]]
        c._call = call
        assert list(c.alerts([quiet, busy], timeout=0.5)) == []  # acknowledged
        for s in (quiet, busy):
            c.unsubscribe(s.subscription_id, s.token)


def test_a_joining_node_takes_the_ring_settings_and_keys(ring, credentials, tmp_path):
    port = free_ports(1)[0]
    make_certificates(Path(ring.tls), [port])  # the ring's CA signs the newcomer's certificate
    bad = cqengine("node", "--port", port, "--join", ring.addresses()[0], "--strategy", "ri")
    assert_one_line_error(bad, "engine options belong to the ring")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cqengine",
            "node",
            "--port",
            str(port),
            "--join",
            ring.addresses()[0],
            "--stabilize",
            "0.15",
            "--fix-fingers",
            "0.3",
            "--tls-dir",
            ring.tls,
            "--tls-name",
            node_certificate(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        address = f"127.0.0.1:{port}"
        wait_converged(ring.addresses() + [address], 8, timeout=60, credentials=credentials)
        with Client(address, credentials=credentials) as c:
            cfg = c.stats().config
            assert (cfg.strategy, cfg.piggyback, cfg.resolution) == ("mhi", 2, "bf")
            sub = c.subscribe("quokka smile")
            c.publish("Q1", "a quokka has a famous smile")
            wait_quiet(ring.addresses() + [address], credentials=credentials)
            assert [x.docno for x in c.alerts(sub, timeout=0.5)] == ["Q1"]
            c.unsubscribe(sub.subscription_id, sub.token)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        wait_converged(ring.addresses(), 8, timeout=60, credentials=credentials)


def test_cli_subscribe_publish_stats_analyze(ring, tmp_path):
    rf = ("--ring-file", ring.path)
    listener = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cqengine",
            "subscribe",
            "volcanic ash",
            "--count",
            "1",
            "--ring-file",
            str(ring.path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        corpus = tmp_path / "c.trec"
        from cqengine.text.trec import TrecDoc

        write_trec(
            [
                TrecDoc("V1", "Volcanic ash grounded flights.", "Ash cloud"),
                TrecDoc("V2", "Nothing to see.", ""),
            ],
            corpus,
        )

        def published_and_heard():  # publish until the subscription is in place
            pub = cqengine("publish", corpus, *rf)
            assert pub.returncode == 0, pub.stderr
            assert "published 2 documents" in pub.stdout
            try:
                return listener.communicate(timeout=1.5)
            except subprocess.TimeoutExpired:
                return None

        out, err = eventually(published_and_heard, 30, "the listener to get an alert", interval=0)
        assert out.strip() == "V1\tAsh cloud", (out, err)
        assert "terms volcan ash" in err
    finally:
        listener.kill()
    stats = cqengine("stats", "--all", *rf)
    assert (
        stats.returncode == 0
        and "Announce" in stats.stdout
        and "documents published" in stats.stdout
    )
    # every node's release, and the ring's floor: one release, so its own protocol
    assert f"x cqengine {versions.software()}, protocol {versions.PROTOCOL}" in stats.stdout
    assert f"ring floor: protocol {versions.PROTOCOL} " in stats.stdout
    version = cqengine("--version")
    assert version.stdout.strip() == f"cqengine {versions.software()}, {versions.MINE}"
    # the homes measured how long V1 took from its DN's acceptance to its mailbox
    assert "alert latency        p50 <= " in stats.stdout, stats.stdout
    # where the nodes' CPU went: the stages of a document's path, shares adding up to 100%
    costs = stats.stdout.split("CPU by stage")[1].splitlines()[1:]
    shares = {line[:36].strip(): float(line.split()[-1].rstrip("%")) for line in costs if line}
    assert {"analysis", "announcement", "event loop, outside every account"} <= set(shares)
    assert abs(sum(shares.values()) - 100) < 0.5
    analyzed = cqengine("analyze", "The Hurricanes and THE levees")
    assert analyzed.stdout.split() == ["hurrican", "leve"]
    # a query of the language: its alternatives and what was left out, on stderr
    either = cqengine("subscribe", '"the ash cloud" OR lava -drill the', "--count", "0", *rf)
    assert either.returncode == 0, either.stderr
    assert "alternatives" in either.stderr and "left out: the" in either.stderr
    assert '"ash cloud" under' in either.stderr and "-drill under 'lava'" in either.stderr
    bad = cqengine("subscribe", "(ash OR", "--count", "0", *rf)
    assert_one_line_error(bad, "at character")


def test_cli_publish_reports_malformed_trec_with_its_line(ring, tmp_path):
    bad = tmp_path / "bad.trec"
    bad.write_text(
        "<DOC>\n<DOCNO> A </DOCNO>\n<TEXT>\nfine\n</TEXT>\n</DOC>\n<DOC>\n<TEXT>\nno "
        "docno\n</TEXT>\n</DOC>\n"
    )
    proc = cqengine("publish", bad, "--ring-file", ring.path)
    assert_one_line_error(proc, f"{bad}:7:")
    missing = cqengine("publish", tmp_path / "nope.trec", "--ring-file", ring.path)
    assert_one_line_error(missing, "no such file")
    both = cqengine("publish", bad, "--text", "x", "--ring-file", ring.path)
    assert_one_line_error(both, "not both")


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["ring", "up", "-n", "2", "--strategy", "best"], "unknown strategy 'best'"),
        (["ring", "up", "-n", "2", "--strategy", "oi"], "give --stats FILE"),
        (
            ["ring", "up", "-n", "2", "--strategy", "oi", "--stats", "/nonexistent.tsv"],
            "no such file",
        ),
        (["ring", "up", "-n", "2", "--resolution", "xx"], "choose td or bf"),
        (["ring", "up", "-n", "2", "--bloom-bits", "1001"], "multiple of 8"),
        (["ring", "up", "-n", "2", "--filter-lease", "40"], "shorter than --call-timeout"),
    ],
)
def test_bad_engine_settings_are_refused_before_starting(args, fragment, tmp_path):
    proc = cqengine(*args, "--ring-file", tmp_path / "r.json")
    assert_one_line_error(proc, fragment)
    assert not (tmp_path / "r.json").exists()
