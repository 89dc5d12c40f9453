"""Free ports for a ring's nodes: any the kernel gives, or those of $CQENGINE_PORT_RANGE,
which keeps rings started side by side on one machine (the suite's workers) apart."""

import io
import socket

import pytest
from support.command_line import assert_one_line_error, cqengine

from cqengine.live import ports
from cqengine.live.ports import PORT_RANGE, free_ports
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes
from cqengine.live.ringfile import RingError


def a_free_range(n: int) -> range:
    """n consecutive ports no one holds now: of this worker's own range in a parallel run
    (support.parallel), else below the kernel's ephemeral ones."""
    within = ports.port_range() or range(20_000, 32_000)
    for lo in range(within.start, within.stop - n, n):
        span = range(lo, lo + n)
        if all(ports.port_free(p) for p in span):
            return span
    pytest.skip(f"no {n} consecutive free ports")


@pytest.fixture
def span(monkeypatch):
    span = a_free_range(12)
    monkeypatch.setenv(PORT_RANGE, f"{span.start}-{span.stop - 1}")
    monkeypatch.setattr(ports, "_cursor", {})
    return span


def test_ports_come_from_the_range_and_none_twice_before_it_is_used_up(span):
    first = free_ports(5)
    second = free_ports(5)
    assert set(first + second) <= set(span)
    assert len(set(first + second)) == 10  # a port given may not be listened on yet


def test_a_port_someone_holds_and_an_excluded_one_are_passed_over(span):
    with socket.socket() as held:
        held.bind(("127.0.0.1", span[3]))
        held.listen()
        got = [p for _ in range(4) for p in free_ports(3, exclude=[span[5]])]
    assert span[3] not in got and span[5] not in got
    assert set(got) == set(span) - {span[3], span[5]}  # round the range, every other port


def test_a_range_too_small_for_the_ports_wanted_is_an_error(span):
    with pytest.raises(RingError, match=f"12 of the 13 ports wanted are free in \\${PORT_RANGE}"):
        free_ports(13)


@pytest.mark.parametrize(
    "spec,says",
    [("7000", "must be LO-HI"), ("a-b", "must be LO-HI"), ("9000-8000", "not a range")],
)
def test_a_bad_range_is_refused_in_one_line(monkeypatch, tmp_path, spec, says):
    monkeypatch.setenv(PORT_RANGE, spec)
    with pytest.raises(RingError, match=says):
        free_ports(1)
    proc = cqengine("ring", "up", "-n", 1, "--ring-file", tmp_path / "ring.json")
    assert_one_line_error(proc, PORT_RANGE, says)


def test_ring_up_puts_its_nodes_in_the_range(span, tmp_path, fast):
    ring = ring_up(2, tmp_path / "ring.json", timing=fast, out=io.StringIO())
    try:
        assert {e.port for e in ring.nodes} <= set(span)
    finally:
        stop_processes(ring.nodes, grace=1.0)
