"""A ring spread over three hosts, each a network namespace with an address of its own, joined
by a bridge in a fourth namespace (the switch): two nodes per host started with `--host` and
`--advertise` and mutual TLS certificates for those addresses. A subscriber in host 1 and
a publisher in host 2 (clients run inside the namespaces too) get the matcher's alerts.
Then host 3's link is cut (its processes run on): the other hosts form a ring of their own
and serve on, host 3 forms another; when the link comes back the two merge into one ring,
and every document accepted has alerted every subscription the matcher says, each once,
those homed in host 3 included.

On the home log (the default, docs/home-log.md) documents are published on both sides of
the cut: host 3's homes whose logs have no majority there hold what they are
sent, the other side's successors number their keys in a higher epoch, and after the heal
nothing is shown twice or under two numbers. A document published on host 3 while the cut
lasts reaches only the queries host 3 holds copies of until the heal: then its DN, finding
the other side up all along, announces it again (DN.on_found), and every alert owed is
shown, once.

Only the home log is tried here: on copies (`--home-log off`) the node that takes a cut-off
home's key numbers its alerts, and the home back after the heal numbers on from where it
was, so the merge may lose some (the simulator loses 4-10 of 238 alerts in a 2-of-6 cut
every time; this test lost 14-16 now and then). That is what the home log is for.

Needs root and `ip netns`; skipped otherwise. The hosts, their agents (the clients inside
the namespaces) and the nodes' command lines are experiments/netns_ring.py's, shared with
experiments/bench_partition.py. The machine's own network namespace is never changed:
every link and address is made inside the test's namespaces, which are deleted (and every
process stopped by pid) however the test ends.
"""

from __future__ import annotations

import subprocess

import pytest
from netns_ring import Agent, Hosts, certificates, node_command, stop, tail
from support.netns import netns_usable
from support.oracle import assert_exact, assert_numbered, expected
from support.waiting import eventually
from support.workloads import live_corpus

ENGINE = ["--reconcile", "0.5"]  # replicas 3 (the default): each range on 3 nodes


@pytest.fixture(scope="module")
def corpus():
    return live_corpus(90, 150, seed=31, vocab=700)


def assert_once(alerts: list[tuple[int, str, int]], want: set[tuple[int, str]]) -> None:
    class Seq:
        def __init__(self, sub: int, seq: int) -> None:
            self.subscription_id, self.seq = sub, seq

    assert_exact([(s, d) for s, d, _ in alerts], want)
    assert_numbered([Seq(s, q) for s, _, q in alerts])  # 0, 1, 2, ... across the partition


def test_a_ring_over_three_hosts_serves_through_a_cut_link_and_heals(corpus, tmp_path):
    why = netns_usable()
    if why is not None:
        pytest.skip(why)
    docs, queries = corpus
    as_tuples = [(d.docno, d.text, d.title) for d in docs]
    first, second, inside, third = slice(0, 30), slice(30, 50), slice(50, 60), slice(60, 90)
    engine = ENGINE
    hosts, procs, agents = Hosts(), [], []
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        hosts.make()
        for i, ns in enumerate(hosts.names, 1):
            agents.append(Agent(ns, logs / f"agent-{i}.log"))
            procs.append(agents[-1].proc)
        tls = tmp_path / "tls"
        certificates(tls, hosts.addresses)
        sub_agent, pub_agent, cut_agent = agents
        tls_s = str(tls)

        # two nodes per host, at ports free in its namespace
        nodes = []  # (host index, address)
        for i, (agent, host) in enumerate(zip(agents, hosts.addresses), 1):
            nodes += [(i, f"{host}:{p}") for p in agent("ports", host, 2)]
        addresses = [a for _, a in nodes]

        def start(i: int, address: str, join: str | None) -> None:
            host, port = address.rsplit(":", 1)
            data = tmp_path / port
            cmd = node_command(hosts.names[i - 1], host, int(port), join, data, tls, engine)
            with open(logs / f"node-{address}.log", "ab") as log:
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))

        start(*nodes[0], None)
        eventually(lambda: sub_agent("serving", addresses[0], tls_s), 30, "the first node")
        for i, address in nodes[1:]:
            start(i, address, addresses[0])

        def converged(agent: Agent, among: list[str], what: str, timeout: float = 40.0) -> dict:
            return eventually(
                lambda: agent("view", among, tls_s),
                timeout,
                what,
                holds=lambda v: v["ok"] and not v["down"] and v["answer"] == sorted(among),
                interval=0.2,
            )

        converged(sub_agent, addresses, "the six nodes to form one ring")
        eventually(
            lambda: sub_agent("under_replicated", addresses, tls_s),
            30,
            "every range to have its copies",
            holds=lambda missing: not missing,
            interval=0.2,
        )

        # subscribe in host 1 (through nodes on every host: homes everywhere)
        subs = sub_agent("subscribe", addresses, queries, tls_s)
        assert all(s.subscription_id for s in subs)
        host_of = {a: i for i, a in nodes}
        assert {host_of[s.home] for s in subs} == {1, 2, 3}
        others = [s for s in subs if host_of[s.home] != 3]  # homed where the link stays

        # publish in host 2; every alert the matcher's, each once
        alerts = []
        assert all(pub_agent("publish", addresses[2], as_tuples[first], tls_s))
        want = expected(subs, docs[first])
        alerts += sub_agent("collect", subs, addresses, len(want), 30.0, tls_s)
        assert_once(alerts, want)

        # cut host 3's link: hosts 1 and 2 form one ring, host 3 another
        hosts.link(3, up=False)
        majority = [a for i, a in nodes if i != 3]
        cut_off = [a for i, a in nodes if i == 3]
        kept = converged(sub_agent, majority, "hosts 1 and 2 to make a ring without host 3")
        assert kept["rings"] == [tuple(sorted(majority))]
        apart = converged(cut_agent, cut_off, "host 3's nodes to make a ring of their own")
        assert apart["rings"] == [tuple(sorted(cut_off))]

        # hosts 1 and 2 serve on: subscribers homed there get their alerts
        assert all(pub_agent("publish", addresses[2], as_tuples[second], tls_s))
        want_apart = expected(others, docs[second])
        # (announcements that went across the cut first wait out --call-timeout, and the
        # DN's hold, before they go again within the side: under load, up to a minute)
        alerts += sub_agent("collect", others, majority, len(want_apart), 60.0, tls_s, timeout=90.0)
        assert_once(alerts, expected(subs, docs[first]) | want_apart)
        # and host 3 publishes too
        assert all(cut_agent("publish", cut_off[0], as_tuples[inside], tls_s))

        # the link back: one ring again, and nothing accepted is lost
        hosts.link(3, up=True)
        healed = converged(sub_agent, addresses, "the two rings to merge into one", 40.0)
        assert healed["rings"] == [tuple(sorted(addresses))]
        assert all(pub_agent("publish", addresses[3], as_tuples[third], tls_s))
        want_all = expected(subs, docs)
        left = len(want_all) - len(alerts)
        alerts += sub_agent("collect", subs, addresses, left, 40.0, tls_s)
        # host 3's DNs send their batches of the cut again once the rings have merged
        # (limits.APART_SETTLE after they find the other side: the alerts may all be in
        # by then, from index copies host 3 held); what they send adds nothing
        eventually(
            lambda: sum(c["sent_again"] for c in sub_agent("counters", addresses, tls_s).values()),
            40,
            "host 3's DNs to announce their batches of the cut again",
            holds=lambda again: again >= len(docs[inside]),
        )
        sub_agent("quiet", addresses, tls_s, timeout=30.0)
        alerts += sub_agent("collect", subs, addresses, 0, 0.0, tls_s)  # nothing more comes
        counters = sub_agent("counters", addresses, tls_s)
        for address, counts in counters.items():
            print(address, counts)
    finally:
        try:
            stop(procs)
        finally:
            hosts.remove()
        for log in sorted(logs.glob("*.log")):
            print(f"--- {log.name}\n{tail(log)}")
    assert_once(alerts, want_all)
    numbers = {(s, q) for s, _, q in alerts}
    assert len(numbers) == len(alerts)  # no number names two documents
    again = sum(c["sent_again"] for c in counters.values())
    assert again >= len(docs[inside])  # host 3's DNs sent theirs again
