"""A DN's alert batches seen through a simulated ring: one batch per home once every report
of a batch is in, or when its hold runs out; homes that cannot be reached tried again;
every alert lost counted with why."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from support.oracle import assert_exact
from support.workloads import Workload, make_settings, subscribe_all, workload

from chord.protocol.calls import PeerUnreachable
from chord.protocol.routing import NodeRef
from cqengine.core.basis import limits
from cqengine.core.frame.documents import prepare
from cqengine.evaluation.measuring.sim import EngineSimulator


def holding_ring(wl: Workload, hold: float, **kw) -> tuple[EngineSimulator, list]:
    """A simulated ring whose DNs count their batches' reports (as live nodes do), with the
    shell's timers kept to be fired by hand."""
    sim = EngineSimulator(12, make_settings(wl, seed=2, **kw), seed=2)
    for e in sim.engines.values():
        e.reports.hold = hold
    return sim, hand_timers(sim)


def hand_timers(sim: EngineSimulator) -> list:
    """The ring's timers (seconds, fn), kept for the test to fire by hand: the simulator
    fires none of them."""
    timers: list = []
    for e in sim.engines.values():
        e.ctx.host = replace(e.ctx.host, later=lambda seconds, fn: timers.append((seconds, fn)))
    return timers


def deliveries(sim: EngineSimulator) -> int:
    c = sim.ring.ledger.snapshot().get("Deliver")  # requests only (total() counts replies)
    return c.messages if c else 0


def batches(wl: Workload, size: int) -> list[list]:
    docs = [prepare(d.docno, d.text.encode(), d.title, 10_000) for d in wl.docs[:24]]
    return [docs[i : i + size] for i in range(0, len(docs), size)]


@pytest.mark.parametrize("strategy,resolution", [("ri", "td"), ("mhi", "bf"), ("oi", "td")])
def test_a_dn_delivers_one_alert_batch_per_home_once_every_report_is_in(strategy, resolution):
    """A DN counts the reports of each batch by the shares its announcement tree divided:
    it delivers one alert batch per home node when the last is in, long before its hold
    runs out, and exactly the matcher's alerts."""
    wl = workload(1)
    sim, timers = holding_ring(wl, 30.0, strategy=strategy, resolution=resolution)
    subs = subscribe_all(sim, wl)
    homes = {r: e.me.address for e in sim.engines.values() for r in e.subscriptions}
    want = wl.oracle(subs, [d.docno for d in wl.docs[:24]])
    for i, batch in enumerate(batches(wl, 8)):
        before = deliveries(sim)
        sim.publish_batch(batch, via=f"node-{i}")
        docnos = {d.docno for d in batch}
        alerted_homes = {homes[s] for s, docno in want if docno in docnos} - {f"node-{i}"}
        assert deliveries(sim) - before == len(alerted_homes)  # a DN's own: no message
    assert all(not e.reports.gathering for e in sim.engines.values())  # none held: no timer needed
    assert len(timers) == 3
    assert_exact(sim.alerts(), want)


def test_a_dn_whose_reports_do_not_all_come_delivers_when_its_hold_runs_out():
    """A node that returns no share (one counted out, or failed) leaves its DN's batch
    incomplete: the DN holds what came until its timer fires or it stops (flush), and then
    delivers it; later reports are delivered as they come. No alert is lost or doubled."""
    wl = workload(1)
    sim, timers = holding_ring(wl, 30.0, strategy="ri")
    subs = subscribe_all(sim, wl)
    shirker = sim.engines["node-5"]
    announce = shirker.handlers["Announce"]

    def keep_no_share(msg):
        msg.share = 0  # its report brings nothing back: the batch stays incomplete
        return announce(msg)

    shirker.handlers["Announce"] = keep_no_share
    held = [e for e in sim.engines.values() if e is not shirker]
    for i, batch in enumerate(batches(wl, 12)):
        sim.publish_batch(batch, via=held[i].me.address)
    assert all(e.reports.gathering for e in held[:2])  # no batch has every report in
    timers[0][1]()  # one hold runs out
    held[1].flush()  # the other DN stops
    sim.settle()
    assert not any(e.reports.gathering for e in sim.engines.values())
    assert_exact(sim.alerts(), wl.oracle(subs, [d.docno for d in wl.docs[:24]]))


def dropped_by(sim: EngineSimulator) -> Counter:
    """Alerts lost ring-wide, by why (Stats.dropped_by), checked against the total."""
    out: Counter = Counter()
    for e in sim.engines.values():
        stats = e.stats(sim.ring.ledger)
        assert stats.alerts_dropped == sum(stats.dropped_by.values())
        out.update(dict(stats.dropped_by))
    return out


def test_every_lost_alert_is_counted_with_why(monkeypatch):
    """A home that cannot be reached, a mailbox that overflows and a DN that no longer holds
    the document each lose alerts, and each count them under their own reason."""
    wl = workload(1)
    docs = wl.docs[:12]

    sim = EngineSimulator(12, make_settings(wl, strategy="ri", seed=2), seed=2)
    subs = subscribe_all(sim, wl)
    want = wl.oracle(subs, [d.docno for d in docs])
    home = {sid: e.me.address for e in sim.engines.values() for sid in e.subscriptions}
    gone = max(sim.engines, key=lambda a: sum(home[s] == a for s, _ in want))
    full_sub = max(subs, key=lambda s: sum(sid == s for sid, _ in want))
    sim.engines[home[full_sub]].subscriptions[full_sub].mailbox.limit = 1
    sim.ring.transport.unregister(gone)  # its subscribers' alerts cannot reach it
    for d in docs:
        sim.publish(d.docno, d.text, d.title, via=next(a for a in sorted(sim.engines) if a != gone))
    lost = dropped_by(sim)
    assert lost["home_unreachable"] == sum(home[s] == gone for s, _ in want)
    assert lost["mailbox_full"] == sum(s == full_sub for s, _ in want) - 1 > 0

    monkeypatch.setattr(limits, "DOC_CACHE", 0)  # a DN forgets each document at once
    sim = EngineSimulator(12, make_settings(wl, strategy="ri", seed=2), seed=2)
    subscribe_all(sim, wl)
    for d in docs:
        sim.publish(d.docno, d.text, d.title)
    assert dropped_by(sim)["document_gone"] > 0 and sim.alerts() == []


def test_a_dn_tries_an_unreachable_home_again_and_loses_nothing_if_it_comes_back():
    """Alert batches for a home that does not answer are tried again on the DN's timer,
    each wait twice the last; a home back in time gets every alert once, and one that never
    comes back has them counted as lost, once `hold` has passed."""
    wl = workload(1)
    docs = wl.docs[:12]
    for comes_back in (True, False):
        sim = EngineSimulator(12, make_settings(wl, strategy="ri", seed=2), seed=2)
        subs = subscribe_all(sim, wl)
        want = wl.oracle(subs, [d.docno for d in docs])
        home = {sid: e.me.address for e in sim.engines.values() for sid in e.subscriptions}
        gone = max(sim.engines, key=lambda a: sum(home[s] == a for s, _ in want))
        lost = sum(home[s] == gone for s, _ in want)
        for e in sim.engines.values():
            e.reports.hold = 4.0
        timers = hand_timers(sim)
        deliver = sim.engines[gone].handlers["Deliver"]

        def down(batch, gone=gone):  # the home does not answer alerts (its index still does)
            raise PeerUnreachable(NodeRef(0, gone), "restarting")

        sim.engines[gone].handlers["Deliver"] = down
        via = next(a for a in sorted(sim.engines) if a != gone)
        for d in docs:
            sim.publish(d.docno, d.text, d.title, via=via)
        retried = sum(e.stats(sim.ring.ledger).alerts_retried for e in sim.engines.values())
        assert retried >= lost > 0
        waits = []
        while timers:
            if comes_back and len(waits) == 2:
                sim.engines[gone].handlers["Deliver"] = deliver
            seconds, fn = timers.pop(0)
            waits.append(seconds)
            fn()
            sim.settle()
        dropped = dropped_by(sim)
        if comes_back:
            assert_exact(sim.alerts(), want)
            assert not dropped
        else:
            assert dropped == {"home_unreachable": lost}
            # retries after waits doubling to 4 s in all (4.0: each batch's own hold)
            assert sorted(set(waits)) == [0.25, 0.5, 1.0, 2.0, 4.0]
