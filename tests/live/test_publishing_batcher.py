"""The node's batcher (cqengine.live.publishing.Batcher) when a publisher gives up: the
others of its batch still get their replies. (A client whose call timed out cancelled its
wait; answering it raised InvalidStateError, and every other document of the batch,
accepted all the same, was answered INTERNAL: issue 56's 2|4 cut.)"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from cqengine.live.publishing import Batcher, Publishing
from cqengine.proto import cqengine_pb2 as pb


class FakeDN:
    """Accepts every document, after the batch is gathered."""

    def __init__(self) -> None:
        self.published: list[str] = []

    def publish_batch(self, docs):
        self.published += [d.docno for d in docs]
        return [pb.PublishReply(accepted=True, terms=len(d.terms)) for d in docs]


def test_a_publisher_that_gave_up_leaves_the_others_of_its_batch_answered():
    dn = FakeDN()
    engine = SimpleNamespace(dn=dn, settings=SimpleNamespace(max_document_bytes=1 << 20))

    async def scenario():
        publishing, given_up = asyncio.Event(), asyncio.Event()

        async def run(op):  # the batch is on its way when the first publisher gives up
            publishing.set()
            await asyncio.wait_for(given_up.wait(), 5)
            return op

        batcher = Batcher(engine, Publishing(linger_ms=20, batch_docs=8), run)
        try:
            gives_up = asyncio.ensure_future(
                batcher.publish([pb.PublishRequest(docno="A", text=b"alpha beta")])
            )
            waits = asyncio.ensure_future(
                batcher.publish([pb.PublishRequest(docno="B", text=b"gamma delta")])
            )
            await asyncio.wait_for(publishing.wait(), 5)  # both gathered, being published
            gives_up.cancel()
            given_up.set()
            (reply,) = await asyncio.wait_for(waits, 5)
            return reply
        finally:
            batcher.task.cancel()
            batcher.analyzer.shutdown()

    reply = asyncio.run(scenario())
    assert isinstance(reply, pb.PublishReply) and reply.accepted, reply
    assert dn.published == ["A", "B"]  # the batch went as gathered
