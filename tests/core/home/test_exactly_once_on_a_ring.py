"""A document published again, through another DN or after its alerts were taken, is
matched again but alerted once (a mailbox knows what it has seen)."""

from __future__ import annotations

import pytest
from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_all, workload

from cqengine.evaluation.measuring.sim import EngineSimulator


@pytest.mark.parametrize(
    "strategy,resolution,nodes", [("ri", "td", 1), ("mhi", "bf", 10), ("sap-mhi", "td", 33)]
)
def test_publishing_a_docno_again_alerts_once(strategy, resolution, nodes):
    wl = workload(0)
    sim = EngineSimulator(
        nodes,
        make_settings(wl, strategy=strategy, resolution=resolution, piggyback=1, seed=6),
        seed=6,
    )
    subs = subscribe_all(sim, wl)
    docs = wl.docs[:10]
    addresses = sorted(sim.engines)
    for d in docs:  # the same document twice, through different publishing nodes
        sim.publish(d.docno, d.text, d.title, via=addresses[0])
        sim.publish(d.docno, d.text, d.title, via=addresses[-1])
    first = sim.alerts()
    assert_exact(first, wl.oracle(subs, [d.docno for d in docs]))
    for d in docs:  # and again later, after the alerts were taken
        report = sim.publish(d.docno, d.text, d.title)
        assert report.matches == len(wl.oracle(subs, [d.docno]))  # matched again, not alerted
    assert sim.alerts() == []
