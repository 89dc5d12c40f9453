"""How a node gathers the documents published through it into batches.

As a Kafka producer (linger.ms, batch.size): documents wait for more until a batch is
full or the linger time since its first has passed; each batch is analyzed in a worker
thread, so that the node's event loop keeps serving meanwhile, and published by the
engine's DN as one (cqengine.core.dn.dn.DN.publish_batch).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from chord.live.meter import Meter
from chord.live.server import StartupError
from cqengine.core.basis.errors import EngineError
from cqengine.core.basis.limits import MAX_BATCH_DOCS
from cqengine.core.frame.documents import Document, prepare
from cqengine.core.node import EngineNode
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.live.publishing")


@dataclass
class Publishing:
    """How a node gathers the documents published through it into batches (as Kafka's
    producer: linger.ms, batch.size): a batch goes when it holds `batch_docs` documents
    or `linger_ms` after its first arrived. As DN it delivers a batch's alerts once every
    node the batch reached has reported, one alert batch per home node."""

    linger_ms: float = 5.0
    batch_docs: int = 64

    def check(self) -> Publishing:
        if self.linger_ms < 0 or not 1 <= self.batch_docs <= MAX_BATCH_DOCS:
            raise StartupError(
                f"--linger-ms must not be negative and --batch-docs must be 1-{MAX_BATCH_DOCS}"
                f" (what other nodes accept in a batch), not {self.linger_ms} and "
                f"{self.batch_docs}"
            )
        return self


def prepare_all(requests: Sequence[pb.PublishRequest], limit: int) -> list[Document | EngineError]:
    """Each request as a document fit to publish, or why it is not (run off the event loop)."""
    out: list[Document | EngineError] = []
    for r in requests:
        try:
            out.append(prepare(r.docno, r.text, r.title, limit))
        except EngineError as e:
            out.append(e)
    return out


def _answer(future: asyncio.Future, reply) -> None:
    """A publisher's reply, unless it gave up waiting (its call cancelled): the others of
    its batch still get theirs."""
    if not future.done():
        future.set_result(reply)


class Batcher:
    """The documents published through this node, gathered into batches: each batch is
    analyzed in a worker thread (the event loop keeps serving meanwhile) and published by
    the engine's DN as one (cqengine.core.dn.dn.DN.publish_batch); the next batch gathers
    meanwhile."""

    def __init__(
        self, engine: EngineNode, publishing: Publishing, run: Callable, meter: Meter | None = None
    ) -> None:
        """`run`: how the node runs an operation (LiveNode.run_op); `meter`: charged the
        analyzer's CPU time ("analysis")."""
        self.engine, self.publishing, self.run, self.meter = engine, publishing, run, meter
        self.queue: list[tuple[pb.PublishRequest, asyncio.Future]] = []
        self.arrived: dict[int, float] = {}  # id(request) -> wall time it reached this node
        self.changed = asyncio.Event()
        # the node's one analysis thread (ClientAPI.SubscribeBatch analyzes queries in it too)
        self.analyzer = ThreadPoolExecutor(1, thread_name_prefix="analyze")
        self.task: asyncio.Task | None = None

    async def publish(
        self, requests: Sequence[pb.PublishRequest]
    ) -> list[pb.PublishReply | EngineError]:
        """Publish these documents with the others arriving now; each one's reply, or why
        it was refused."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in requests]
        now = time.time()  # accepted here: the alerts' latency counts the batch's linger too
        self.arrived.update((id(r), now) for r in requests)
        self.queue += zip(requests, futures)
        self.changed.set()
        return list(await asyncio.gather(*futures))

    async def _run(self) -> None:
        while True:
            # the batch has no name here: it would keep its documents until the next
            await self._publish_or_fail(await self._gather())

    async def _publish_or_fail(self, batch: list[tuple[pb.PublishRequest, asyncio.Future]]) -> None:
        try:
            await self._publish(batch)
        except Exception as e:  # the batch fails, the node goes on
            log.exception("publishing a batch failed")
            for request, future in batch:
                self.arrived.pop(id(request), None)
                _answer(future, EngineError("INTERNAL", f"publishing failed: {type(e).__name__}"))

    async def _gather(self) -> list[tuple[pb.PublishRequest, asyncio.Future]]:
        """The next batch: as many documents as a batch holds, or those that came within
        the linger time of the first."""
        loop = asyncio.get_running_loop()
        size = self.publishing.batch_docs
        while not self.queue:
            self.changed.clear()
            await self.changed.wait()
        deadline = loop.time() + self.publishing.linger_ms / 1000
        while len(self.queue) < size and (left := deadline - loop.time()) > 0:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                break
        batch, self.queue = self.queue[:size], self.queue[size:]
        return batch

    async def _publish(self, batch: list[tuple[pb.PublishRequest, asyncio.Future]]) -> None:
        limit = self.engine.settings.max_document_bytes
        documents = await asyncio.get_running_loop().run_in_executor(
            self.analyzer, self._prepare, [r for r, _ in batch], limit
        )
        arrived = [self.arrived.pop(id(r), 0.0) for r, _ in batch]
        documents = [
            replace(d, accepted=t) if isinstance(d, Document) else d
            for d, t in zip(documents, arrived)
        ]
        fit = [(d, f) for d, (_, f) in zip(documents, batch) if isinstance(d, Document)]
        replies = await self.run(self.engine.dn.publish_batch([d for d, _ in fit])) if fit else []
        for (_, future), reply in zip(fit, replies):
            _answer(future, reply)
        for document, (_, future) in zip(documents, batch):
            if isinstance(document, EngineError):
                _answer(future, document)

    def _prepare(self, requests: list[pb.PublishRequest], limit: int) -> list:
        """prepare_all, in the analyzer's thread, its CPU time charged to "analysis"."""
        start = time.thread_time()
        try:
            return prepare_all(requests, limit)
        finally:
            if self.meter is not None:
                self.meter.add("analysis", time.thread_time() - start)

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.analyzer.shutdown(wait=False, cancel_futures=True)
