"""Live throughput and latency: a loopback ring, Q subscriptions, D documents.

Starts N node processes, registers Q Skew queries (mean 2 terms) through random nodes and
keeps every subscription's alert stream open, then publishes D generated documents through
random nodes from C concurrent publishers, as fast as the ring accepts them. Reports
documents per second (accepted), publish-to-alert latency (p50, p99: from the start of the
Publish call to the alert's arrival on the stream), engine bytes and messages per document,
and whether the alerts equal the brute-force matcher.

    python experiments/bench_live.py [--nodes 8] [--queries 1000] [--docs 500] [--concurrency 8]

Writes experiments/results/bench_live.json.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc

from cqengine.corpus import generate_corpus
from cqengine.matcher import document_frequencies, document_terms, matches
from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc
from cqengine.ring import ring_down, ring_up
from cqengine.workload import generate_queries

RESULTS = Path(__file__).resolve().parent / "results"
ENGINE_KINDS = ("Announce", "GetBloom", "TermDialogue", "Matched", "Deliver")


async def run(args) -> dict:
    rng = random.Random(args.seed)
    docs = list(generate_corpus(args.docs, seed=args.seed, vocab_size=args.vocab, mean_terms=args.terms))
    queries = [" ".join(q) for q in generate_queries(document_frequencies(docs), args.queries, "skew",
                                                     mean_size=2.0, seed=args.seed)]
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        ring_path = Path(tmp) / "ring.json"
        engine = ["--strategy", args.strategy, "--resolution", args.resolution, "--piggyback", str(args.piggyback)]
        print(f"starting {args.nodes} nodes ...", file=sys.stderr, flush=True)
        ring = ring_up(args.nodes, ring_path, out=io.StringIO(), engine=engine)
        try:
            return await measure(args, ring.addresses(), queries, docs, rng)
        finally:
            ring_down(ring_path, out=io.StringIO())


async def measure(args, addresses, queries, docs, rng) -> dict:
    channels = {a: grpc.aio.insecure_channel(a) for a in addresses}
    stubs = {a: pb_grpc.CQEngineStub(c) for a, c in channels.items()}
    limit = asyncio.Semaphore(64)

    async def subscribe(q):
        async with limit:
            return await stubs[rng.choice(addresses)].Subscribe(pb.SubscribeRequest(query=q))

    t0 = time.perf_counter()
    subs = await asyncio.gather(*(subscribe(q) for q in queries))
    subscribe_s = time.perf_counter() - t0
    print(f"{len(subs)} subscriptions in {subscribe_s:.1f}s", file=sys.stderr, flush=True)

    arrivals: list[tuple[int, str, float]] = []

    async def listen(sub):
        stream = stubs[sub.home].StreamAlerts(pb.StreamRequest(subscription_id=sub.subscription_id,
                                                               token=sub.token))
        try:
            async for alert in stream:
                arrivals.append((alert.subscription_id, alert.docno, time.perf_counter()))
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise

    listeners = [asyncio.create_task(listen(s)) for s in subs]
    await asyncio.sleep(0.5)  # streams open
    want = matches({s.subscription_id: s.terms for s in subs},
                   {d.docno: document_terms(d.text, d.title) for d in docs})

    published: dict[str, float] = {}
    queue = list(docs)

    async def publisher():
        while queue:
            d = queue.pop()
            published[d.docno] = time.perf_counter()
            await stubs[rng.choice(addresses)].Publish(
                pb.PublishRequest(docno=d.docno, text=d.text.encode(), title=d.title))

    t0 = time.perf_counter()
    await asyncio.gather(*(publisher() for _ in range(args.concurrency)))
    publish_s = time.perf_counter() - t0
    print(f"{len(docs)} documents published in {publish_s:.1f}s", file=sys.stderr, flush=True)
    deadline = time.perf_counter() + args.settle
    while len(arrivals) < len(want) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # late duplicates would show here
    for task in listeners:
        task.cancel()
    await asyncio.gather(*listeners, return_exceptions=True)

    stats = [await stub.Stats(pb.StatsRequest()) for stub in stubs.values()]
    for c in channels.values():
        await c.close()
    ledger: Counter = Counter()
    messages: Counter = Counter()
    for s in stats:
        for c in s.ledger:
            ledger[c.kind] += c.bytes
            messages[c.kind] += c.messages
    engine_kinds = [k for k in ledger if k.split(".")[0] in ENGINE_KINDS]
    got = [(s, d) for s, d, _ in arrivals]
    latencies = sorted(t - published[d] for _, d, t in arrivals)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    n = len(docs)
    return {
        "benchmark": "bench_live", "nodes": args.nodes, "queries": len(subs), "documents": n,
        "concurrency": args.concurrency, "strategy": args.strategy, "resolution": args.resolution,
        "piggyback": args.piggyback, "seed": args.seed,
        "subscriptions_per_second": len(subs) / subscribe_s,
        "documents_per_second": n / publish_s,
        "alerts": len(got), "alerts_expected": len(want),
        "alerts_equal_matcher": len(got) == len(set(got)) and set(got) == want,
        "latency_p50_ms": 1000 * cuts[49] if latencies else None,
        "latency_p99_ms": 1000 * cuts[98] if latencies else None,
        "engine_bytes_per_document": sum(ledger[k] for k in engine_kinds) / n,
        "engine_messages_per_document": sum(messages[k] for k in engine_kinds) / n,
        "bytes_per_document_by_kind": {k: ledger[k] / n for k in sorted(engine_kinds)},
        "candidates_per_document": sum(s.candidates for s in stats) / n,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--docs", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=8, help="concurrent publishers")
    p.add_argument("--strategy", default="mhi")
    p.add_argument("--resolution", default="td")
    p.add_argument("--piggyback", type=int, default=0)
    p.add_argument("--vocab", type=int, default=5000, help="generated corpus vocabulary")
    p.add_argument("--terms", type=float, default=100.0, help="mean unique terms per document")
    p.add_argument("--settle", type=float, default=30.0, help="seconds to wait for the last alerts")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench_live.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "bytes_per_document_by_kind"}, indent=2))
    print(f"wrote {path}")
    return 0 if result["alerts_equal_matcher"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
