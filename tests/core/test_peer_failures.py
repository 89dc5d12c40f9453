"""One peer's failure is one peer's: a peer that answers a call with an error (its disk
full, say) fails that call, as one that does not answer does. It is retried and then
counted; the calls to every other peer go on (chord.protocol.calls.PeerFailed)."""

from __future__ import annotations

import pytest
from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_through_every_node, workload

from cqengine.core.basis.errors import EngineError
from cqengine.evaluation.measuring.sim import EngineSimulator


def failing(sim: EngineSimulator, address: str, method: str) -> list[int]:
    """The node at `address` answers every `method` call with INTERNAL from now on; the
    calls it answered so."""
    handlers = sim.engines[address].handlers  # what the ring's transport calls
    calls: list[int] = []

    def refuse(request):
        calls.append(1)
        raise EngineError("INTERNAL", "database or disk is full")

    handlers[method] = refuse
    return calls


@pytest.mark.parametrize("home_log", [False, True])
def test_a_home_that_fails_its_deliveries_costs_only_its_own_alerts(home_log):
    """A DN's alert batches go one per home node: one home answering every Deliver with
    INTERNAL keeps its own alerts waiting (retried, then counted lost) and delays none of
    the others' (a DN abandoned the rest of its batch at the first such answer)."""
    wl = workload(1)
    settings = make_settings(wl, replicas=3 if home_log else 1, home_log=home_log, seed=3)
    sim = EngineSimulator(6, settings, seed=3)
    sim.hold(True)  # a batch's alerts go one Deliver per home node, as live DNs do
    subs = subscribe_through_every_node(sim, wl)
    vias = sorted(sim.engines)
    broken = max(sim.engines, key=lambda a: len(sim.engines[a].subscriptions))
    homed_there = {s for s in sim.engines[broken].subscriptions}
    calls = failing(sim, broken, "Deliver")
    for i, d in enumerate(wl.docs):
        sim.publish(d.docno, d.text, d.title, via=vias[i % len(vias)])
    want = {(s, docno) for s, docno in wl.oracle(subs) if s not in homed_there}
    got = [(s, docno) for s, docno in sim.alerts() if s not in homed_there]
    assert calls, "the broken home was never asked: the test tests nothing"
    assert_exact(got, want)
    counters = sum((e.counters for e in sim.engines.values()), start=type(sim.tally)())
    lost = counters["dropped:home_unreachable"]
    assert counters["alerts_retried"] > 0 and lost > 0  # tried again, then counted
    owed = sum(1 for s, _ in wl.oracle(subs) if s in homed_there)
    assert lost <= owed
