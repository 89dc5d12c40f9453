"""QNs resolving a document in step (the simulator's way) send, and drop when the DN is
gone, what each would resolving alone (a live node's way)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.workloads import (
    RESOLUTIONS,
    SHAPES,
    STRATEGIES,
    make_settings,
    subscribe_all,
    workload,
)

from cqengine.evaluation.measuring.sim import EngineSimulator


def publish_in_step_and_alone(
    strategy, resolution, depth, nodes, corpus_seed, seed, batch, bloom_bits
):
    """Every document's report (ledger growth by kind, counters), then the alerts, for a
    ring whose QNs resolve a document in step (the simulator's way) and one whose QNs
    each resolve alone (a live node's); the last documents are published by a node no
    other can reach, so its QNs' dialogues fail."""
    wl = workload(corpus_seed)
    out = {}
    for in_step in (True, False):
        sim = EngineSimulator(
            nodes,
            make_settings(
                wl,
                strategy=strategy,
                resolution=resolution,
                piggyback=depth,
                dialogue_batch=batch,
                bloom_bits=bloom_bits,
                seed=seed,
            ),
            seed=seed,
        )
        if not in_step:
            for e in sim.engines.values():
                e.qn.gather = None
        subscribe_all(sim, wl)
        unreachable = sorted(sim.engines)[-1]
        rows = []
        for i, d in enumerate(wl.docs):
            if i == len(wl.docs) - 3:
                sim.ring.transport.unregister(unreachable)
            via = unreachable if i >= len(wl.docs) - 3 else None
            r = sim.publish(d.docno, d.text, d.title, via=via)
            rows.append(
                (
                    r.candidates,
                    r.matches,
                    r.alerts,
                    {k: (c.messages, c.bytes) for k, c in r.kinds.items()},
                    r.counters,
                )
            )
        out[in_step] = rows, sorted(sim.alerts())
    return out[True], out[False]


@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(
    nodes=st.integers(1, 48),
    corpus_seed=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**16),
    batch=st.sampled_from([1, 2, 3]),
    depth=st.sampled_from([0, 1, 3]),
    bloom_bits=st.sampled_from([64, 1024]),
)
@example(nodes=1, corpus_seed=0, seed=1, batch=1, depth=0, bloom_bits=64)
def test_qns_resolving_in_step_send_what_each_would_alone(
    strategy, resolution, nodes, corpus_seed, seed, batch, depth, bloom_bits
):
    in_step, alone = publish_in_step_and_alone(
        strategy, resolution, depth, nodes, corpus_seed, seed, batch, bloom_bits
    )
    assert in_step == alone


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_qns_resolving_in_step_drop_what_each_would_alone_when_the_dn_is_gone(resolution):
    in_step, alone = publish_in_step_and_alone("ri", resolution, 1, 12, 1, 5, 1, 64)
    assert in_step == alone
    rows, _ = in_step
    dropped = sum(counters.get("dropped:dn_failed", 0) for *_, counters in rows[-3:])
    assert (
        dropped > 0 and sum(r[2] for r in rows[-3:]) == 0
    )  # the unreachable DN's matches alert no one
    assert sum(r[2] for r in rows[:-3]) > 0
