"""Links that break while documents flow (chord.live.links): an in-process ring of four engine
nodes keeping three copies, whose every stream between nodes is cut again and again while
batches are announced, resolved, delivered and copied. The calls cut fail as unreachable,
the protocol falls back as for any peer that did not answer, and every alert the matcher
names comes once: none lost, none repeated."""

import asyncio

from support.live import FAST
from support.oracle import assert_exact
from support.waiting import eventually_async
from support.workloads import make_settings, workload

from chord.live.server import LiveNode
from cqengine.core.basis.errors import EngineError
from cqengine.core.frame.documents import prepare
from cqengine.core.node import EngineNode
from cqengine.live.ports import free_ports


def engine_ring(settings) -> list[LiveNode]:
    return [
        LiveNode(
            "127.0.0.1",
            port,
            timing=FAST,
            app=lambda chord, host: EngineNode(chord, settings, host, hold=0.5),
        )
        for port in free_ports(4)
    ]


async def subscribed(node: LiveNode, query: str):
    """Subscribe, trying again (as a client is told to) while the young ring's lookups
    and tables still disagree on who owns a key; bounded."""
    for _ in range(50):
        try:
            return await node.run_op(node.app.placement.subscribe(query))
        except EngineError as e:
            if e.code != "UNAVAILABLE":
                raise
            await asyncio.sleep(0.1)
    raise AssertionError(f"{query!r} not placed in 50 attempts")


def alerts_shown(nodes: list[LiveNode]) -> list[tuple[int, str]]:
    """Every alert a stream may show, at the node that serves its subscription."""
    out = []
    for n in nodes:
        e = n.app
        for sub in e.subscriptions.values():
            if e.serves(sub.key):
                box = sub.mailbox
                out += [(sub.id, d[0]) for d in box.alerts(box.first, box.shown)]
    return out


def test_streams_cut_again_and_again_mid_batch_lose_and_repeat_no_alert():
    wl = workload(1)
    settings = make_settings(wl, replicas=3)

    async def main():
        nodes = engine_ring(settings)
        try:
            await nodes[0].start()
            for n in nodes[1:]:
                await n.start(join=nodes[0].me.address)
            ring = sorted(nodes, key=lambda n: n.me.id)
            want = [(ring[i - 1].me, ring[(i + 1) % 4].me) for i in range(4)]
            await eventually_async(
                lambda: [(n.node.table.predecessor, n.node.table.successor) for n in ring],
                10,
                "each node's neighbours the ones beside it in the ring",
                holds=lambda got: got == want,
            )
            subs = {}
            for i, q in enumerate(wl.queries):
                reply = await subscribed(nodes[i % 4], q)
                subs[reply.subscription_id] = list(reply.terms)
            docs = [prepare(d.docno, d.text.encode(), d.title, 1 << 20) for d in wl.docs]
            batches = [docs[i : i + 8] for i in range(0, len(docs), 8)]
            cuts = [0]

            async def cut_links() -> None:
                while cuts[0] < 6:  # a cut at a time, each while calls are on their way
                    await asyncio.sleep(0.002)
                    for n in nodes:
                        for link in list(n.transport._links.values()):
                            if link.waiting and cuts[0] < 6:
                                cuts[0] += 1
                                link.close()
                                await asyncio.sleep(0.05)

            cutter = asyncio.ensure_future(cut_links())
            try:
                await asyncio.gather(
                    *(
                        nodes[i % 4].run_op(nodes[i % 4].app.dn.publish_batch(b))
                        for i, b in enumerate(batches)
                    )
                )
                await eventually_async(
                    lambda: sum(n.app.reports.in_flight() for n in nodes),
                    30,
                    "every batch through",
                    holds=lambda left: left == 0,
                )
            finally:
                cutter.cancel()
            assert cuts[0] > 0  # streams were cut while calls were on them
            want = wl.oracle(subs, [d.docno for d in wl.docs])
            await eventually_async(
                lambda: set(alerts_shown(nodes)),
                30,
                "every alert shown",
                holds=lambda got: got == want,
            )
            assert_exact(alerts_shown(nodes), want)
            assert sum(n.app.counters["dropped:home_unreachable"] for n in nodes) == 0
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(asyncio.wait_for(main(), 120))
