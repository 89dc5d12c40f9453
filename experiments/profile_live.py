"""Where a live ring's time goes under load: py-spy samples of each node of a loopback ring.

A ring of N node processes gets the subscriptions (as in bench_live.py), keeps one alert
stream per home node, and is sent documents in PublishBatch calls from concurrent
publishers for the whole run; after a warm-up, py-spy samples every node for --seconds. Each
sample is put in one place, by the thread it was taken in and the innermost frame that
says whose code ran: the engine core (cqengine/core, numpy), gRPC and protobuf, the event
loop (asyncio; with gRPC's callbacks, which run in it as C code), the live shell (chord,
cqengine/live), document analysis (the publishing node's worker thread), gRPC's poller
thread, and the event loop waiting for I/O (idle). Beside the samples, the same window as
the nodes' own meters account for it (chord.live.meter), by stage of a document's path.

    python experiments/profile_live.py [--nodes 8] [--subscriptions 10000] [--seconds 30]

Writes experiments/results/profile_live.json. Needs py-spy (in the dev dependencies) and
the right to trace the node processes (ptrace; root or kernel.yama.ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from inputs import RESULTS, workload_queries, write_stats
from live_ring import Ring, say

from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.live.costs import cost_by_stage
from cqengine.live.ring.commands import ring_down, ring_up
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.corpus import generate_corpus
from cqengine.text.trec import TrecDoc

PLACES = (
    "event loop idle (waiting in epoll)",
    "engine core",
    "gRPC and protobuf",
    "event loop and gRPC callbacks",
    "live shell",
    "analysis (worker thread)",
    "gRPC poller thread",
    "other",
)


def place(frames: list[str]) -> str:
    """Where one sample's time went, from its stack (outermost frame first)."""
    if frames and frames[0].startswith(("Thread.", "_bootstrap")):
        if any("concurrent/futures" in f for f in frames):  # the analyzer's worker
            return "analysis (worker thread)"
        return "gRPC poller thread"
    if frames and "selectors.py" in frames[-1]:
        return "event loop idle (waiting in epoll)"
    for frame in reversed(frames):
        if "grpc" in frame or "_message" in frame or "_pb2" in frame:
            return "gRPC and protobuf"
        if "cqengine/core/" in frame or "numpy" in frame:
            return "engine core"
        if "cqengine/live/" in frame or "chord/" in frame:
            return "live shell"
        if "asyncio" in frame:
            return "event loop and gRPC callbacks"
    return "other"


def function_of(frame: str) -> str:
    """A frame's function and file, without its line: "f (file.py:12)" is "f (file.py)"; a
    frame of native code ("f (lib.so)") has no line."""
    name, colon, line = frame.rpartition(":")
    return name + ")" if colon and line.rstrip(")").isdigit() else frame


def summarize(raw: str, top: int = 15) -> dict:
    """Shares of the samples by place, the functions most often innermost, and those
    whose calls held the most samples, callees included."""
    places, leaves, inside, n = Counter(), Counter(), Counter(), 0
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, k = stack.split(";"), int(count)
        places[place(frames)] += k
        leaves[frames[-1]] += k
        for function in {function_of(f) for f in frames}:
            inside[function] += k  # once a sample, however deep it recurs
        n += k
    return {
        "samples": n,
        "share_by_place": {p: places[p] / n for p in PLACES if places[p]} if n else {},
        "innermost": [{"frame": f, "share": c / n} for f, c in leaves.most_common(top)],
        # the functions whose calls, callees included, held the most samples
        "inclusive": [{"function": f, "share": c / n} for f, c in inside.most_common(2 * top)],
    }


async def publish_until(ring: Ring, docs: list[TrecDoc], args, stop: float) -> int:
    """Publish batches of random documents under fresh docnos until `stop`; how many."""
    sent, rng = [0], random.Random(args.seed)

    async def publisher(me: int) -> None:
        while time.perf_counter() < stop:
            sent[0] += 1
            chunk = [
                pb.PublishRequest(docno=f"P{me}-{sent[0]}-{d.docno}", text=d.text.encode())
                for d in rng.sample(docs, args.per_call)
            ]
            await ring.stubs[rng.choice(ring.addresses)].PublishBatch(
                pb.PublishBatchRequest(documents=chunk)
            )

    await asyncio.gather(*(publisher(i) for i in range(args.publishers)))
    return sent[0] * args.per_call


async def sample(spy: str, pid: int, out: Path, args) -> str:
    """py-spy's raw samples of one process for --seconds."""
    spying = await asyncio.create_subprocess_exec(
        *[spy, "record", "-p", str(pid), "-d", str(args.seconds), "-r", str(args.rate)],
        *["-f", "raw", "-o", str(out), "--nonblocking"],
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await spying.communicate()
    if spying.returncode != 0 or not out.exists():
        raise SystemExit(f"py-spy failed on {pid}: {err.decode().strip()[-500:]}")
    return out.read_text()


async def run(args, spy: str) -> dict:
    docs = list(generate_corpus(args.docs, seed=args.seed, vocab_size=46654, mean_terms=178.0))
    df = document_frequencies(docs)
    queries = workload_queries(args.workload, docs, args.subscriptions, args.seed)
    with tempfile.TemporaryDirectory(prefix="profile-live-") as tmp:
        stats, ring_path = Path(tmp) / "stats.tsv", Path(tmp) / "ring.json"
        write_stats(df, stats)
        say(f"starting {args.nodes} nodes ...")
        ring_file = ring_up(
            args.nodes,
            ring_path,
            out=io.StringIO(),
            engine=["--strategy", "oi", "--resolution", "td", "--stats", str(stats)],
        )
        ring = Ring(ring_file.addresses(), random.Random(args.seed), ring_file.credentials())
        try:
            subs = await ring.subscribe_batches(queries)
            await ring.open_streams(subs)
            start = time.perf_counter()
            stop = start + args.warmup + args.seconds + 2
            publishing = asyncio.ensure_future(publish_until(ring, docs, args, stop))
            await asyncio.sleep(args.warmup)
            say(f"sampling every node for {args.seconds} s ...")
            metered = (await ring.ledger())[3]  # the nodes' own accounts (chord.live.meter)
            raws = await asyncio.gather(
                *(sample(spy, e.pid, Path(tmp) / f"{e.pid}.txt", args) for e in ring_file.nodes)
            )
            metered = (await ring.ledger())[3] - metered
            published = await publishing
            seconds = time.perf_counter() - start
        finally:
            await ring.close()
            ring_down(ring_path, out=io.StringIO())
    return {
        "benchmark": "profile_live",
        "nodes": args.nodes,
        "cores": os.cpu_count(),
        "workload": args.workload,
        "subscriptions": args.subscriptions,
        "per_call": args.per_call,
        "publishers": args.publishers,
        "seconds_sampled": args.seconds,
        "sample_rate": args.rate,
        "ring_docs_per_second_while_sampled": published / seconds,
        **summarize("\n".join(raws), top=args.top),
        # the same window as the nodes' meters account for it, by stage (cqengine.live.costs)
        "metered_share_by_stage": {
            stage: seconds / sum(metered.values())
            for stage, seconds in cost_by_stage(metered).items()
        },
        "nodes_apart": [
            {"address": e.address, **summarize(raw, top=0)} for e, raw in zip(ring_file.nodes, raws)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--subscriptions", type=int, default=10000)
    p.add_argument("--workload", default="skew", choices=["skew", "text"])
    p.add_argument("--docs", type=int, default=2000, help="distinct documents to draw from")
    p.add_argument("--per-call", type=int, default=64, help="documents per PublishBatch call")
    p.add_argument("--publishers", type=int, default=4, help="concurrent PublishBatch callers")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of load before sampling")
    p.add_argument("--seconds", type=int, default=30, help="seconds to sample")
    p.add_argument("--rate", type=int, default=25, help="samples a second, of each node")
    p.add_argument(
        "--top", type=int, default=15, help="frames listed (and twice as many functions)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if spy is None:
        p.error("py-spy not found: pip install py-spy (it is in the dev dependencies)")
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run(args, spy))
    path = args.out / "profile_live.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    nodes = result["nodes_apart"]
    print(f"{result['ring_docs_per_second_while_sampled']:.0f} docs/s; samples by place:")
    print(f"{'all':>7} " + " ".join(f"{n['address'].split(':')[1]:>6}" for n in nodes))
    for where, share in result["share_by_place"].items():
        each = " ".join(f"{100 * n['share_by_place'].get(where, 0):5.1f}%" for n in nodes)
        print(f"{100 * share:6.1f}% {each}  {where}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
