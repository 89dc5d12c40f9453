"""Live throughput and latency: a loopback ring beside a single-process percolator, in one run.

For each workload and subscription count:
1. the single-process percolator (the project's analyzer and an inverted index of the
   queries under their rarest term, analysis included) matches the documents on one
   core: documents/s;
2. a ring of N node processes (`ring up`) gets the subscriptions through the client API,
   keeps one alert stream open per home node, and is sent the documents in PublishBatch
   calls to random nodes, as fast as it takes them (after a first pass under other docnos:
   both sides are measured warm): documents/s from the first publish to
   the last alert, alerts/s, the node processes' CPU seconds per document, engine bytes
   and messages per document, and whether the alerts equal the matcher's; and the cost
   model: the nodes' CPU ms per document by stage of a document's path and by account
   (each node meters its own CPU time, chord.live.meter; cqengine.live.costs sorts it);
3. the same documents again (new docnos) arrive at half that rate and are sent as a
   producer sends them (every --producer-linger-ms, what arrived meanwhile, in one call),
   once for each producer linger given: latency from a document's arrival at the producer
   to its alert, p50 and p99. The linger sets the batch size, and so what a document
   costs: too short, and half the maximum rate overloads the ring.

Workloads: `skew`, the paper's Skew queries (mean size 5) over a generated TREC-AP-like
corpus; `text`, queries of 3-4 consecutive words taken from the documents' text;
`boolean`, the Skew queries each rewritten into a form of the query language (OR, NOT, a
phrase of the documents' words, a group: cqengine.text.workload.boolean_workload), its
single process the matcher's `match_queries` (each query read off its tree, tried on the
documents holding a term it names), analysis included.

The nodes keep their state in SQLite data directories, as `cqengine ring up` has them do
(`--data-dirs off`: in memory; `off,on` measures a ring of each, side by side).
`--replicas 1,3` likewise measures rings keeping one copy of every record and three (the
command line's default), side by side, and `--tls off,on` rings speaking plaintext and
mutual TLS (the default): what TLS costs. `--metrics off,on` measures a ring whose nodes
serve Prometheus metrics, scraped every `--scrape-every` s, beside one without: what
metrics cost. `--header-terms 0,256`: rings without and with term-presence headers;
`--balanced-ids off,on`: hashed and evenly spaced node ids; `--filter-lease 0,1`: rings
without and with aggregate filters; `--home-log off,on`: rings whose homes copy every
numbered alert to their replicas, and rings whose homes are replicated logs (issue 56: on
by default, as in `ring up`). Every default is what `cqengine ring up` runs with this
bench's `--stats` and Term Dialogue (headers 256, evenly spaced ids, no filters, data
directories, the home log).

    python experiments/bench_live.py [--nodes 8] [--subscriptions 10000,100000] [--docs 2000]
        [--producer-linger-ms 20,100] [--data-dirs off|on|off,on] [--replicas 1,3]
        [--tls off|on|off,on] [--metrics off|on|off,on] [--scrape-every 5]
        [--header-terms 0,256] [--balanced-ids off,on] [--filter-lease 0,1]
        [--home-log off,on] [--name bench_live]
        [--logs DIR]

Writes experiments/results/NAME.json (bench_live.json).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from itertools import product
from pathlib import Path

from inputs import RESULTS, workload_queries, write_stats
from live_ring import Ring, Scraper, cpu_seconds, quantiles, say

from cqengine.evaluation.setup.matcher import (
    document_frequencies,
    document_sequence,
    document_terms,
    match_documents,
    match_queries,
)
from cqengine.live.costs import cost_by_stage
from cqengine.live.ring.commands import ring_down, ring_up
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze
from cqengine.text.corpus import generate_corpus
from cqengine.text.trec import TrecDoc

# ---- inputs ----------------------------------------------------------------------------------


# ---- the single-process percolator ------------------------------------------------------------


def percolate(
    queries: list[list[str]], docs: list[TrecDoc], df: Counter
) -> tuple[float, set[tuple[int, str]]]:
    """The queries filed under their rarest term; each document analyzed and matched against
    the queries filed under its terms. Returns the seconds it took (filing aside) and the
    (query, docno) pairs matched."""
    filed: dict[str, list[tuple[int, frozenset[str]]]] = {}
    for i, q in enumerate(queries):
        filed.setdefault(min(q, key=lambda t: (df[t], t)), []).append((i, frozenset(q)))
    out: set[tuple[int, str]] = set()
    start = time.process_time()
    for d in docs:
        have = set(analyze(f"{d.title}\n{d.text}"))
        for t in have:
            for i, need in filed.get(t, ()):
                if need <= have:
                    out.add((i, d.docno))
    return time.process_time() - start, out


def percolate_boolean(queries: list[str], docs: list[TrecDoc]) -> tuple[float, set]:
    """The query language's percolator: each document analyzed into its term sequence and
    matched (cqengine.evaluation.setup.matcher.match_queries). The seconds and the matches."""
    start = time.process_time()
    sequences = [document_sequence(d.text, d.title) for d in docs]
    hits = match_queries(queries, sequences)
    seconds = time.process_time() - start
    return seconds, {(i, d.docno) for d, found in zip(docs, hits) for i in found}


async def throughput(ring: Ring, docs: list[TrecDoc], args, want: int, pids: list[int]) -> dict:
    """Publish every document in PublishBatch calls from concurrent publishers."""
    todo = [docs[i : i + args.per_call] for i in range(0, len(docs), args.per_call)]
    refused = []

    async def publisher() -> None:
        while todo:
            chunk = todo.pop()
            reply = await ring.stubs[ring.rng.choice(ring.addresses)].PublishBatch(
                pb.PublishBatchRequest(
                    documents=[
                        pb.PublishRequest(docno=d.docno, text=d.text.encode(), title=d.title)
                        for d in chunk
                    ]
                )
            )
            refused.extend(r.error for r in reply.results if not r.accepted)

    before, cpu = await ring.ledger(), cpu_seconds(pids)
    start = time.perf_counter()
    await asyncio.gather(*(publisher() for _ in range(args.publishers)))
    published = time.perf_counter()
    await ring.wait_alerts(want, args.settle)
    end = max([published] + [t for *_, t in ring.arrivals])
    # /proc read right after each ledger, as before: the meters' window (the two Stats
    # replies) and /proc's end alike, not a ledger call's worth apart
    after = await ring.ledger()
    cpu = cpu_seconds(pids) - cpu
    n = len(docs)
    messages = {k: after[0][k] - before[0][k] for k in after[0]}
    size = {k: after[1][k] - before[1][k] for k in after[1]}
    accounts = {k: 1000 * (after[3][k] - before[3][k]) / n for k in after[3]}
    return {
        "seconds": end - start,
        "publish_seconds": published - start,
        "docs_per_second": n / (end - start),
        "refused": len(refused),
        "alerts_dropped": after[2] - before[2],
        "cpu_seconds_per_document": cpu / n,
        "cpu_ms_per_document_by_stage": cost_by_stage(accounts),
        "cpu_ms_per_document_by_account": {
            k: v for k, v in sorted(accounts.items(), key=lambda kv: -kv[1]) if v > 0.0005
        },
        "engine_bytes_per_document": sum(size.values()) / n,
        "engine_messages_per_document": sum(messages.values()) / n,
        "bytes_per_document_by_kind": {k: v / n for k, v in sorted(size.items()) if v},
        "messages_per_document_by_kind": {k: v / n for k, v in sorted(messages.items()) if v},
    }


async def latency(
    ring: Ring, docs: list[TrecDoc], rate: float, linger_ms: float, want: int, args
) -> dict:
    """Documents arriving at `rate` a second, sent as a producer sends them (Kafka's
    linger.ms on the client): every `linger_ms`, what arrived meanwhile in one
    PublishBatch call to a random node. Latency: from a document's arrival to its alert."""
    arrived: dict[str, float] = {}
    sends, dropped = [], (await ring.ledger())[2]
    start = time.perf_counter()
    sent = 0
    while sent < len(docs):
        due = min(len(docs), int((time.perf_counter() - start) * rate) + 1)  # arrived by now
        if due > sent:
            chunk = docs[sent:due]
            for j, d in enumerate(chunk, sent):
                arrived[d.docno] = start + j / rate
            sends.append(
                asyncio.ensure_future(
                    ring.stubs[ring.rng.choice(ring.addresses)].PublishBatch(
                        pb.PublishBatchRequest(
                            documents=[
                                pb.PublishRequest(
                                    docno=d.docno, text=d.text.encode(), title=d.title
                                )
                                for d in chunk
                            ]
                        )
                    )
                )
            )
            sent = due
        await asyncio.sleep(linger_ms / 1000)
    refused = [
        r.error for reply in await asyncio.gather(*sends) for r in reply.results if not r.accepted
    ]
    await ring.wait_alerts(want, args.settle)
    times = [1000 * (t - arrived[d]) for _, d, t in ring.arrivals if d in arrived]
    p50, p99 = quantiles(times)
    return {
        "rate": rate,
        "p50_ms": p50,
        "p99_ms": p99,
        "alerts": len(times),
        "alerts_dropped": (await ring.ledger())[2] - dropped,
        "refused": len(refused),
        "producer_linger_ms": linger_ms,
    }


async def measure_ring(
    args,
    kind: str,
    queries: list[str],
    docs: list[TrecDoc],
    stats_file: Path,
    oracle: set[tuple[int, str]],
    analyzed: list[list[str]] | None,
    variant: dict,
) -> dict:
    """One ring (`variant`: its VARIANTS' values) measured."""
    metrics = variant["metrics"]
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        ring_path = Path(tmp) / "ring.json"
        engine = [
            "--strategy",
            args.strategy,
            "--resolution",
            args.resolution,
            "--stats",
            str(stats_file),
            "--replicas",
            str(variant["replicas"]),
            "--header-terms",
            str(variant["headers"]),
            "--filter-lease",
            str(variant["filters"]),
            "--home-log",
            "on" if variant["home_log"] else "off",
        ]
        say(f"starting {args.nodes} nodes ...")
        ring_file = ring_up(
            args.nodes,
            ring_path,
            out=io.StringIO(),
            engine=engine,
            node_args=["--batch-docs", str(args.batch_docs), "--linger-ms", str(args.linger_ms)],
            # as `cqengine ring up` does
            data_root=Path(tmp) / "data" if variant["data_dirs"] else None,
            insecure=not variant["tls"],
            metrics=metrics,
            balanced_ids=variant["balanced"],
        )
        ring = Ring(ring_file.addresses(), random.Random(args.seed), ring_file.credentials())
        scraper = Scraper([e.metrics for e in ring_file.nodes], args.scrape_every)
        if metrics:
            scraper.start()
        try:
            t = time.perf_counter()
            subs = await ring.subscribe_batches(queries)
            refused = [s.error for s in subs if s.code]
            assert not refused, f"{len(refused)} queries refused, the first: {refused[0]}"
            subscribe_s = time.perf_counter() - t
            say(f"  {len(subs)} subscriptions in {subscribe_s:.1f}s")
            query_of = {s.subscription_id: i for i, s in enumerate(subs)}
            assert analyzed is None or all(list(s.terms) == analyzed[i] for i, s in enumerate(subs))
            await ring.open_streams(subs)
            pids = [e.pid for e in ring_file.nodes]
            # warm up as the percolator does: every list a document touches built once
            warm = [TrecDoc(f"W-{d.docno}", d.text, d.title) for d in docs]
            await throughput(ring, warm, args, len(oracle), pids)
            ring.arrivals.clear()
            fast = await throughput(ring, docs, args, len(oracle), pids)
            got = [(query_of[s], d) for s, d, _ in ring.arrivals]
            fast["alerts"] = len(got)
            fast["alerts_per_second"] = len(got) / fast["seconds"]
            fast["alerts_equal_matcher"] = len(got) == len(set(got)) and set(got) == oracle
            say(
                f"  ring: {fast['docs_per_second']:.0f} docs/s, {len(got)} alerts "
                f"({'=' if fast['alerts_equal_matcher'] else '!='} matcher)"
            )
            slow = []
            for linger in args.producer_linger_ms:
                ring.arrivals.clear()
                prefix = f"L{linger:g}-"
                later = [TrecDoc(prefix + d.docno, d.text, d.title) for d in docs]
                rate = fast["docs_per_second"] / 2
                one = await latency(ring, later, rate, linger, len(oracle), args)
                got = [(query_of[s], d[len(prefix) :]) for s, d, _ in ring.arrivals]
                one["alerts_equal_matcher"] = len(got) == len(set(got)) and set(got) == oracle
                slow.append(one)
                say(
                    f"  at {rate:.0f} docs/s, sent every {linger:g} ms: p50 "
                    f"{one['p50_ms'] or 0:.1f} ms, p99 {one['p99_ms'] or 0:.1f} ms; "
                    f"{len(got)} alerts ({'=' if one['alerts_equal_matcher'] else '!='} matcher), "
                    f"{one['alerts_dropped']} dropped, {one['refused']} refused"
                )
        finally:
            scraper.stop.set()
            if metrics:
                scraper.join()  # before the ring goes down under it
            await ring.close()
            ring_down(ring_path, out=io.StringIO())
            if args.logs is not None:  # the nodes' logs outlive the ring's directory
                shutil.copytree(
                    ring_path.parent / "logs",
                    args.logs / f"{kind}-{len(queries)}",
                    dirs_exist_ok=True,
                )
    assert not metrics or scraper.scrapes and not scraper.failed, f"{scraper.failed} failed"
    return {
        "scrapes": scraper.scrapes,
        "subscriptions_per_second": len(subs) / subscribe_s,
        "throughput": fast,
        "latency": slow,  # one per producer linger
    }


def on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise ValueError(f"on or off, not {text!r}")
    return text == "on"


# what a ring of a run is measured with: its key in a run -> the option (a comma-separated
# list, a ring each), how a value reads, the default (what `cqengine ring up` runs with
# this bench's --stats and --resolution td), what it says
VARIANTS = {
    "data_dirs": ("--data-dirs", on_off, "on", "on: each node keeps its state in SQLite"),
    "replicas": ("--replicas", int, "3", "copies of every record (1: none)"),
    "tls": ("--tls", on_off, "on", "on: mutual TLS; off: plaintext (--insecure)"),
    "metrics": ("--metrics", on_off, "off", "on: Prometheus metrics, scraped"),
    "headers": ("--header-terms", int, "256", "term-presence header terms (0: none)"),
    "balanced": ("--balanced-ids", on_off, "on", "on: evenly spaced ids; off: hashed"),
    "filters": ("--filter-lease", float, "0", "s an aggregate filter holds (0: none)"),
    "home_log": ("--home-log", on_off, "on", "on: each home key a replicated log"),
}
FLAGS = tuple(VARIANTS)


def side_by_side(runs: list[dict], flag: str, names: tuple[str, str]) -> list[dict]:
    """What `flag` costs, where a run measured a ring with it and one without it, alike
    otherwise: the share of the documents/s of the ring without it that the other loses.
    Repeated alike (`--workloads skew,skew`), the k-th ring with it pairs with the k-th
    without: the two measured one after the other."""

    def alike(r: dict) -> tuple:
        return (r["workload"], r["subscriptions"], *(r[f] for f in FLAGS if f != flag))

    without: dict[tuple, list[dict]] = {}
    for r in runs:
        if not r[flag]:
            without.setdefault(alike(r), []).append(r)
    out = []
    for r in runs:
        twins = without.get(alike(r))
        twin = twins.pop(0) if r[flag] and twins else None
        if twin is not None:
            off, on = names
            out.append(
                {
                    "workload": r["workload"],
                    "subscriptions": r["subscriptions"],
                    **{f: r[f] for f in FLAGS if f != flag},
                    f"{off}_docs_per_second": twin["ring_docs_per_second"],
                    f"{on}_docs_per_second": r["ring_docs_per_second"],
                    "cost": 1 - r["ring_docs_per_second"] / twin["ring_docs_per_second"],
                    f"{off}_cpu_ms_per_document": 1000
                    * twin["throughput"]["cpu_seconds_per_document"],
                    f"{on}_cpu_ms_per_document": 1000 * r["throughput"]["cpu_seconds_per_document"],
                }
            )
    return out


async def run(args) -> dict:
    docs = list(
        generate_corpus(args.docs, seed=args.seed, vocab_size=args.vocab, mean_terms=args.terms)
    )
    df = document_frequencies(docs)
    terms = [document_terms(d.text, d.title) for d in docs]
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-live-stats-") as tmp:
        stats_file = Path(tmp) / "stats.tsv"
        write_stats(df, stats_file)
        for kind in args.workloads:
            for n in args.subscriptions:
                say(f"{kind}, {n} subscriptions, {len(docs)} documents")
                queries = workload_queries(kind, docs, n, args.seed)
                if kind == "boolean":
                    analyzed = None
                    percolate_boolean(queries, docs)  # warm up: the analyzer's caches filled
                    seconds, oracle = percolate_boolean(queries, docs)
                else:
                    analyzed = [analyze(q) for q in queries]
                    percolate(analyzed, docs, df)  # warm up: the analyzer's caches filled
                    seconds, found = percolate(analyzed, docs, df)
                    oracle = {
                        (i, d.docno)
                        for d, hits in zip(docs, match_documents(analyzed, terms))
                        for i in hits
                    }
                    assert found == oracle, "the percolator disagrees with the matcher"
                single = len(docs) / seconds
                say(f"  single process: {single:.0f} docs/s, {len(oracle)} matches")
                rings = [
                    dict(zip(FLAGS, values))
                    for values in product(*(getattr(args, f) for f in FLAGS))
                ]
                for variant in rings:
                    if len(rings) > 1:
                        say(
                            "  "
                            + ", ".join(f"{VARIANTS[f][0][2:]} {v}" for f, v in variant.items())
                        )
                    ring = await measure_ring(
                        args, kind, queries, docs, stats_file, oracle, analyzed, variant
                    )
                    fast = ring["throughput"]
                    out.append(
                        {
                            "workload": kind,
                            "subscriptions": n,
                            "documents": len(docs),
                            **variant,
                            "single_process_docs_per_second": single,
                            "matches": len(oracle),
                            "ring_docs_per_second": fast["docs_per_second"],
                            "ratio": fast["docs_per_second"] / single,
                            **ring,
                        }
                    )
    return {
        "benchmark": "bench_live",
        "nodes": args.nodes,
        "cores": os.cpu_count(),
        "strategy": args.strategy,
        "resolution": args.resolution,
        "batch_docs": args.batch_docs,
        "linger_ms": args.linger_ms,
        "per_call": args.per_call,
        "publishers": args.publishers,
        "seed": args.seed,
        "corpus": {
            "documents": len(docs),
            "vocabulary": len(df),
            "unique_terms_per_document": sum(map(len, terms)) / len(terms),
        },
        "goals": {
            "ratio": 0.5,
            "docs_per_second_at_100000": 1000,
            "p99_ms": 250,
            "tls_cost": 0.15,
            "metrics_cost": 0.03,
        },
        "tls_cost": side_by_side(out, "tls", ("plaintext", "tls")),
        "metrics_cost": side_by_side(out, "metrics", ("without_metrics", "with_metrics")),
        "headers_cost": side_by_side(out, "headers", ("without_headers", "with_headers")),
        "balanced_cost": side_by_side(out, "balanced", ("hashed_ids", "balanced_ids")),
        "filters_cost": side_by_side(out, "filters", ("without_filters", "with_filters")),
        "home_log_cost": side_by_side(out, "home_log", ("copies", "home_log")),
        "runs": out,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--subscriptions", default="10000,100000", help="comma-separated counts")
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--workloads", default="skew,text", help="comma-separated: skew, text, boolean")
    p.add_argument("--strategy", default="oi")
    p.add_argument("--resolution", default="td")
    p.add_argument("--batch-docs", type=int, default=64, help="the nodes' --batch-docs")
    p.add_argument("--linger-ms", type=float, default=5.0, help="the nodes' --linger-ms")
    p.add_argument("--per-call", type=int, default=64, help="documents per PublishBatch call")
    p.add_argument("--publishers", type=int, default=4, help="concurrent PublishBatch callers")
    p.add_argument(
        "--producer-linger-ms",
        default="20,100",
        help="latency phase, comma-separated: the producer sends what arrived every this often",
    )
    p.add_argument("--vocab", type=int, default=46654, help="generated corpus vocabulary")
    p.add_argument("--terms", type=float, default=178.0, help="mean unique terms per document")
    p.add_argument("--settle", type=float, default=60.0, help="seconds to wait for the last alerts")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--logs", type=Path, help="keep each ring's node logs under this directory")
    p.add_argument("--scrape-every", type=float, default=5.0, help="s between scrapes of each node")
    for flag, (option, _, default, text) in VARIANTS.items():
        p.add_argument(
            option,
            dest=flag,
            default=default,
            help=f"comma-separated, a ring each: {text} (default %(default)s)",
        )
    p.add_argument("--name", default="bench_live", help="the results file: NAME.json")
    args = p.parse_args(argv)
    for flag, (option, read, _, _) in VARIANTS.items():  # a ring each
        texts = getattr(args, flag).split(",")
        try:
            values = [read(t) for t in texts]
        except ValueError as e:
            p.error(f"{option}: {e}")
        if len(set(values)) < len(values):
            p.error(f"{option} names a value twice: {texts}")
        setattr(args, flag, values)
    args.subscriptions = [int(n) for n in args.subscriptions.split(",")]
    args.workloads = args.workloads.split(",")
    args.producer_linger_ms = [float(x) for x in args.producer_linger_ms.split(",")]
    if len(set(args.producer_linger_ms)) < len(args.producer_linger_ms):
        # each linger's documents get their own docnos from it; a docno alerts once
        p.error(f"--producer-linger-ms names a linger twice: {args.producer_linger_ms}")
    if set(args.workloads) - {"skew", "text", "boolean"}:
        p.error(f"unknown workload in {args.workloads}; choose skew, text, boolean")
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run(args))
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{'workload':8} {'subs':>7} {'data':>4} {'tls':>3} {'single/s':>9} {'ring/s':>8} "
        f"{'ratio':>6} {'alerts/s':>9} "
        f"{'cpu ms/doc':>10} {'sent every':>10} {'p50 ms':>7} {'p99 ms':>7}  alerts = matcher"
    )
    for r in result["runs"]:
        f = r["throughput"]
        for s in r["latency"]:
            right = f["alerts_equal_matcher"] and s["alerts_equal_matcher"]
            print(
                f"{r['workload']:8} {r['subscriptions']:>7} {'on' if r['data_dirs'] else 'off':>4} "
                f"{'on' if r['tls'] else 'off':>3} R={r['replicas']} "
                f"{r['single_process_docs_per_second']:>9.0f} {r['ring_docs_per_second']:>8.0f} "
                f"{r['ratio']:>6.2f} {f['alerts_per_second']:>9.0f} "
                f"{1000 * f['cpu_seconds_per_document']:>10.2f} "
                f"{s['producer_linger_ms']:>7g} ms {s['p50_ms'] or 0:>7.1f} "
                f"{s['p99_ms'] or 0:>7.1f}  {right}"
            )
    for cost in result["tls_cost"]:
        print(
            f"TLS costs {cost['workload']} at {cost['subscriptions']} subscriptions "
            f"{100 * cost['cost']:.1f}% of its documents/s (goal <= 15%)"
        )
    for cost in result["metrics_cost"]:
        print(
            f"metrics scraped every {args.scrape_every:g} s cost {cost['workload']} at "
            f"{cost['subscriptions']} subscriptions {100 * cost['cost']:.1f}% of its "
            "documents/s (goal <= 3%)"
        )
    for cost in result["headers_cost"]:
        print(
            f"term-presence headers cost {cost['workload']} at {cost['subscriptions']} "
            f"subscriptions {100 * cost['cost']:.1f}% of its documents/s; CPU ms per document "
            f"{cost['without_headers_cpu_ms_per_document']:.2f} without, "
            f"{cost['with_headers_cpu_ms_per_document']:.2f} with"
        )
    print(f"wrote {path}")
    right = all(
        r["throughput"]["alerts_equal_matcher"]
        and all(s["alerts_equal_matcher"] for s in r["latency"])
        for r in result["runs"]
    )
    return 0 if right else 1


if __name__ == "__main__":
    raise SystemExit(main())
