"""A node's state digest (cqengine.core.home.stats), seen on a replicated ring."""

from __future__ import annotations

from support.busy_rings import replicated_ring


def test_the_state_digest_sees_what_a_node_holds_and_not_when():
    """Stats.state_digest (the hostile benchmark compares it across refused calls):
    a subscription, an alert or an unsubscription changes it; a reconciliation round of a
    ring already in agreement does not."""
    wl, s, sim, _ = replicated_ring("mhi", "td", 3)
    sim.reconcile_round()

    def digests():
        return {a: e.statistics.state_digest() for a, e in sim.engines.items()}

    steady = digests()
    sim.reconcile_round()
    assert digests() == steady
    sub = sim.subscribe("quokka smile")
    assert digests()[sub.home] != steady[sub.home]
    now = digests()
    sim.publish("DIG-1", "a quokka has a famous smile")
    assert digests()[sub.home] != now[sub.home]  # an alert waits in its mailbox
    now = digests()
    sim.unsubscribe(sub)
    assert digests()[sub.home] != now[sub.home]
