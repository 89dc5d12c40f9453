"""Publishing seen through a simulated ring: bad documents are refused by their DN and
change nothing, and documents at the limits (the title counted in) are fine."""

from __future__ import annotations

import pytest
from support.ring_contents import ring_state

from cqengine.core.basis.errors import EngineError
from cqengine.core.basis.limits import MAX_DOCNO
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator


@pytest.mark.parametrize(
    "docno,data,code",
    [
        ("BIG-1", ("word " * 41).encode(), "INVALID_ARGUMENT"),  # 205 bytes > 200
        ("BIG-2", ("\u00e9" * 101).encode("utf-8"), "INVALID_ARGUMENT"),  # 101 chars, 202 bytes
        ("BAD-1", b"\xff\xfe bad", "INVALID_ARGUMENT"),
        ("BAD-2", b"ok text " + b"\xc3", "INVALID_ARGUMENT"),  # truncated sequence
        ("", b"fine text", "INVALID_ARGUMENT"),
        ("   ", b"fine text", "INVALID_ARGUMENT"),
        ("X" * (MAX_DOCNO + 1), b"fine text", "INVALID_ARGUMENT"),
    ],
)
def test_bad_documents_are_refused_and_change_nothing(small_ring, docno, data, code):
    sim, _ = small_ring
    before = ring_state(sim)
    for address in sorted(sim.engines):
        with pytest.raises(EngineError) as err:
            sim.ring.run(sim.ring.nodes[address], sim.engines[address].dn.publish(docno, data, ""))
        assert err.value.code == code
    sim.ring.drain()
    assert ring_state(sim) == before


def test_documents_at_the_limits_are_fine(small_ring):
    sim, _ = small_ring
    text = "word " * 40  # exactly 200 bytes
    assert len(text.encode()) == 200
    assert sim.publish("EDGE-1", text).terms == 1
    assert sim.publish("E" * MAX_DOCNO, "fine").terms == 1
    # no terms at all: accepted, announced to no one
    report = sim.publish("EMPTY-1", "the and of")
    assert report.terms == 0 and report.kinds == {} and report.candidates == 0


def test_the_title_counts_toward_the_document_size_limit():
    sim = EngineSimulator(2, Settings(max_document_bytes=200), seed=0)
    address = sim.pick()
    with pytest.raises(EngineError, match="limit is 200"):
        op = sim.engines[address].dn.publish("T1", b"short text", "headline " * 30)
        sim.ring.run(sim.ring.nodes[address], op)
    assert sum(e.counters["documents_published"] for e in sim.engines.values()) == 0
    assert sim.publish("T2", "short text", "a headline").terms > 0
