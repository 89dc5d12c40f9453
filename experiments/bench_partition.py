"""Partitions and pauses, tried as an operator would: is every alert owed shown, once, under
one number?

Each scenario starts a fresh ring of --nodes nodes, one per host, each host a network
namespace (experiments/netns_ring.py), with mutual TLS, data directories and
`--call-timeout 5`. Text subscriptions (3-4 consecutive words of a document, as
bench_live's `text`) are made through every node; subscribers read the raw stream of
whichever node serves each home key (every alert logged as it came, repeats included) and
acknowledge as they go. Documents are published before the fault, during it on both sides,
and after it. The scenarios:

- `cut-3-3`, `cut-2-4`: the hosts on two switches whose link is pulled for --cut seconds
  (packets dropped silently), then put back;
- `pause`: the node homing the most subscriptions stopped (SIGSTOP) for --pause seconds,
  then continued.

Per scenario: alerts owed for the documents accepted (the matcher's), shown, lost (owed and
never shown), shown twice (a document under two numbers), numbers naming two documents,
gaps in a subscription's numbers, alerts the homes held for want of a majority, documents
sent again after the heal; and how long the alerts of documents published during the fault
waited from publish to stream, beside those published before it.

    sudo python experiments/bench_partition.py [--nodes 6] [--subscriptions 300]
        [--docs 240] [--cut 20] [--pause 10] [--scenarios cut-3-3,cut-2-4,pause]
        [--home-log on] [--name bench_partition]

Needs root and `ip netns`. Writes experiments/results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from inputs import workload_queries
from netns_ring import Agent, Hosts, certificates, node_command, stop, tail

from cqengine.core.basis import limits
from cqengine.evaluation.setup.matcher import document_terms, matches
from cqengine.text.corpus import generate_corpus

RESULTS = Path(__file__).resolve().parent / "results"
SPLITS = {"cut-3-3": 3, "cut-2-4": 4}  # hosts on the first switch; the rest on the second


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def wait(what: str, check, timeout: float, interval: float = 0.3):
    """Until check() is truthy (its value), or fail loudly after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Scenario:
    """A ring over namespace hosts, its agents and its nodes' processes."""

    def __init__(self, name: str, args, work: Path) -> None:
        self.name, self.args, self.work = name, args, work
        self.hosts = Hosts(args.nodes, SPLITS.get(name))
        self.logs = work / "logs"
        self.logs.mkdir(parents=True)
        self.procs: list[subprocess.Popen] = []
        self.agents: list[Agent] = []
        self.tls = str(work / "tls")

    def start(self) -> None:
        h, args = self.hosts, self.args
        h.make()
        for i, ns in enumerate(h.names, 1):
            self.agents.append(Agent(ns, self.logs / f"agent-{i}.log"))
            self.procs.append(self.agents[-1].proc)
        certificates(Path(self.tls), h.addresses)
        a0 = self.agents[0]
        self.nodes = [
            f"{host}:{agent('ports', host, 1)[0]}" for agent, host in zip(self.agents, h.addresses)
        ]
        engine = ["--reconcile", "0.5", "--home-log", args.home_log]
        for i, address in enumerate(self.nodes):
            host, port = address.rsplit(":", 1)
            join = None if i == 0 else self.nodes[0]
            cmd = node_command(
                h.names[i], host, int(port), join, self.work / port, Path(self.tls), engine
            )
            with open(self.logs / f"node-{address}.log", "ab") as log:
                self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
            if i == 0:
                wait("the first node", lambda a=address: a0("serving", a, self.tls), 30)
        self.one_ring(self.nodes, "the ring to form")
        wait(
            "every range to have its copies",
            lambda: not a0("under_replicated", self.nodes, self.tls),
            60,
        )

    def one_ring(self, among: list[str], what: str, agent: Agent | None = None) -> None:
        agent = agent or self.agents[0]

        def formed():
            v = agent("view", among, self.tls)
            return v["ok"] and not v["down"] and v["rings"] == [tuple(sorted(among))]

        wait(what, formed, 90)

    def stop(self) -> None:
        try:
            stop(self.procs)
        finally:
            self.hosts.remove()


def publish(agent: Agent, via: list[str], docs, tls: str, at: dict) -> list:
    """Each document through the next node of `via`; the accepted ones (their publish time
    kept in `at`)."""
    out = []
    for i, d in enumerate(docs):
        t = time.time()
        (ok,) = agent("publish", via[i % len(via)], [(d.docno, d.text, d.title)], tls)
        if ok:
            at[d.docno] = t
            out.append(d)
    return out


def run(name: str, args, docs, queries) -> dict:
    with tempfile.TemporaryDirectory(prefix="cqe-partition-") as tmp:
        s = Scenario(name, args, Path(tmp))
        try:
            return _run(s, args, docs, queries)
        finally:
            s.stop()
            for log in sorted(s.logs.glob("node-*.log")):
                say(f"--- {log.name}\n{tail(log, 3)}")
            if args.logs:
                shutil.copytree(s.logs, Path(args.logs) / name, dirs_exist_ok=True)


def _run(s: Scenario, args, docs, queries) -> dict:
    say(f"{s.name}: {args.nodes} nodes in namespaces")
    s.start()
    a0, tls, nodes = s.agents[0], s.tls, s.nodes
    subs = a0("subscribe", nodes, queries, tls, timeout=300)
    a0("streams_start", subs, nodes, tls)
    quarter = len(docs) // 4
    before, during, after = docs[:quarter], docs[quarter : 3 * quarter], docs[3 * quarter :]
    at: dict[str, float] = {}
    accepted = publish(a0, nodes, before, tls, at)
    fault_began = time.time()
    if s.name in SPLITS:
        split = SPLITS[s.name]
        sides = [(s.agents[0], nodes[:split]), (s.agents[-1], nodes[split:])]
        s.hosts.apart(True)
        say(f"{s.name}: cut {split}|{args.nodes - split}")
        length = args.cut
    else:
        homes = Counter(x.home for x in subs)
        paused = nodes.index(homes.most_common(1)[0][0])
        others = [n for i, n in enumerate(nodes) if i != paused]
        sides = [(a0, others)]
        os.kill(s.procs[args.nodes + paused].pid, signal.SIGSTOP)
        say(f"{s.name}: {nodes[paused]} paused, homing {homes.most_common(1)[0][1]} subscriptions")
        length = args.pause
    rounds, inside = 4, []
    for r in range(rounds):  # documents published on every side while the fault lasts
        for k, (agent, via) in enumerate(sides):
            part = during[r * len(sides) + k :: rounds * len(sides)]
            inside += publish(agent, via, part, tls, at)
        time.sleep(max(0.0, fault_began + (r + 1) * length / rounds - time.time()))
    if s.name in SPLITS:
        s.hosts.apart(False)
    else:
        os.kill(s.procs[args.nodes + paused].pid, signal.SIGCONT)
    healed = time.time()
    say(f"{s.name}: healed after {healed - fault_began:.1f} s")
    s.one_ring(nodes, "one ring again")
    accepted += inside + publish(a0, nodes, after, tls, at)
    terms = {x.subscription_id: x.terms for x in subs}
    owed = matches(terms, {d.docno: document_terms(d.text, d.title) for d in accepted})
    # a publish call that timed out may yet have been accepted: its alerts may come
    unacknowledged = matches(
        terms, {d.docno: document_terms(d.text, d.title) for d in docs if d.docno not in at}
    )
    a0("quiet", nodes, tls, timeout=60)
    deadline = time.monotonic() + args.settle  # the last alerts on their way to the streams
    while time.monotonic() < deadline and not owed <= a0("streams_shown"):
        time.sleep(1.0)
    # the DNs that found the other side again send their batches of the while again after
    # APART_SETTLE: the streams read on until those are through (nothing may show twice)
    time.sleep(3 * limits.APART_SETTLE)
    a0("quiet", nodes, tls, timeout=60)
    time.sleep(2.0)
    streamed = a0("streams_stop")
    counters = a0("counters", nodes, tls)
    result, got = report(streamed, owed | unacknowledged, at, {d.docno for d in inside}, counters)
    result.update(
        fault_seconds=round(healed - fault_began, 1),
        documents_published=len(docs),
        documents_acknowledged=len(at),
        alerts_owed_of_acknowledged_documents=len(owed),
        lost=len(owed - got),
        lost_examples=sorted(owed - got)[:5],
        alerts_of_unacknowledged_documents_shown=len(unacknowledged & got),
    )
    return result


def report(streamed, owed, at, inside, counters) -> tuple[dict, set]:
    """What the streams showed against what is owed (`owed`: every alert that may come)."""
    log = streamed["log"]
    first: dict[tuple[int, str], float] = {}
    numbers: dict[tuple[int, int], set[str]] = defaultdict(set)
    under: dict[tuple[int, str], set[int]] = defaultdict(set)
    for sub, seq, docno, when in log:
        first.setdefault((sub, docno), when)
        numbers[(sub, seq)].add(docno)
        under[(sub, docno)].add(seq)
    got = set(first)
    seqs: dict[int, set[int]] = defaultdict(set)
    for sub, seq in numbers:
        seqs[sub].add(seq)
    waits = {
        "during": sorted(first[a] - at[a[1]] for a in got if a[1] in inside and a[1] in at),
        "outside": sorted(first[a] - at[a[1]] for a in got if a[1] not in inside and a[1] in at),
    }
    return {
        "shown": len(got & owed),
        "shown_not_owed": len(got - owed),
        "shown_not_owed_examples": sorted(got - owed)[:5],
        "shown_twice": sum(1 for s in under.values() if len(s) > 1),
        "numbers_naming_two_documents": sum(1 for d in numbers.values() if len(d) > 1),
        "subscriptions_with_gaps": sum(1 for v in seqs.values() if v != set(range(len(v)))),
        "messages_repeated_on_the_wire": len(log) - len(set((a, b, c) for a, b, c, _ in log)),
        "alerts_owed_of_documents_published_during": len({a for a in owed if a[1] in inside}),
        "alerts_held_by_homes": sum(c["held"] for c in counters.values()),
        "documents_sent_again": sum(c["sent_again"] for c in counters.values()),
        "dropped": dict(sum((Counter(c["dropped"]) for c in counters.values()), Counter())),
        "stream_errors": streamed["errors"],
        "seconds_publish_to_stream": {k: quantiles(v) for k, v in waits.items()},
    }, got


def quantiles(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    pick = lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)  # noqa: E731
    return {"n": len(xs), "p50": pick(0.5), "p99": pick(0.99), "max": round(xs[-1], 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=6)
    p.add_argument("--subscriptions", type=int, default=300)
    p.add_argument("--docs", type=int, default=240)
    p.add_argument("--cut", type=float, default=20.0, help="s the link stays pulled")
    p.add_argument("--pause", type=float, default=10.0, help="s the home stays stopped")
    p.add_argument("--settle", type=float, default=60.0, help="s to wait for the last alerts")
    p.add_argument("--scenarios", default="cut-3-3,cut-2-4,pause")
    p.add_argument("--home-log", default="on", choices=("on", "off"))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--name", default="bench_partition")
    p.add_argument("--logs", help="a directory to keep the nodes' and agents' logs in")
    args = p.parse_args()
    if os.geteuid() != 0:
        print("bench_partition: needs root (network namespaces)", file=sys.stderr)
        return 2
    if args.nodes < 6:
        print("bench_partition: --nodes must be at least 6", file=sys.stderr)
        return 2
    docs = list(generate_corpus(args.docs, seed=args.seed, vocab_size=3000, mean_terms=60))
    queries = workload_queries("text", docs, args.subscriptions, args.seed)
    out = {
        "nodes": args.nodes,
        "subscriptions": args.subscriptions,
        "documents": args.docs,
        "home_log": args.home_log,
        "scenarios": {},
    }
    for name in args.scenarios.split(","):
        if name not in (*SPLITS, "pause"):
            print(f"bench_partition: no scenario {name!r}", file=sys.stderr)
            return 2
        out["scenarios"][name] = result = run(name, args, docs, queries)
        say(f"{name}: {json.dumps(result)}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{args.name}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
