"""A live loopback ring on the home log (`--home-log on`, docs/home-log.md), with data
directories: a home killed with SIGKILL is taken over by its successor, which leads its
log in a new epoch and numbers on; restarted from its data directory, the home reads its
logs back and leads its key again. Every alert is the brute-force matcher's, exactly once,
each subscription's numbered 0, 1, 2, ... throughout."""

from __future__ import annotations

import io
import os
import signal
from collections import defaultdict
from dataclasses import replace

from support.live import FAST, collect, kill_hard, publish, restart, subscribe
from support.oracle import assert_exact, assert_numbered, expected
from support.workloads import live_corpus

from cqengine.live.client import Client
from cqengine.live.ring import ring_up, stop_processes, wait_converged

ENGINE = ["--reconcile", "0.5", "--home-log", "on"]


def test_a_home_killed_and_restarted_on_the_home_log_loses_and_repeats_nothing(tmp_path):
    docs, queries = live_corpus(60, 150, seed=37, vocab=700)
    data = tmp_path / "data"
    ring = ring_up(
        5, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), engine=ENGINE, data_root=data
    )
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=5)
        homes = defaultdict(list)
        for s in subs:
            homes[s.home].append(s)
        victim = max(nodes[1:], key=lambda n: len(homes[n.address]))  # not the bootstrap
        assert homes[victim.address]
        first, second, third = docs[:20], docs[20:40], docs[40:]
        publisher = addresses[0]
        publish(publisher, first, credentials)
        got = collect(subs, addresses, len(expected(subs, first)), credentials)
        kill_hard(victim)
        survivors = [a for a in addresses if a != victim.address]
        wait_converged(survivors, ring.r, timeout=30, credentials=credentials)
        publish(publisher, second, credentials)
        want = expected(subs, first + second)
        got += collect(subs, survivors, len(want) - len(got), credentials)
        nodes.append(restart(victim, publisher, ring, tmp_path, data / str(victim.port)))
        wait_converged(addresses, ring.r, timeout=30, credentials=credentials)
        publish(publisher, third, credentials)
        want = expected(subs, docs)
        got += collect(subs, addresses, len(want) - len(got), credentials)
        with Client(publisher, credentials=credentials) as c:
            stats = c.stats()
    finally:
        stop_processes(nodes, grace=2.0)
    assert len(want) > 60  # the workload really exercises matching
    assert_exact([(a.subscription_id, a.docno) for a in got], want)
    assert_numbered(got)
    assert stats.config.home_log
    assert "restored the logs of" in (tmp_path / f"node-{victim.port}.log").read_text()


def test_a_paused_home_is_fenced_when_it_wakes(tmp_path):
    """A home stopped with SIGSTOP long enough for the ring to count it failed: its
    successor leads its log in a higher epoch and numbers on. Continued, the home still
    believes it leads; the members refuse its epoch, it takes the log back in a new one
    from them, and no alert is lost, repeated or numbered twice."""
    docs, queries = live_corpus(60, 150, seed=41, vocab=700)
    # a busy peer is waited for --call-timeout: this one is not busy, it is stopped
    timing = replace(FAST, call_timeout=3.0)
    ring = ring_up(5, tmp_path / "ring.json", timing=timing, out=io.StringIO(), engine=ENGINE)
    nodes, credentials = list(ring.nodes), ring.credentials()
    paused = None
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=6)
        homes = defaultdict(list)
        for s in subs:
            homes[s.home].append(s)
        paused = max(nodes[1:], key=lambda n: len(homes[n.address]))  # not the bootstrap
        first, second, third = docs[:20], docs[20:40], docs[40:]
        publisher = addresses[0]
        publish(publisher, first, credentials)
        got = collect(subs, addresses, len(expected(subs, first)), credentials)
        os.kill(paused.pid, signal.SIGSTOP)
        others = [a for a in addresses if a != paused.address]
        wait_converged(others, ring.r, timeout=30, credentials=credentials)
        publish(publisher, second, credentials)
        want = expected(subs, first + second)
        got += collect(subs, others, len(want) - len(got), credentials)
        os.kill(paused.pid, signal.SIGCONT)
        wait_converged(addresses, ring.r, timeout=30, credentials=credentials)
        publish(publisher, third, credentials)
        want = expected(subs, docs)
        got += collect(subs, addresses, len(want) - len(got), credentials)
    finally:
        if paused is not None:
            os.kill(paused.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM
        stop_processes(nodes, grace=2.0)
    assert len(want) > 60
    assert_exact([(a.subscription_id, a.docno) for a in got], want)
    assert_numbered(got)
