"""Synopsis gossip converges to the central synopsis; re-indexing loses and duplicates nothing."""

import io
import math
import random
import time

import pytest
from support.live import FAST
from support.oracle import assert_exact, expected
from support.waiting import eventually

from cqengine.core.terms.settings import Settings
from cqengine.core.terms.synopsis import Synopsis
from cqengine.demo import collect_alerts
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_frequencies, document_terms
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes
from cqengine.text.analysis import term_id
from cqengine.text.corpus import generate_corpus
from cqengine.text.workload import generate_queries


def central(docs, k, y=32, hashes=1) -> Synopsis:
    s = Synopsis(k, y, hashes)
    for d in docs:
        s.add_document(d.docno, [term_id(t) for t in document_terms(d.text, d.title)])
    return s


def test_gossip_converges_to_the_central_synopsis_in_log_n_rounds():
    n, k = 256, 150
    settings = Settings(strategy="sap-mhi", synopsis_k=k)
    sim = EngineSimulator(n, settings, seed=5)
    docs = list(generate_corpus(400, seed=5, vocab_size=2000, mean_terms=30))
    for d in docs:
        sim.publish(d.docno, d.text, d.title)
    for d in docs[:50]:  # the same documents again, elsewhere: duplicates must not inflate
        sim.publish(d.docno, d.text, d.title)
    want = central(docs, k).entries
    before = sim.ring.ledger.total("Gossip")
    rounds = 0
    while any(e.synopsis.entries != want for e in sim.engines.values()):
        sim.gossip_round()
        rounds += 1
        assert rounds <= 2 * math.log2(n) + 2, "gossip did not converge in O(log N) rounds"
    spent = sim.ring.ledger.total("Gossip")
    assert spent.messages > before.messages
    sim.gossip_round()  # converged: nothing changes, so nothing more is sent
    assert sim.ring.ledger.total("Gossip").messages == spent.messages


def run_reindexing(hashes: int, piggyback: int):
    rng = random.Random(9)
    docs = list(generate_corpus(240, seed=9, vocab_size=400, mean_terms=25))
    df = document_frequencies(docs)
    queries = [" ".join(q) for q in generate_queries(df, 400, "skew", mean_size=2.5, seed=9)]
    # the simulator runs one operation at a time: no document is in flight during a move
    sim = EngineSimulator(
        24,
        Settings(
            strategy="sap-mhi",
            synopsis_k=40,
            synopsis_hashes=hashes,
            piggyback=piggyback,
            reindex_grace=0,
        ),
        seed=9,
    )
    subs = [sim.subscribe(q) for q in queries]
    got = []
    for i, d in enumerate(docs):  # synopses grow and gossip while documents keep coming
        sim.publish(d.docno, d.text, d.title, via=rng.choice(sorted(sim.ring.nodes)))
        if i % 20 == 19:
            sim.gossip_round()
            got += sim.alerts()
    for _ in range(12):
        sim.gossip_round()
    got += sim.alerts()
    return sim, subs, docs, got


@pytest.mark.parametrize("hashes,piggyback", [(1, 0), (1, 1), (1, 3), (3, 2)])
def test_reindexing_during_publishing_loses_and_duplicates_no_alert(hashes, piggyback):
    sim, subs, docs, got = run_reindexing(hashes, piggyback)
    want = expected(subs, docs)
    assert len(want) > 300
    assert_exact(got, want)
    assert sum(e.counters["reindexed"] for e in sim.engines.values()) > 0
    assert sum(sim.load()) == len(subs)  # every query indexed exactly once after the moves
    oracle = sim.ring.oracle()
    for address, engine in sim.engines.items():
        popular = engine.synopsis.popular()
        for key in engine.index.keys():
            assert oracle.owner(key).address == address
            for e in engine.index.get(key):
                # Algorithm 5 with the converged synopsis: the first non-popular term by id
                expect = next((x for x in e.term_ids if x not in popular), e.term_ids[0])
                assert key == expect
    for s in subs[:50]:  # unsubscribing finds entries wherever they moved
        sim.unsubscribe(s)
    assert sum(sim.load()) == len(subs) - 50


def test_live_ring_gossips_and_reindexes_while_documents_arrive(tmp_path):
    docs = list(generate_corpus(80, seed=3, vocab_size=500, mean_terms=30))
    df = document_frequencies(docs)
    queries = [" ".join(q) for q in generate_queries(df, 300, "skew", mean_size=2.5, seed=3)]
    ring = ring_up(
        8,
        tmp_path / "ring.json",
        timing=FAST,
        out=io.StringIO(),
        engine=[
            "--strategy",
            "sap-mhi",
            "--synopsis-k",
            "40",
            "--gossip",
            "0.1",
            "--reindex-grace",
            "1",
        ],
    )
    try:
        rng = random.Random(3)
        credentials = ring.credentials()
        clients = {a: Client(a, credentials=credentials) for a in ring.addresses()}
        subs = [clients[rng.choice(ring.addresses())].subscribe(q) for q in queries]
        for d in docs:  # gossip rounds and re-indexing run between and during these
            clients[rng.choice(ring.addresses())].publish(d.docno, d.text, d.title)
            time.sleep(0.02)
        want_digest = central(docs, 40).digest()
        eventually(
            lambda: {c.stats().synopsis_digest for c in clients.values()},
            30,
            "synopses to converge",
            holds=lambda digests: digests == {want_digest},
            interval=0.2,
        )
        got = collect_alerts(subs, ring.addresses(), credentials=credentials)
        want = expected(subs, docs)
        assert len(want) > 200
        assert_exact(got, want)
        stats = [c.stats() for c in clients.values()]
        assert sum(s.reindexed for s in stats) > 0

        # the grace period (1 s here) ends; the next gossip round retires old copies
        def entries() -> tuple[int, int]:
            after = [c.stats() for c in clients.values()]
            return sum(s.primary_entries for s in after), sum(s.index_entries for s in after)

        primary, indexed = eventually(
            entries,
            30,
            "old copies retired (primary entries, index entries)",
            holds=lambda n: n == (len(subs), 3 * len(subs)),
        )
        assert primary == len(subs)  # old copies retired,
        assert indexed == 3 * len(subs)  # at the replicas too
        assert sum(e.bytes for s in stats for e in s.ledger if e.kind == "Gossip") > 0
        for c in clients.values():
            c.close()
    finally:
        stop_processes(ring.nodes, grace=2.0)
