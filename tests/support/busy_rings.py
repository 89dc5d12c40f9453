"""Simulated rings with every message checked (cqengine.core.frame.checks): a ring's whole
busy life with the matcher's alerts, and a small replicated ring, for the tests that count
what was refused or break genuine messages of such rings."""

from __future__ import annotations

from cqengine.core.frame.documents import Document, prepare
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.text.analysis import analyze
from support.oracle import consecutive
from support.workloads import subscribe_all, workload

R = 3
LOG_MEMBERS = 5  # a home log's members: a home and its successor failing leave a majority
K = 2  # piggybacked ids per run
SYNOPSIS_K = 40  # small: the gossiped popular terms change, and entries move


def ring_settings(wl, strategy: str, resolution: str, replicas: int, seed: int, **kw) -> Settings:
    """SAP-MHI without a popular list (its popular terms are gossiped), piggybacking,
    Term Dialogue asking two ids a round, small filters that err."""
    return Settings(
        strategy=strategy,
        resolution=resolution,
        df=wl.df,
        popular=None if strategy == "sap-mhi" else wl.popular,
        piggyback=kw.pop("piggyback", K),
        dialogue_batch=2,
        bloom_bits=128,
        synopsis_k=SYNOPSIS_K,
        reindex_grace=0,
        replicas=replicas,
        seed=seed,
        **kw,
    )


def refused(sim: EngineSimulator) -> int:
    return sum(e.counters["messages_refused"] + e.chord.refused for e in sim.engines.values())


def analyzed(wl, s: Settings) -> list[Document]:
    return [prepare(d.docno, d.text.encode(), d.title, s.max_document_bytes) for d in wl.docs]


def busy_ring(
    strategy: str,
    resolution: str,
    replicas: int,
    seed: int = 3,
    nodes: int = 16,
    corpus_seed: int = 1,
    batch: int = 5,
    piggyback: int = K,
    **kw,
):
    """A ring's whole life, every message checked: queries subscribed through four homes,
    half one by one and half in a batch per home; documents published one by one, then in
    batches through random nodes; gossip rounds (SAP-MHI) and reconciliation rounds
    (replicated) between; a few queries unsubscribed; a node leaving, one joining and
    (replicated) a home and its successor failing. The simulator, the alerts taken and the
    matcher's."""
    wl = workload(corpus_seed)
    s = ring_settings(wl, strategy, resolution, replicas, seed, piggyback=piggyback, **kw)
    sim = EngineSimulator(nodes, s, seed=seed)
    sim.hold(replicas > 1)  # DNs count their reports, as live ones do (and release copies)
    vias = sorted(sim.engines)[:4]  # homes (unreplicated, a subscription stays at its own)
    half = len(wl.queries) // 2
    queries = wl.queries[:half] + tuple(q for i in range(4) for q in wl.queries[half + i :: 4])
    replies = [sim.subscribe(q, via=vias[i % 4]) for i, q in enumerate(queries[:half])]
    for i, via in enumerate(vias):
        replies += sim.subscribe_many(list(wl.queries[half + i :: 4]), via=via)
    subs = {r.subscription_id: analyze(q) for r, q in zip(replies, queries, strict=True)}
    docs = analyzed(wl, s)
    third = len(docs) // 3

    def rounds() -> None:
        if s.gossiped:
            sim.gossip_round()
        if replicas > 1:
            sim.reconcile_round()

    for d in wl.docs[:third]:
        sim.publish(d.docno, d.text, d.title)
    rounds()
    got = sim.alerts()
    gone = {r.subscription_id for r in replies[::7]}
    for r in replies[::7]:
        sim.unsubscribe(r)
    sim.ring.leave(sorted(sim.engines)[6])  # home to no subscription
    # maintenance first: a node joining right after a leave may be pointed at the leaver
    # by a table that still lists it, and then stays alone (the simulator does not retry)
    sim.fail([])
    sim.ring.join("node-new")
    sim.fail([])
    rounds()  # every record on R nodes again before two of them fail
    if replicas > 1:  # a home and its successor crash
        sim.fail(consecutive(sim, vias[1], R - 1))
    else:
        sim.fail([])  # maintenance until the ring is correct again
    rounds()
    for n, i in enumerate(range(third, len(docs), batch)):
        sim.publish_batch(docs[i : i + batch], via=sim.pick())
        if n % 2:
            rounds()
    got += sim.alerts()
    kept = {sub: terms for sub, terms in subs.items() if sub not in gone}
    want = wl.oracle(kept) | wl.oracle(
        {sub: subs[sub] for sub in gone}, [d.docno for d in docs[:third]]
    )
    return sim, got, want


def replicated_ring(strategy: str, resolution: str, seed: int):
    """Sixteen nodes, R copies of every record, DNs counting their reports, and every query
    of a workload subscribed: the workload, settings, simulator and subscriptions."""
    wl = workload(2)
    s = ring_settings(wl, strategy, resolution, R, seed)
    sim = EngineSimulator(16, s, seed=seed)
    sim.hold(True)
    return wl, s, sim, subscribe_all(sim, wl)
