"""A ring's identity (chord.live.gate): a node names its ring on every call to another node, and
a node of another ring refuses the call, so that two rings never merge; a caller takes the
refusing node for gone. Calls that name no ring (a client's, an earlier version's node's)
are answered as before."""

import asyncio

import pytest
from support.live import engine_node
from support.waiting import eventually_async

from chord.live.grpc_transport import GrpcTransport
from chord.live.server import LiveNode, Timing
from chord.proto import chord_pb2 as pb
from chord.protocol.calls import PeerUnreachable
from cqengine.live.ports import free_ports
from cqengine.proto import cqengine_pb2

QUICK = Timing(stabilize=0.05, fix_fingers=0.1, check_predecessor=0.1, recontact=0.1)


def test_a_node_of_another_ring_refuses_and_is_taken_for_gone():
    async def main():
        node = engine_node(timing=QUICK, identity="b")
        await node.start()
        ours, theirs, anyone = (GrpcTransport(identity=i) for i in ("b", "a", ""))
        try:
            assert await ours.call(node.me, "Ping", pb.Empty()) == pb.Empty()
            assert await anyone.call(node.me, "Ping", pb.Empty()) == pb.Empty()
            with pytest.raises(PeerUnreachable) as refused:
                await theirs.call(node.me, "Ping", pb.Empty())
            assert refused.value.another_ring and refused.value.refused
            # the engine's calls go over one stream per peer, named as it opens
            linked = GrpcTransport(
                table=node.methods, linked=frozenset({"GetConfig"}), identity="a"
            )
            with pytest.raises(PeerUnreachable) as refused:
                await linked.call(node.me, "GetConfig", cqengine_pb2.ConfigRequest())
            assert refused.value.another_ring
            await linked.close()
            assert node.gate.refused["another_ring"] == 2
        finally:
            for t in (ours, theirs, anyone):
                await t.close()
            await node.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 60))


async def ring(identity: str) -> list[LiveNode]:
    """Two nodes of a ring with this identity, converged."""
    first, second = (
        LiveNode("127.0.0.1", port, timing=QUICK, identity=identity) for port in free_ports(2)
    )
    await first.start()
    await second.start(join=first.me.address)
    await eventually_async(
        lambda: first.node.table.successor == second.me == first.node.table.predecessor,
        20,
        f"ring {identity} of two nodes",
    )
    return [first, second]


def members(nodes: list[LiveNode]) -> set[str]:
    """Every node these nodes' tables name."""
    out = set()
    for n in nodes:
        t = n.node.table
        out |= {s.address for s in t.successors} | {t.predecessor.address if t.predecessor else ""}
    return out - {""}


def test_two_rings_that_find_each_other_never_merge_as_halves_of_one_do():
    """After a partition each side forgets the other, and `recontact` asks the nodes it
    lost for its successor there: a ring of its own identity merges with it (the halves of
    a ring), one of another identity is given up at once (a ring started anew at addresses
    the other knew, say). Without the identity the second would merge too."""

    async def main():
        a, other, half = await ring("A"), await ring("B"), await ring("A")
        nodes = a + other + half
        try:
            a[0].node.lost[other[0].me] = [0, 0]  # as after a partition
            await eventually_async(
                lambda: other[0].me not in a[0].node.lost, 20, "ring B's node given up"
            )
            a[0].node.lost[half[0].me] = [0, 0]
            wanted = {n.me.address for n in a + half}
            await eventually_async(
                lambda: members(a + half) == wanted, 30, "the two halves of ring A as one"
            )
            assert members(other) == {n.me.address for n in other}  # ring B is as it was
            assert not members(a + half) & {n.me.address for n in other}
            assert sum(n.gate.refused["another_ring"] for n in other) >= 1
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 120))
