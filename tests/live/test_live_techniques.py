"""The techniques beyond the paper on a live 8-node loopback ring with three replicas:
aggregate filters (`--filter-lease`), merged queries (`--merge-queries on`) and
term-presence headers (on by default with --stats and Term Dialogue). While SAP-MHI's
gossip re-indexes queries, a node is killed, and more queries are subscribed under keys
new at their owners between documents, every subscriber gets exactly the alerts the
brute-force matcher names for the documents published after its subscription, each once;
and every technique was at work."""

from __future__ import annotations

import io

from support.live import FAST, collect, kill_hard, publish, subscribe
from support.oracle import assert_exact, expected
from support.waiting import eventually
from support.workloads import live_corpus

from cqengine.core.terms.presence import DEFAULT_HEADER_TERMS
from cqengine.demo import write_inputs
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import wait_converged
from cqengine.live.ring.processes import stop_processes

LEASE = "1.0"


def stats(addresses, credentials) -> list:
    out = []
    for a in addresses:
        with Client(a, credentials=credentials) as c:
            out.append(c.stats())
    return out


def test_techniques_lose_no_alert_across_reindexing_a_failure_and_new_keys(tmp_path):
    docs, queries = live_corpus(90, 240, seed=31, vocab=900)
    files = write_inputs(document_frequencies(docs), tmp_path)
    engine = [
        "--strategy", "sap-mhi", "--synopsis-k", "40", "--gossip", "0.3",
        "--stats", str(files["stats"]), "--filter-lease", LEASE, "--reconcile", "0.5",
        "--merge-queries", "on",
    ]  # fmt: skip
    ring = ring_up(8, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), engine=engine)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        early = subscribe(addresses, queries[:160], credentials, seed=1)
        first, second, third = docs[:30], docs[30:60], docs[60:]
        publish(addresses[0], first, credentials)
        eventually(
            lambda: sum(s.reindexed for s in stats(addresses, credentials)),
            30,
            "gossip to re-index some queries",
        )
        publish(addresses[1], second, credentials)
        # every batch through before the failure: a DN announcing one again after it (a
        # QN gone under it) would match the late subscriptions too, which is no loss
        eventually(
            lambda: sum(s.batches_in_flight for s in stats(addresses, credentials)) == 0,
            30,
            "the second batch through",
        )
        victim = max(nodes[1:], key=lambda e: e.address)  # not the bootstrap node
        kill_hard(victim)
        survivors = [a for a in addresses if a != victim.address]
        wait_converged(survivors, ring.r, timeout=30, credentials=credentials)
        late = subscribe(survivors, queries[160:], credentials, seed=2)  # keys new here
        with Client(survivors[0], credentials=credentials) as c:  # one by one: a filter
            for d in third:  # spares a message whose every document it spares
                assert c.publish(d.docno, d.text, d.title).accepted
        want = expected(early, docs) | expected(late, third)
        got = collect(early + late, survivors, len(want), credentials)
        after = stats(survivors, credentials)
    finally:
        stop_processes(nodes, grace=2.0)
    assert len(want) > 150  # the workload really exercises matching
    assert_exact([(a.subscription_id, a.docno) for a in got], want)
    assert all(s.config.filter_lease == float(LEASE) and s.config.merge_queries for s in after)
    assert all(s.config.header_terms == DEFAULT_HEADER_TERMS for s in after)
    assert sum(s.header_bytes for s in after) > 0
    assert sum(s.announcements_filtered for s in after) > 0
    assert sum(s.filter_waits for s in after) > 0
