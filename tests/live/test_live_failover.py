"""Failover on live loopback rings with three replicas (the command line's default): nodes
killed with SIGKILL (R-1 consecutive ones, among them a home whose subscriber has a stream
open, on a ring with term-presence headers; a DN in the middle of resolving a batch) or
leaving gracefully take nothing with them.
Every alert of every document accepted is the brute-force matcher's, exactly once, and a
subscription's alerts are numbered 0, 1, 2, ... across the failover."""

from __future__ import annotations

import io
import signal
import threading
from collections import defaultdict

import pytest
from support.live import FAST, collect, kill_hard, publish, serving, subscribe, wait_gone
from support.oracle import assert_exact, assert_numbered, expected
from support.waiting import eventually
from support.workloads import live_corpus

from cqengine.demo import write_inputs
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import observe, wait_converged
from cqengine.live.ring.processes import stop_processes

ENGINE = ["--reconcile", "0.5"]


@pytest.fixture(scope="module")
def corpus():
    return live_corpus(80, 200, seed=29, vocab=700)


def assert_exact_and_numbered(alerts, want) -> None:
    assert_exact([(a.subscription_id, a.docno) for a in alerts], want)
    assert_numbered(alerts)  # across every failover


class Streamer(threading.Thread):
    """A subscriber holding a stream of one home's subscriptions open throughout."""

    def __init__(self, address: str, subs, want: int, credentials) -> None:
        super().__init__(daemon=True)
        self.client = Client(address, credentials=credentials)
        self.subs, self.want = subs, want
        self.got: list = []

    def run(self) -> None:
        try:
            for a in self.client.alerts(self.subs, timeout=120, resume=60):
                self.got.append(a)
                if len(self.got) >= self.want:
                    break
        finally:
            self.client.close()


def ring_order(addresses, credentials) -> list[str]:
    view = observe(addresses, 8, credentials=credentials)
    return [a for a, _ in sorted(view.states.items(), key=lambda kv: kv[1].node.id)]


def test_r_minus_1_consecutive_nodes_killed_lose_no_subscription_alert_or_stream(corpus, tmp_path):
    docs, queries = corpus
    # with term-presence headers: they must not cost an alert across the failover either
    files = write_inputs(document_frequencies(docs), tmp_path)
    engine = ENGINE + ["--stats", str(files["stats"]), "--header-terms", "64"]
    ring = ring_up(6, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), engine=engine)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=3)
        order = ring_order(addresses, credentials)
        homes = defaultdict(list)
        for s in subs:
            homes[s.home].append(s)
        home = max(order[1:], key=lambda a: len(homes[a]))  # not the bootstrap node
        at = order.index(home)
        victims = [order[at], order[(at + 1) % len(order)]]  # the home and its successor
        streamed = homes[home]
        want = expected(subs, docs)
        stream = Streamer(
            home,
            streamed,
            sum(1 for s, _ in want if s in {x.subscription_id for x in streamed}),
            credentials,
        )
        stream.start()
        first, second = docs[:40], docs[40:]
        publisher = next(a for a in addresses if a not in victims)
        publish(publisher, first, credentials)
        eventually(lambda: len(stream.got), 30, "the stream to take some of them")
        taken = len(stream.got)
        for e in [n for n in nodes if n.address in victims]:
            kill_hard(e)
        survivors = [a for a in addresses if a not in victims]
        wait_converged(survivors, ring.r, timeout=30, credentials=credentials)
        publish(publisher, second, credentials)
        stream.join(timeout=90)
        others = [s for s in subs if s.home != home]
        got = stream.got + collect(others, survivors, len(want) - len(stream.got), credentials)
        with Client(survivors[0], credentials=credentials) as c:
            assert len(serving(subs, survivors, credentials)) <= len(survivors)
            assert c.find_home(streamed[0].home_id, survivors) in survivors
    finally:
        stop_processes(nodes, grace=2.0)
    assert 0 < taken < len(stream.got)  # the stream ran before the kill and after it
    assert_exact_and_numbered(got, want)


def test_a_dn_killed_while_resolving_its_batch_loses_no_accepted_document(corpus, tmp_path):
    docs, queries = corpus
    ring = ring_up(5, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), engine=ENGINE)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=4)
        dn = nodes[2]  # not the bootstrap node, which the survivors' lookups start from
        # accepted: the DN and its replicas hold every document
        publish(dn.address, docs, credentials)
        kill_hard(dn)  # while its batches are still being announced and resolved
        survivors = [a for a in addresses if a != dn.address]
        wait_converged(survivors, ring.r, timeout=30, credentials=credentials)
        want = expected(subs, docs)
        got = collect(subs, survivors, len(want), credentials)
    finally:
        stop_processes(nodes, grace=2.0)
    assert_exact_and_numbered(got, want)


def test_a_leaving_home_and_owner_hand_over_everything(corpus, tmp_path):
    docs, queries = corpus
    ring = ring_up(5, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), engine=ENGINE)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=5)
        publish(addresses[0], docs[:40], credentials)  # their alerts wait in the homes' mailboxes
        leaving = [n for n in nodes[1:] if any(s.home == n.address for s in subs)][:2]
        stop_processes(leaving, grace=10.0, how=signal.SIGTERM)  # graceful: hands over
        wait_gone(leaving)
        survivors = [a for a in addresses if a not in {n.address for n in leaving}]
        wait_converged(survivors, ring.r, timeout=30, credentials=credentials)
        publish(survivors[0], docs[40:], credentials)
        want = expected(subs, docs)
        got = collect(subs, survivors, len(want), credentials)
        stats = []
        for a in survivors:
            with Client(a, credentials=credentials) as c:
                stats.append(c.stats())
    finally:
        stop_processes(nodes, grace=2.0)
    assert_exact_and_numbered(got, want)
    assert sum(s.subscriptions for s in stats) == len(subs)  # every one served somewhere
