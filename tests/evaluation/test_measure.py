"""The measurement observer (cqengine.evaluation.measuring.measure) counts what shadows would send,
and measuring changes nothing the nodes do."""

from __future__ import annotations

from collections import Counter

import pytest
from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_all, workload

from cqengine.evaluation.measuring.measure import Shadows
from cqengine.evaluation.measuring.sim import EngineSimulator


def publish_all(sim: EngineSimulator, wl) -> tuple[Counter, Counter]:
    """Publish every document: the ledger's growth by (kind, messages|bytes), and the
    echoes counted by (kind, messages|bytes)."""
    total, echoed = Counter(), Counter()
    for d in wl.docs:
        report = sim.publish(d.docno, d.text, d.title)
        for k, c in report.kinds.items():
            total[k, "messages"] += c.messages
            total[k, "bytes"] += c.bytes
        for name, n in report.counters.items():
            what, _, kind = name.partition(":")
            if what in ("echo", "echo_bytes"):
                echoed[kind, "messages" if what == "echo" else "bytes"] += n
    return total, echoed


@pytest.mark.parametrize("resolution,shadow", [("td", "bf"), ("bf", "td")])
def test_a_shadow_resolution_counts_what_it_would_send_alone_and_agrees(resolution, shadow):
    """Resolving by both methods (how experiments measure both in one pass) counts, as
    echoes under SHADOW: kinds, exactly the resolution messages a ring of the shadow
    method sends, and the ring sends exactly what it sends unobserved. 64-bit filters
    make the Bloom side need dialogue too."""
    wl = workload(1)
    kinds = {}
    for res, sh in ((resolution, shadow), (resolution, ""), (shadow, "")):
        sim = EngineSimulator(
            9,
            make_settings(wl, strategy="mhi", resolution=res, bloom_bits=64, piggyback=1, seed=4),
            seed=4,
            observer=Shadows(sh) if sh else None,
        )
        subs = subscribe_all(sim, wl)
        total, echoed = publish_all(sim, wl)
        assert_exact(sim.alerts(), wl.oracle(subs))
        assert sim.tally["shadow_disagreements"] == 0
        assert sh or not echoed  # only a shadow is counted without being sent
        kinds[res, sh] = total, echoed
    (both, echoed), tag = kinds[resolution, shadow], shadow + ":"
    assert both == kinds[resolution, ""][0]
    alone = {
        k: v
        for k, v in kinds[shadow, ""][0].items()
        if k[0].split(".")[0] in ("TermDialogue", "GetBloom")
    }
    assert all(k[0].startswith(tag) for k in echoed)
    assert {(k[0][len(tag) :], k[1]): v for k, v in echoed.items()} == alone
    assert alone[("TermDialogue", "messages")] > 0  # either way the dialogue has work to do


def test_shadow_depths_count_what_shallower_rings_send():
    """A ring piggybacking 3 ids, measuring depths 0 and 1 as shadows: each depth's echoes
    and the announcement bytes it saves are what a ring of that depth sends."""
    wl = workload(3)
    settings = dict(strategy="mhi", resolution="td", seed=5)
    sim = EngineSimulator(
        24, make_settings(wl, piggyback=3, **settings), seed=5, observer=Shadows("", (0, 1))
    )
    subscribe_all(sim, wl)
    deep, echoed = publish_all(sim, wl)
    saved = sim.tally
    for d in (0, 1):
        alone = EngineSimulator(24, make_settings(wl, piggyback=d, **settings), seed=5)
        subscribe_all(alone, wl)
        total, _ = publish_all(alone, wl)
        want = {k: v for k, v in total.items() if k[0].split(".")[0] == "TermDialogue"}
        assert (
            want
            and {
                (k[0][len(f"k{d}:") :], k[1]): v
                for k, v in echoed.items()
                if k[0].startswith(f"k{d}:")
            }
            == want
        )
        assert (
            deep["Announce", "bytes"] - saved[f"k{d}:announce_bytes_saved"]
            == total["Announce", "bytes"]
        )
    assert sim.tally["shadow_disagreements"] == 0


def test_shadows_a_ring_cannot_measure_are_refused():
    s = make_settings(workload(1), resolution="td", piggyback=3).validate()
    with pytest.raises(ValueError, match="other than td"):
        Shadows("td").check(s)
    with pytest.raises(ValueError, match="other than td"):
        Shadows("xx").check(s)
    for depths in ((3,), (1, 1), (-1,)):
        with pytest.raises(ValueError, match="below the piggyback depth 3"):
            Shadows("", depths).check(s)
    Shadows("bf", (0, 2)).check(s)
