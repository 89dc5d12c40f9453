"""What a simulated engine ring holds, read for checking: every inverted-list entry, the
check that each live subscription is indexed once at its owner, and the state that bad
input must leave as it was."""

from __future__ import annotations

from collections import Counter

from cqengine.evaluation.measuring.sim import EngineSimulator


def index_entries(sim: EngineSimulator):
    """(holding address, key, entry) for every inverted-list entry in the ring."""
    return [
        (a, key, e)
        for a, eng in sim.engines.items()
        for key in eng.index.keys()
        for e in eng.index.get(key)
    ]


def assert_index_consistent(sim: EngineSimulator, homes: dict[int, str]) -> None:
    """Every live subscription indexed exactly once, at the owner of its index id, and nothing
    else."""
    oracle = sim.ring.oracle()
    entries = index_entries(sim)
    for address, key, e in entries:
        assert oracle.owner(key).address == address, f"entry {key:016x} at {address}, not its owner"
        assert e.index_id == key and key in e.term_ids
        assert e.home == homes.get(e.subscription_id), "an entry of no live subscription"
    assert Counter(e.subscription_id for _, _, e in entries) == Counter(homes.keys())
    assert sum(sim.load()) == len(homes)
    assert sum(len(eng.subscriptions) for eng in sim.engines.values()) == len(homes)


def ring_state(sim: EngineSimulator):
    """Each node's subscriptions and inverted lists, the documents published and held, and
    the messages sent: what a refused query or document must leave as it was."""
    return (
        sorted((a, sorted(e.subscriptions)) for a, e in sim.engines.items()),
        [
            (k, [x.subscription_id for x in e.index.get(k)])
            for e in sim.engines.values()
            for k in e.index.keys()
        ],
        sum(e.counters["documents_published"] for e in sim.engines.values()),
        sum(len(e.documents.docs) for e in sim.engines.values()),
        sim.ring.ledger.snapshot(),
    )
