"""Versions (chord.protocol.versions): a node names the protocol it speaks and the oldest it
talks to on every call and as each link opens; a node outside the callee's range is refused
with both ranges in words and taken for gone; a joining node refuses a ring it cannot talk
to."""

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.live import engine_node

from chord.live.grpc_transport import GrpcTransport
from chord.live.server import StartupError
from chord.proto import chord_pb2 as pb
from chord.protocol import versions
from chord.protocol.calls import PeerUnreachable
from chord.protocol.versions import HEADER, OF_ANOTHER_VERSION, Versions
from cqengine.live.service import fetch_config
from cqengine.proto import cqengine_pb2


def test_a_header_reads_back_and_a_node_before_versions_speaks_protocol_one():
    assert Versions.parse(versions.MINE.header()) == versions.MINE
    assert Versions.parse("") == Versions(1, 1)
    for bad in ("x", "2", "1-2", "-1-1", "2-", "٣-1"):
        assert Versions.parse(bad) is None, bad


@given(st.integers(1, 9), st.integers(0, 8), st.integers(1, 9), st.integers(0, 8))
def test_two_nodes_talk_when_each_speaks_what_the_other_still_talks_to(a, da, b, db):
    mine, theirs = Versions(a, max(1, a - da)), Versions(b, max(1, b - db))
    talk = mine.talks_to(theirs)
    assert talk == theirs.talks_to(mine)  # both sides agree
    assert talk == (mine.oldest <= theirs.speaks and theirs.oldest <= mine.speaks)


def speaking(value: str, **kw) -> GrpcTransport:
    """A transport whose calls name this protocol header."""
    t = GrpcTransport(**kw)
    t.metadata = ((HEADER, value),) + tuple(m for m in t.metadata if m[0] != HEADER)
    return t


def test_a_node_speaking_a_protocol_outside_the_range_is_refused_and_taken_for_gone():
    async def main():
        node = engine_node()
        await node.start()
        ours, anyone = GrpcTransport(), GrpcTransport()
        anyone.metadata = None  # a client names no version, and is answered
        future, garbled = speaking("9-9"), speaking("nine")
        earlier = speaking("", identity="")  # a node of a release before versions
        try:
            for t in (ours, anyone, earlier):
                assert await t.call(node.me, "Ping", pb.Empty()) == pb.Empty()
            for t in (future, garbled):
                with pytest.raises(PeerUnreachable) as refused:
                    await t.call(node.me, "Ping", pb.Empty())
                assert refused.value.another_ring and refused.value.refused
            # the engine's calls go over one stream per peer: refused as it opens
            linked = speaking("9-9", table=node.methods, linked=frozenset({"GetConfig"}))
            with pytest.raises(PeerUnreachable):
                await linked.call(node.me, "GetConfig", cqengine_pb2.ConfigRequest())
            await linked.close()
            assert node.gate.refused["version"] == 3
        finally:
            for t in (ours, anyone, future, garbled, earlier):
                await t.close()
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_refusal_names_both_ranges_and_the_remedy(caplog):
    async def main():
        node = engine_node()
        await node.start()
        future = speaking("9-7")
        try:
            with pytest.raises(PeerUnreachable):
                await future.call(node.me, "Ping", pb.Empty())
        finally:
            await future.close()
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))
    said = next(r.getMessage() for r in caplog.records if OF_ANOTHER_VERSION in r.getMessage())
    assert "speaks protocol 9 (talks to 7-9)" in said
    assert f"speaks {versions.MINE}" in said and "one node at a time" in said


def test_getconfig_names_the_nodes_versions_and_a_joiner_refuses_a_ring_it_cannot_talk_to(
    monkeypatch,
):
    async def main():
        node = engine_node()
        await node.start()
        try:
            await fetch_config(node.me.address)  # the same release: joins
            t = GrpcTransport(table=node.methods)
            config = await t.call(node.me, "GetConfig", cqengine_pb2.ConfigRequest())
            await t.close()
            assert (config.protocol, config.oldest_protocol) == (versions.PROTOCOL, versions.OLDEST)
            assert config.software == versions.software()
            monkeypatch.setattr(versions, "MINE", Versions(9, 9))  # a release far ahead
            with pytest.raises(StartupError) as refused:
                await fetch_config(node.me.address)
            assert f"speaks protocol {versions.PROTOCOL}" in str(refused.value)
            assert "speaks protocol 9 (talks to 9-9)" in str(refused.value)
        finally:
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))
