"""Subscribing on a live loopback ring: one query per Subscribe call beside SubscribeBatch.

A ring of N node processes (`ring up`'s defaults: mutual TLS, 3 replicas) is sent the same
Skew queries (the paper's, mean size 5, over a generated TREC-AP-like corpus) twice:
1. one query per Subscribe call, from --concurrency concurrent callers to random nodes (as
   bench_live.py subscribes);
2. --per-call queries per SubscribeBatch call, from --callers concurrent callers to random
   nodes.
For each: subscriptions/s from the first call to the last reply, the node processes' CPU
seconds per subscription, and the ring's messages per subscription by kind (the ring's
maintenance meanwhile included). Then every subscription must be indexed once and copied
R-1 times, and homed once (on the home log, the default, in its home's log; with
--home-log off, with R-1 copies of its record) (the nodes' Stats).

    python experiments/bench_subscribe.py [--nodes 8] [--subscriptions 20000]
        [--per-call 1000] [--callers 4] [--concurrency 128] [--replicas 3]

Writes experiments/results/NAME.json (bench_subscribe.json). Goal (issue 41): 5,000
subscriptions/s through SubscribeBatch on an 8-node ring.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from inputs import RESULTS, workload_queries, write_stats
from live_ring import Ring, cpu_seconds, say

from cqengine.core.basis.limits import MAX_BATCH_QUERIES
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.ring.commands import ring_down, ring_up
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.corpus import generate_corpus

GOAL = 5000  # subscriptions/s through SubscribeBatch on an 8-node ring (issue 41)
KINDS = ("FindSuccessor", "Ping", "Index", "Replicate")  # lookups, placing, copying


async def ledger(ring: Ring) -> tuple[Counter, list[pb.StatsReply]]:
    """Ring-wide messages by kind (requests, not replies), and every node's Stats."""
    stats = [await stub.Stats(pb.StatsRequest()) for stub in ring.stubs.values()]
    sent = Counter()
    for s in stats:
        for c in s.ledger:
            sent[c.kind] += c.messages
    return sent, stats


async def phase(ring: Ring, pids: list[int], subscribe) -> dict:
    """Subscribe (an awaitable of the replies), measured."""
    before, _ = await ledger(ring)
    cpu, start = cpu_seconds(pids), time.perf_counter()
    replies = await subscribe
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(pids) - cpu
    after, _ = await ledger(ring)
    n = len(replies)
    placed = sum(not r.code for r in replies)
    return {
        "subscriptions": placed,
        "refused": n - placed,
        "seconds": seconds,
        "subscriptions_per_second": placed / seconds,
        "cpu_seconds_per_subscription": cpu / n,
        "messages_per_subscription_by_kind": {k: (after[k] - before[k]) / n for k in KINDS},
    }


async def run(args) -> dict:
    docs = list(
        generate_corpus(args.docs, seed=args.seed, vocab_size=args.vocab, mean_terms=args.terms)
    )
    queries = workload_queries("skew", docs, args.subscriptions, args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-subscribe-") as tmp:
        stats_file = Path(tmp) / "stats.tsv"
        write_stats(document_frequencies(docs), stats_file)
        engine = ["--strategy", args.strategy, "--stats", str(stats_file)]
        engine += ["--replicas", str(args.replicas)]
        ring_path = Path(tmp) / "ring.json"
        say(f"starting {args.nodes} nodes ...")
        ring_file = ring_up(args.nodes, ring_path, out=io.StringIO(), engine=engine)
        ring = Ring(ring_file.addresses(), random.Random(args.seed), ring_file.credentials())
        pids = [e.pid for e in ring_file.nodes]
        try:
            say(f"{len(queries)} subscriptions, one a Subscribe call")
            single = await phase(ring, pids, ring.subscribe(queries, args.concurrency))
            say(f"  {single['subscriptions_per_second']:.0f}/s")
            say(f"{len(queries)} subscriptions, {args.per_call} a SubscribeBatch call")
            batch = await phase(
                ring, pids, ring.subscribe_batches(queries, args.per_call, args.callers)
            )
            say(f"  {batch['subscriptions_per_second']:.0f}/s")
            _, stats = await ledger(ring)
        finally:
            await ring.close()
            ring_down(ring_path, out=io.StringIO())
    total = single["subscriptions"] + batch["subscriptions"]
    copies = min(args.replicas, args.nodes) - 1  # a ring of fewer nodes keeps fewer
    logged = stats[0].config.home_log  # (the default) homes are logs: no record copied
    placed = {
        "primary_entries": sum(s.primary_entries for s in stats),
        "replica_entries": sum(s.replica_entries for s in stats),
        "subscriptions": sum(s.subscriptions for s in stats),
        "replica_homes": sum(s.replica_homes for s in stats),
    }
    return {
        "benchmark": "bench_subscribe",
        "nodes": args.nodes,
        "cores": os.cpu_count(),
        "replicas": args.replicas,
        "tls": True,
        "strategy": args.strategy,
        "queries": len(queries),
        "per_call": args.per_call,
        "callers": args.callers,
        "concurrency": args.concurrency,
        "seed": args.seed,
        "single": single,
        "batch": batch,
        "speedup": batch["subscriptions_per_second"] / single["subscriptions_per_second"],
        "placed": placed,
        "placed_right": placed
        == {
            "primary_entries": total,
            "replica_entries": copies * total,
            "subscriptions": total,
            "replica_homes": 0 if logged else copies * total,
        },
        "home_log": logged,
        "goals": {"batch_subscriptions_per_second_on_8_nodes": GOAL},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--subscriptions", type=int, default=20_000, help="queries, each phase")
    p.add_argument(
        "--per-call", type=int, default=MAX_BATCH_QUERIES, help="queries per SubscribeBatch call"
    )
    p.add_argument("--callers", type=int, default=4, help="concurrent SubscribeBatch callers")
    p.add_argument("--concurrency", type=int, default=128, help="concurrent Subscribe callers")
    p.add_argument("--replicas", type=int, default=3, help="copies of every record")
    p.add_argument("--strategy", default=Settings().strategy)
    p.add_argument("--docs", type=int, default=1000, help="documents the queries are drawn from")
    p.add_argument("--vocab", type=int, default=46654, help="generated corpus vocabulary")
    p.add_argument("--terms", type=float, default=178.0, help="mean unique terms per document")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="bench_subscribe", help="the results file: NAME.json")
    args = p.parse_args(argv)
    if not 0 < args.per_call <= MAX_BATCH_QUERIES:
        p.error(f"--per-call takes 1-{MAX_BATCH_QUERIES}, not {args.per_call}")
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run(args))
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'':16} {'subs/s':>8} {'CPU ms/sub':>10}  messages/sub: " + " ".join(KINDS))
    for label, r in (("Subscribe", result["single"]), ("SubscribeBatch", result["batch"])):
        by_kind = r["messages_per_subscription_by_kind"]
        print(
            f"{label:16} {r['subscriptions_per_second']:>8.0f} "
            f"{1000 * r['cpu_seconds_per_subscription']:>10.2f}  "
            + " ".join(f"{by_kind[k]:.2f}" for k in KINDS)
        )
    rate = result["batch"]["subscriptions_per_second"]
    print(
        f"SubscribeBatch is {result['speedup']:.1f}x Subscribe; {rate:.0f}/s "
        f"(goal on 8 nodes: {GOAL}); every subscription placed right: {result['placed_right']}"
    )
    print(f"wrote {path}")
    refused = result["single"]["refused"] + result["batch"]["refused"]
    return 0 if result["placed_right"] and not refused else 1


if __name__ == "__main__":
    raise SystemExit(main())
