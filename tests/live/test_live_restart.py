"""Nodes that keep their state in a data directory, on live loopback rings: a node killed
with SIGKILL and restarted from its directory serves its subscriptions and index entries
again, and a whole ring stopped by `ring down` and started by `ring up` comes back with
every subscription; every alert after that is the matcher's, each once."""

from __future__ import annotations

import io
import signal
import sqlite3
from pathlib import Path

import pytest
from support.live import FAST, kill_hard, restart, subscribe
from support.oracle import assert_exact, expected
from support.waiting import eventually
from support.workloads import live_corpus

from chord.protocol.messages import to_ref
from chord.simulation.oracle import RingOracle
from cqengine.demo import collect_alerts
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_down, ring_up
from cqengine.live.ring.convergence import observe, wait_converged
from cqengine.live.ring.processes import stop_processes
from cqengine.live.ringfile import RingError
from cqengine.text.analysis import analyze, term_id


@pytest.fixture(scope="module")
def corpus():
    return live_corpus(60, 150, seed=21, vocab=800)


def publish_and_collect(addresses, subs, docs, credentials):
    with Client(addresses[0], credentials=credentials) as client:
        assert all(
            r.accepted for r in client.publish_many([(d.docno, d.text, d.title) for d in docs])
        )
    return collect_alerts(subs, addresses, credentials=credentials)


def assert_matchers_alerts(got, subs, docs):
    want = expected(subs, docs)
    assert len(want) > 30  # the workload really exercises matching
    assert_exact(got, want)


def test_a_node_killed_and_restarted_from_its_data_serves_its_state_again(corpus, tmp_path):
    docs, queries = corpus
    ring_path = tmp_path / "ring.json"
    data = tmp_path / "data"
    ring = ring_up(4, ring_path, timing=FAST, out=io.StringIO(), data_root=data)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=1)
        stats = {}
        for n in nodes:
            with Client(n.address, credentials=credentials) as c:
                stats[n.address] = c.stats()
        victim = max(nodes[1:], key=lambda n: stats[n.address].index_entries)  # not the bootstrap
        held = stats[victim.address]
        assert held.index_entries > 0 and held.subscriptions > 0
        kill_hard(victim)
        nodes.append(restart(victim, addresses[0], ring, tmp_path, data / str(victim.port)))
        wait_converged(addresses, ring.r, timeout=30, credentials=credentials)
        with Client(victim.address, credentials=credentials) as c:
            again = c.stats()
        assert again.subscriptions == held.subscriptions
        assert again.index_entries == held.index_entries  # its own, none lost
        got = publish_and_collect(addresses, subs, docs, credentials)
    finally:
        stop_processes(nodes, grace=2.0)
    assert_matchers_alerts(got, subs, docs)
    assert "restored" in (tmp_path / f"node-{victim.port}.log").read_text()


def test_a_damaged_directory_is_refused_and_rejoin_empty_refills_the_node(corpus, tmp_path):
    """A node stopped, a page of its data directory overwritten: started again, it stops at
    once with the one-line error naming the remedy; started with --rejoin-empty, its
    directory goes aside and it joins empty at its place, refilled from the copies the
    others hold. Every alert before and after is the matcher's, once."""
    from support.live import wait_gone

    from cqengine.live.datadir import FILE
    from cqengine.live.ring.processes import spawn, wait_serving

    docs, queries = corpus
    data = tmp_path / "data"
    ring = ring_up(4, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), data_root=data)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=9)
        got = publish_and_collect(addresses, subs, docs[:30], credentials)
        victim = nodes[2]
        stop_processes([victim], grace=10.0, how=signal.SIGUSR1)  # as `ring down` stops it
        path = data / str(victim.port) / FILE
        db = sqlite3.connect(path)  # a page in use (the subscriptions'), overwritten
        (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'subscriptions'")
        db.close()
        with open(path, "r+b") as f:
            f.seek((page[0] - 1) * 4096)
            f.write(bytes(range(256)) * 16)
        tls = Path(ring.tls)
        refused = spawn(
            victim.port, addresses[0], ring.r, FAST, tmp_path, data=path.parent, tls=tls
        )
        nodes.append(refused)  # (stopped at the end, should it start after all)
        wait_gone([refused], timeout=20)
        log = (tmp_path / f"node-{victim.port}.log").read_text()
        assert "is damaged" in log and "--rejoin-empty" in log and "Traceback" not in log
        back = spawn(
            victim.port,
            addresses[0],
            ring.r,
            FAST,
            tmp_path,
            node_args=["--rejoin-empty"],
            data=path.parent,
            tls=tls,
        )
        nodes.append(back)
        wait_serving(back, 20, credentials)
        wait_converged(addresses, ring.r, timeout=30, credentials=credentials)
        assert list(data.glob(f"{victim.port}.damaged-*/{FILE}"))  # kept aside
        got += publish_and_collect(addresses, subs, docs[30:], credentials)
    finally:
        stop_processes(nodes, grace=2.0)
    assert_matchers_alerts(got, subs, docs)


def test_ring_down_keeps_the_data_ring_up_brings_it_back_and_purge_removes_it(corpus, tmp_path):
    docs, queries = corpus
    ring_path, data = tmp_path / "ring.json", tmp_path / "data"
    ring = ring_up(4, ring_path, timing=FAST, out=io.StringIO(), data_root=data)
    try:
        subs = subscribe(ring.addresses(), queries, ring.credentials(), seed=2)
    finally:
        out = io.StringIO()
        ring_down(ring_path, out=out)
    assert "their data stays in" in out.getvalue()
    ports = sorted(int(d.name) for d in data.iterdir())
    assert ports == sorted(n.port for n in ring.nodes)

    out = io.StringIO()
    ring = ring_up(4, ring_path, timing=FAST, out=out, data_root=data)
    try:
        assert sorted(n.port for n in ring.nodes) == ports  # each node back at its port
        assert "4 nodes restarted from theirs" in out.getvalue()
        got = publish_and_collect(ring.addresses(), subs, docs, ring.credentials())
    finally:
        stop_processes(ring.nodes, grace=2.0, how=signal.SIGUSR1)
    assert_matchers_alerts(got, subs, docs)

    with pytest.raises(RingError, match="holds the state of 4 nodes"):
        ring_up(2, ring_path, timing=FAST, out=io.StringIO(), data_root=data)
    out = io.StringIO()
    ring_down(ring_path, out=out, purge=True)  # none runs any more: only the data goes
    assert "removed their data" in out.getvalue() and not data.exists()


def test_alerts_for_a_home_that_restarts_wait_at_their_dn_and_arrive_once(tmp_path):
    """Without replicas (--replicas 1): a home killed while documents matching its
    subscriptions are published: their DN tries the alerts again until the home is back
    from its data directory, and the subscriber gets each once. (The home holds none of the
    queries' index entries: unreplicated, while a node is down those are out of reach.)"""
    words = "levee hurricane"
    ring = ring_up(
        4,
        tmp_path / "ring.json",
        timing=FAST,
        out=io.StringIO(),
        data_root=tmp_path / "data",
        engine=["--replicas", "1"],
    )
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        view = observe(ring.addresses(), ring.r, credentials=credentials)
        oracle = RingOracle(to_ref(s.node) for s in view.states.values())
        owners = {oracle.owner(term_id(t)).address for t in analyze(words)}
        home, dn = [n for n in nodes if n.address not in owners][:2]
        with Client(home.address, credentials=credentials) as c:
            subs = [c.subscribe(words) for _ in range(2)]
        kill_hard(home)
        with Client(dn.address, credentials=credentials) as c:
            docs = [(f"D{i}", f"the {words} report", "") for i in range(10)]
            assert all(r.accepted for r in c.publish_many(docs))
        # the DN finds the home gone, and keeps trying
        with Client(dn.address, credentials=credentials) as c:
            eventually(
                lambda: c.stats().alerts_retried,
                30,
                "the DN to try each of the 20 alerts again",
                holds=lambda n: n >= 20,
            )
        data = tmp_path / "data" / str(home.port)
        nodes.append(restart(home, dn.address, ring, tmp_path, data))
        with Client(home.address, credentials=credentials) as c:
            got = []
            for a in c.alerts(subs, timeout=30):
                got.append(a)
                if len(got) == 20:
                    break
        with Client(dn.address, credentials=credentials) as c:
            stats = c.stats()
    finally:
        stop_processes(nodes, grace=2.0)
    assert stats.alerts_retried >= 20 and stats.alerts_dropped == 0
    for s in subs:
        mine = [a for a in got if a.subscription_id == s.subscription_id]
        assert [a.seq for a in mine] == list(range(10))
        assert sorted(a.docno for a in mine) == [f"D{i}" for i in range(10)]


def test_a_node_holding_another_rings_data_is_refused(tmp_path):
    """Every data directory keeps its ring's id: a node of one ring, started to join
    another (of the same certificate authority: their ring files share tls/), is refused
    in one line that names both rings, and changes neither."""
    from support.command_line import assert_one_line_error, cqengine

    from cqengine.live.datadir import stored_ring_id
    from cqengine.live.ring.certificates import node_certificate

    a = ring_up(1, tmp_path / "a.json", timing=FAST, out=io.StringIO(), data_root=tmp_path / "a")
    (node,) = a.nodes
    stop_processes(a.nodes, grace=2.0, how=signal.SIGUSR1)  # stopped, keeping its state
    b = ring_up(1, tmp_path / "b.json", timing=FAST, out=io.StringIO())
    try:
        ring = stored_ring_id(tmp_path / "a" / str(node.port))
        assert ring != 0
        join = ("--join", b.addresses()[0], "--data-dir", tmp_path / "a" / str(node.port))
        tls = ("--tls-dir", tmp_path / "tls", "--tls-name", node_certificate(node.port))
        proc = cqengine("node", "--port", node.port, *join, *tls, timeout=60)
        assert_one_line_error(proc, f"node of ring {ring:016x}", "two rings never merge")
        assert observe(b.addresses(), b.r, credentials=b.credentials()).ok
        assert stored_ring_id(tmp_path / "a" / str(node.port)) == ring
    finally:
        stop_processes(b.nodes, grace=2.0)
