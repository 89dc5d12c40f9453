"""The protocol byte for byte: seeded simulator runs send the very messages they sent when
`golden_ledger.json` was written (issue 40: moving code changes no message).

Each scenario runs the engine's public API on the simulator (subscribing, publishing one
document and batches, unsubscribing, gossip and re-indexing, replication with held batches,
failures, a join and a leave, reconciliation, streams acknowledged) and records, in order,
every message the ring's transport counts: its kind and serialized size. The test compares
a digest of that sequence, the ledger by kind, the alerts and the nodes' counters with the
file. A deliberate change of the protocol rewrites the file:

    python tests/core/test_golden_ledger.py --write
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from chord.protocol.ledger import LocalLedger
from cqengine.core.frame.documents import Document
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_terms
from cqengine.text.analysis import analyze
from cqengine.text.corpus import generate_corpus

GOLDEN = Path(__file__).with_name("golden_ledger.json")


class TraceLedger(LocalLedger):
    """A ledger that also keeps every message, in the order they were sent."""

    def __init__(self) -> None:
        super().__init__()
        self.trace: list[tuple[str, int]] = []

    def record(self, kind: str, nbytes: int) -> None:
        super().record(kind, nbytes)
        self.trace.append((kind, nbytes))


def corpus(seed: int, docs: int = 30, vocab: int = 90, terms: int = 16):
    return list(generate_corpus(docs, seed=seed, vocab_size=vocab, mean_terms=terms))


def queries(docs, n: int, seed: int) -> list[str]:
    """Queries of 1-3 of the corpus's terms, frequent ones mostly, so that many match."""
    rng = random.Random(seed)
    df = Counter(t for d in docs for t in set(analyze(f"{d.title}\n{d.text}")))
    ranked = [t for t, _ in sorted(df.items(), key=lambda p: (-p[1], p[0]))]
    frequent = ranked[: max(4, len(ranked) // 5)]
    out = []
    for _ in range(n):
        pool = frequent if rng.random() < 0.6 else ranked
        out.append(" ".join(rng.sample(pool, min(len(pool), rng.randint(1, 3)))))
    return out


def stats(docs) -> tuple[dict[str, int], frozenset[str]]:
    df = Counter(t for d in docs for t in document_terms(d.text, d.title))
    ranked = [t for t, _ in sorted(df.items(), key=lambda p: (-p[1], p[0]))]
    return dict(df), frozenset(ranked[: max(1, len(ranked) // 10)])


def outcome(sim: EngineSimulator, ledger: TraceLedger, alerts) -> dict:
    trace = "".join(f"{kind} {size}\n" for kind, size in ledger.trace)
    counters: Counter[str] = Counter()
    for e in sim.engines.values():
        counters.update(e.counters)
    return {
        "messages": len(ledger.trace),
        "trace_sha256": hashlib.sha256(trace.encode()).hexdigest(),
        "ledger": {k: [c.messages, c.bytes] for k, c in ledger.snapshot().items()},
        "alerts": len(alerts),
        "alerts_sha256": hashlib.sha256(repr(sorted(alerts)).encode()).hexdigest(),
        "counters": dict(sorted(counters.items())),
    }


def paper(strategy: str, resolution: str, piggyback: int, batch: int) -> dict:
    """The paper's protocol (one copy, each document alone), then unsubscribing."""
    docs = corpus(5)
    df, popular = stats(docs)
    settings = Settings(
        strategy=strategy,
        resolution=resolution,
        piggyback=piggyback,
        dialogue_batch=batch,
        bloom_bits=256,
        df=df,
        popular=popular,
        seed=7,
    )
    ledger = TraceLedger()
    sim = EngineSimulator(24, settings, seed=7, ledger=ledger)
    replies = [sim.subscribe(q) for q in queries(docs, 60, 1)]
    for d in docs[:20]:
        sim.publish(d.docno, d.text, d.title)
    alerts = sim.alerts()
    for reply in replies[::4]:
        sim.unsubscribe(reply)
    for d in docs[20:]:
        sim.publish(d.docno, d.text, d.title)
    return outcome(sim, ledger, alerts + sim.alerts())


def gossiped() -> dict:
    """SAP-MHI learning its popular terms by gossip, re-indexing as they change."""
    docs = corpus(6, docs=36)
    settings = Settings(strategy="sap-mhi", synopsis_k=8, reindex_grace=0, seed=3)
    ledger = TraceLedger()
    sim = EngineSimulator(16, settings, seed=3, ledger=ledger)
    for q in queries(docs, 50, 2):
        sim.subscribe(q)
    alerts = []
    for i, d in enumerate(docs):
        sim.publish(d.docno, d.text, d.title)
        if i % 6 == 5:
            sim.gossip_round()
            alerts += sim.alerts()
    return outcome(sim, ledger, alerts + sim.alerts())


def replicated(resolution: str) -> dict:
    """Three copies, DNs holding batches for their reports: batches, two failures, a join,
    a leave and reconciliation, streams read and acknowledged as they go."""
    docs = corpus(7, docs=40)
    df, popular = stats(docs)
    settings = Settings(
        strategy="mhi", resolution=resolution, piggyback=1, replicas=3, df=df, seed=11
    )
    ledger = TraceLedger()
    sim = EngineSimulator(14, settings, seed=11, ledger=ledger)
    sim.hold(True)
    replies = [sim.subscribe(q) for q in queries(docs, 50, 3)]
    nodes = sorted(sim.engines)

    def batch(part):
        return [Document(d.docno, analyze(f"{d.title}\n{d.text}"), d.title) for d in part]

    sim.publish_batch(batch(docs[:6]), via=nodes[0])
    sim.publish(docs[6].docno, docs[6].text, docs[6].title, via=nodes[1])
    alerts = sim.alerts()
    sim.fail([nodes[3], nodes[4]])
    sim.publish_batch(batch(docs[7:15]), via=nodes[5])
    alerts += sim.alerts()
    sim.unsubscribe(replies[0]) if replies[0].home in sim.engines else None
    sim.ring.join("node-new")
    sim.fail([])  # rounds of maintenance until the ring is correct again
    sim.publish_batch(batch(docs[15:25]), via=nodes[2])
    sim.reconcile_round()
    sim.ring.leave(nodes[7])
    sim.fail([])
    sim.publish_batch(batch(docs[25:]), via=nodes[8])
    sim.reconcile_round()
    return outcome(sim, ledger, alerts + sim.alerts())


def failures() -> dict:
    """Three copies: a DN fails before its batch is announced (its successor takes it
    over), and a QN fails under a batch before it reports (the DN announces it again)."""
    docs = corpus(8, docs=24)
    df, _ = stats(docs)
    settings = Settings(strategy="ri", replicas=3, df=df, seed=13)
    ledger = TraceLedger()
    sim = EngineSimulator(12, settings, seed=13, ledger=ledger)
    sim.hold(True)
    for q in queries(docs, 60, 4):
        sim.subscribe(q)
    nodes = sorted(sim.engines)
    batch = [Document(d.docno, analyze(f"{d.title}\n{d.text}"), d.title) for d in docs]
    sim.ring.run(sim.ring.nodes[nodes[2]], sim.engines[nodes[2]].dn.publish_batch(batch[:12]))
    sim.fail([nodes[2]])  # before anything it announced went out
    alerts = sim.alerts()
    dn = nodes[6]
    sim.ring.run(sim.ring.nodes[dn], sim.engines[dn].dn.publish_batch(batch[12:]))
    sim.ring.drain()  # announced; no QN has resolved yet
    qn = max((n for n, _ in sim.heard if n.me.address != dn), key=lambda n: len(n.index))
    sim.heard = [(n, h) for n, h in sim.heard if n is not qn]
    sim.fail([qn.me.address])
    return outcome(sim, ledger, alerts + sim.alerts())


SCENARIOS = {
    "replicated-failures": failures,
    "paper-mhi-td-k2": lambda: paper("mhi", "td", 2, 1),
    "paper-ri-bf-k0": lambda: paper("ri", "bf", 0, 1),
    "paper-oi-td-k1-batch2": lambda: paper("oi", "td", 1, 2),
    "paper-sap-mhi-bf-k3": lambda: paper("sap-mhi", "bf", 3, 1),
    "gossiped-sap-mhi": gossiped,
    "replicated-td": lambda: replicated("td"),
    "replicated-bf": lambda: replicated("bf"),
}


def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_seeded_run_sends_the_messages_it_always_sent(name):
    want = golden()[name]
    got = SCENARIOS[name]()
    assert got["ledger"] == want["ledger"], "messages or bytes by kind changed"
    assert got["counters"] == want["counters"]
    assert (got["alerts"], got["alerts_sha256"]) == (want["alerts"], want["alerts_sha256"])
    assert got == want, "the same messages, in another order"


def test_the_scenarios_are_not_vacuous():
    g = golden()
    assert set(g) == set(SCENARIOS)
    for name, run in g.items():
        assert run["alerts"] > 20, name
        kinds = set(run["ledger"])
        assert {"Announce", "Matched", "Deliver"} <= kinds, name
    assert "GetBloom" in g["replicated-bf"]["ledger"]
    assert "Gossip" in g["gossiped-sap-mhi"]["ledger"]
    assert {"Replicate", "Reconcile", "Leave"} <= set(g["replicated-td"]["ledger"])
    assert g["gossiped-sap-mhi"]["counters"].get("reindexed", 0) > 0
    failed = g["replicated-failures"]["counters"]
    assert failed["documents_taken_over"] > 0 and failed["batches_announced_again"] > 0


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(json.dumps({n: run() for n, run in SCENARIOS.items()}, indent=1) + "\n")
    print(f"wrote {GOLDEN}")
