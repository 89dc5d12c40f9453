"""The client side of a live loopback ring for the benchmarks (bench_live, bench_subscribe,
profile_live): stubs, subscriptions, alert streams and what the ring's ledger says; the
nodes' CPU time; and a scraper of their metrics endpoints, as Prometheus would be.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import grpc
import numpy as np

from chord.live.tls import Credentials, aio_channel
from cqengine.live.client import ACK_EVERY, stream_request
from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc

ENGINE_KINDS = (
    *("Announce", "GetBloom", "TermDialogue", "Matched", "Deliver"),
    *("Replicate", "Reconcile", "Repair", "Release"),  # the copies kept for failures
    *("LogPromise", "LogAppend", "LogFetch", "LogLeave"),  # the homes' logs (--home-log on)
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


CHANNEL = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds the processes have taken so far, every thread's, to the nanosecond: the
    kernel's CPU clock of each process (/proc's utime and stime count 10 ms ticks, too
    coarse for a short run: 30 documents of a small ring are a few ticks)."""
    return sum(_process_cpu(pid) for pid in pids)


def _process_cpu(pid: int) -> float:
    try:  # Linux names another process's CPU clock thus (MAKE_PROCESS_CPUCLOCK)
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:  # no such clock here: /proc's ticks
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def quantiles(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


class Ring:
    """Client side of a running ring: stubs, the subscriptions, the alert streams."""

    def __init__(
        self, addresses: list[str], rng: random.Random, credentials: Credentials | None
    ) -> None:
        self.addresses, self.rng = addresses, rng
        self.channels = {a: aio_channel(a, credentials, CHANNEL) for a in addresses}
        self.stubs = {a: pb_grpc.CQEngineStub(c) for a, c in self.channels.items()}
        self.arrivals: list[tuple[int, str, float]] = []
        self.streams: list[asyncio.Task] = []

    async def subscribe(
        self, queries: list[str], concurrency: int = 128
    ) -> list[pb.SubscribeReply]:
        """Every query in a Subscribe call of its own, `concurrency` at a time."""
        limit, done = asyncio.Semaphore(concurrency), [0]
        start = time.perf_counter()

        async def one(q: str) -> pb.SubscribeReply:
            async with limit:
                reply = await self.stubs[self.rng.choice(self.addresses)].Subscribe(
                    pb.SubscribeRequest(query=q)
                )
            done[0] += 1
            if done[0] % 10_000 == 0:
                say(f"  {done[0]} subscriptions ({done[0] / (time.perf_counter() - start):.0f}/s)")
            return reply

        return list(await asyncio.gather(*(one(q) for q in queries)))

    async def subscribe_batches(
        self, queries: list[str], per_call: int = 500, callers: int = 8
    ) -> list[pb.SubscribeReply]:
        """Every query, per_call to a SubscribeBatch call, from concurrent callers to random
        nodes; the results in order (a refused one has its `code` and `error`)."""
        calls = [queries[i : i + per_call] for i in range(0, len(queries), per_call)]
        limit, done, start = asyncio.Semaphore(callers), [0], time.perf_counter()

        async def one(chunk: list[str]) -> list[pb.SubscribeReply]:
            async with limit:
                reply = await self.stubs[self.rng.choice(self.addresses)].SubscribeBatch(
                    pb.SubscribeBatchRequest(queries=[pb.SubscribeRequest(query=q) for q in chunk])
                )
            done[0] += len(chunk)
            if done[0] // 10_000 > (done[0] - len(chunk)) // 10_000:
                say(f"  {done[0]} subscriptions ({done[0] / (time.perf_counter() - start):.0f}/s)")
            return list(reply.results)

        return [r for results in await asyncio.gather(*(one(c) for c in calls)) for r in results]

    async def open_streams(self, subs: list[pb.SubscribeReply]) -> None:
        """One stream per home node, carrying all its subscriptions."""
        by_home: dict[str, list[pb.SubscribeReply]] = {}
        for s in subs:
            by_home.setdefault(s.home, []).append(s)

        async def listen(home: str, mine: list[pb.SubscribeReply]) -> None:
            # acknowledged by the stream's id, as Client.alerts does
            request = stream_request(mine, watermark=True)
            stream_id, messages, last_ack = b"", 0, time.perf_counter()
            try:
                async for batch in self.stubs[home].StreamAlerts(request):
                    now = time.perf_counter()
                    stream_id, messages = stream_id or batch.stream, messages + 1
                    subs, counts, at = (
                        batch.subscription_ids,
                        batch.counts or [len(batch.subscription_ids)],
                        0,
                    )
                    for docno, c in zip(batch.docnos, counts):
                        self.arrivals += [(s, docno, now) for s in subs[at : at + c]]
                        at += c
                    if now - last_ack >= ACK_EVERY:
                        last_ack = now
                        ack = pb.AckRequest(stream=stream_id, through=messages)
                        await self.stubs[home].AckAlerts(ack)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.CANCELLED:
                    raise

        self.streams = [asyncio.create_task(listen(h, m)) for h, m in by_home.items()]
        await asyncio.sleep(0.5)

    async def wait_alerts(self, want: int, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while len(self.arrivals) < want and time.perf_counter() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # late duplicates would show here

    async def ledger(self) -> tuple[Counter, Counter, int, Counter]:
        """Ring-wide engine messages and bytes by kind, the alerts the nodes counted as lost
        so far (failed calls, full mailboxes), and the nodes' CPU seconds by account
        (chord.live.meter): one Stats call a node."""
        messages, size, dropped, cpu = Counter(), Counter(), 0, Counter()
        for stub in self.stubs.values():
            stats = await stub.Stats(pb.StatsRequest())
            dropped += stats.alerts_dropped
            cpu.update(stats.cpu_seconds)
            for c in stats.ledger:
                if c.kind.split(".")[0] in ENGINE_KINDS:
                    messages[c.kind] += c.messages
                    size[c.kind] += c.bytes
        return messages, size, dropped, cpu

    async def close(self) -> None:
        for task in self.streams:
            task.cancel()
        await asyncio.gather(*self.streams, return_exceptions=True)
        for c in self.channels.values():
            await c.close()


class Scraper(threading.Thread):
    """Scrapes every node's metrics endpoint every `every` s, as Prometheus would."""

    def __init__(self, endpoints: list[str], every: float) -> None:
        super().__init__(daemon=True)
        self.endpoints, self.every = endpoints, every
        self.stop = threading.Event()
        self.scrapes = self.failed = 0

    def run(self) -> None:
        while not self.stop.wait(self.every):
            for endpoint in self.endpoints:
                if self.stop.is_set():
                    return  # the ring is going down
                try:
                    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=5) as r:
                        r.read()
                    self.scrapes += 1
                except OSError:
                    self.failed += 1
