"""A live ring whose data directories' disk fills (a small tmpfs, filled by a file as any
other program would fill it), then has room again: every node refuses what would change
its state, with RESOURCE_EXHAUSTED and "data directory full", says so in Stats and in the
client API's health, serves its streams on, and serves again by itself once space
returns; no alert is lost or shown twice (issue: faults beyond a killed process).

Mounting a tmpfs needs root (as the namespace tests do): skipped otherwise."""

from __future__ import annotations

import io
import os
import subprocess

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.live import FAST, collect, publish, subscribe
from support.oracle import assert_exact, assert_numbered, expected
from support.waiting import eventually
from support.workloads import live_corpus

from chord.live.tls import channel
from cqengine.live.client import Client, ClientError
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

SIZE_MIB, RESERVE_MIB = 48, 4


def health(address: str, credentials) -> str:
    """The client API's health at a node (grpc.health.v1)."""
    with channel(address, credentials) as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service="cqengine.CQEngine"), timeout=5
        )
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def fullness(addresses, credentials) -> list[str]:
    out = []
    for a in addresses:
        with Client(a, credentials=credentials) as c:
            out.append(c.stats().storage_full)
    return out


def test_a_ring_whose_disk_fills_refuses_changes_and_serves_again_once_it_empties(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MIB}m", "tmpfs", str(data)], check=True
    )
    nodes = []
    try:
        docs, queries = live_corpus(40, 80, seed=43, vocab=600)
        ring = ring_up(
            3,
            tmp_path / "ring.json",
            timing=FAST,
            out=io.StringIO(),
            data_root=data,
            node_args=["--disk-reserve", str(RESERVE_MIB)],
        )
        nodes, credentials = list(ring.nodes), ring.credentials()
        addresses = ring.addresses()
        subs = subscribe(addresses, queries, credentials, seed=7)
        publish(addresses[0], docs[:20], credentials)
        got = collect(subs, addresses, len(expected(subs, docs[:20])), credentials)
        filler = data / "filler"
        subprocess.run(  # as another program would fill the disk: up to ENOSPC
            ["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True
        )
        full = eventually(
            lambda: fullness(addresses, credentials),
            30,
            "every node to find its disk full",
            holds=lambda why: all(why),
        )
        assert all("MiB free, below the reserve" in w or "full" in w for w in full), full
        with Client(addresses[1], credentials=credentials) as c:
            with pytest.raises(ClientError) as refused:
                c.subscribe("levee hurricane")
            assert refused.value.code == "RESOURCE_EXHAUSTED"
            assert "data directory full" in str(refused.value)
            with pytest.raises(ClientError) as refused:
                c.publish("NEW-1", "levee hurricane", "")
            assert refused.value.code == "RESOURCE_EXHAUSTED"
        eventually(
            lambda: {health(a, credentials) for a in addresses},
            30,
            "the API NOT_SERVING",
            holds=lambda status: status == {"NOT_SERVING"},
        )
        filler.unlink()  # space returns
        eventually(
            lambda: fullness(addresses, credentials),
            30,
            "every node to serve again",
            holds=lambda why: not any(why),
        )
        eventually(
            lambda: {health(a, credentials) for a in addresses},
            30,
            "the API SERVING again",
            holds=lambda status: status == {"SERVING"},
        )
        with Client(addresses[1], credentials=credentials) as c:
            assert c.stats().calls_refused["storage_full"] >= 2  # counted: those two
        publish(addresses[2], docs[20:], credentials)
        got += collect(subs, addresses, len(expected(subs, docs)) - len(got), credentials)
    finally:
        stop_processes(nodes, grace=2.0)
        subprocess.run(["umount", "-l", str(data)], check=False)
    want = expected(subs, docs)
    assert len(want) > 30
    assert_exact([(a.subscription_id, a.docno) for a in got], want)
    assert_numbered(got)
