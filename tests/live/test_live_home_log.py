"""Live loopback rings on the home log (`--home-log on`, docs/home-log.md; five members a
log, the default), a home taken away while documents are published and brought back:

- killed with SIGKILL: its successor leads its log in a new epoch and numbers on;
  restarted from its data directory, the home reads its logs back and leads again;
- stopped with SIGSTOP long enough for the ring to count it failed: continued, it still
  believes it leads, the members refuse its epoch, and it takes its log back in a new one.

Every alert is the brute-force matcher's, exactly once, each subscription's numbered 0, 1,
2, ... throughout."""

from __future__ import annotations

import io
import os
import signal
from collections import Counter
from dataclasses import replace

from support.live import FAST, collect, kill_hard, publish, restart, subscribe
from support.oracle import assert_exact, assert_numbered, expected
from support.workloads import live_corpus

from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.convergence import wait_converged
from cqengine.live.ring.processes import stop_processes

ENGINE = ["--reconcile", "0.5", "--home-log", "on"]


def busiest_home(nodes, subs):
    """The node (not the bootstrap one) homing the most of these subscriptions."""
    homes = Counter(s.home for s in subs)
    home = max(nodes[1:], key=lambda n: homes[n.address])
    assert homes[home.address]
    return home


def through_an_absence(ring, subs, docs, credentials, home, away, back) -> list:
    """Every alert of three thirds of the documents, collected as they come: published
    before `away()` takes the home away, while it is away (the others' ring converged
    without it), and after `back()` (the whole ring converged again)."""
    addresses, r = ring.addresses(), ring.r
    publisher = addresses[0]
    first, second = docs[:20], docs[:40]
    publish(publisher, first, credentials)
    got = collect(subs, addresses, len(expected(subs, first)), credentials)
    away()
    others = [a for a in addresses if a != home.address]
    wait_converged(others, r, timeout=30, credentials=credentials)
    publish(publisher, docs[20:40], credentials)
    got += collect(subs, others, len(expected(subs, second)) - len(got), credentials)
    back()
    wait_converged(addresses, r, timeout=30, credentials=credentials)
    publish(publisher, docs[40:], credentials)
    return got + collect(subs, addresses, len(expected(subs, docs)) - len(got), credentials)


def assert_matchers_once(got, subs, docs) -> None:
    want = expected(subs, docs)
    assert len(want) > 60  # the workload really exercises matching
    assert_exact([(a.subscription_id, a.docno) for a in got], want)
    assert_numbered(got)


def test_a_home_killed_and_restarted_on_the_home_log_loses_and_repeats_nothing(tmp_path):
    docs, queries = live_corpus(60, 150, seed=37, vocab=700)
    data = tmp_path / "data"
    ring = ring_up(
        5, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), engine=ENGINE, data_root=data
    )
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        subs = subscribe(ring.addresses(), queries, credentials, seed=5)
        victim = busiest_home(nodes, subs)
        join = ring.addresses()[0]
        got = through_an_absence(
            ring,
            subs,
            docs,
            credentials,
            victim,
            lambda: kill_hard(victim),
            lambda: nodes.append(restart(victim, join, ring, tmp_path, data / str(victim.port))),
        )
        with Client(join, credentials=credentials) as c:
            stats = c.stats()
    finally:
        stop_processes(nodes, grace=2.0)
    assert_matchers_once(got, subs, docs)
    assert stats.config.home_log and stats.config.log_members == 5
    assert "restored the logs of" in (tmp_path / f"node-{victim.port}.log").read_text()


def test_a_paused_home_is_fenced_when_it_wakes(tmp_path):
    docs, queries = live_corpus(60, 150, seed=41, vocab=700)
    # a busy peer is waited for --call-timeout: this one is not busy, it is stopped
    timing = replace(FAST, call_timeout=3.0)
    ring = ring_up(5, tmp_path / "ring.json", timing=timing, out=io.StringIO(), engine=ENGINE)
    nodes, credentials = list(ring.nodes), ring.credentials()
    paused = None
    try:
        subs = subscribe(ring.addresses(), queries, credentials, seed=6)
        paused = busiest_home(nodes, subs)
        pid = paused.pid
        got = through_an_absence(
            ring,
            subs,
            docs,
            credentials,
            paused,
            lambda: os.kill(pid, signal.SIGSTOP),
            lambda: os.kill(pid, signal.SIGCONT),
        )
    finally:
        if paused is not None:
            os.kill(paused.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM
        stop_processes(nodes, grace=2.0)
    assert_matchers_once(got, subs, docs)
