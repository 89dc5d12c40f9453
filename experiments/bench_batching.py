"""Bytes and messages per document against batch size, on the paper's Skew workload.

A 1,000-node simulated ring holds 100,000 Skew queries (mean size 5) indexed by MHI; the
first --docs documents of the corpus are published in batches of 1, 4, 16 and 64 (each
batch through one publishing node, a seeded choice), resolved by Term Dialogue and by
Bloom filters. A batch of one is the paper's protocol; a larger batch travels as one
announcement per next hop, one Term Dialogue request per round per QN, one filter request
per QN, one report per node it reached (with its share of the batch, even if nothing
matched) and one alert batch per home node, once every report is in (as live DNs do:
EngineSimulator.hold). Every batch's alerts are checked against the matcher. Each run
starts from the same indexed ring (a forked copy).

    python experiments/bench_batching.py --corpus PREP_DIR [--docs 2048] [--batches 1,4,16,64]

Writes experiments/results/bench_batching.json and bench_batching.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from cqengine.core.frame.documents import Document
from cqengine.evaluation.passes.lab import Lab
from cqengine.evaluation.passes.rings import IndexedRing
from cqengine.evaluation.passes.runs import IndexSpec, place
from cqengine.evaluation.reports.evaluate import writable
from cqengine.evaluation.reports.plots import plt  # the figures' backend, no display needed
from cqengine.evaluation.setup.forks import Background
from cqengine.evaluation.setup.inputs import generated, load_prep
from cqengine.evaluation.setup.scale import Scale

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("Announce", "TermDialogue", "GetBloom", "Matched", "Deliver")


def publish(ring: IndexedRing, resolution: str, batch: int, docs: int) -> dict:
    """In a forked copy of the indexed ring: publish the first `docs` documents in batches
    of `batch`, and what they cost, per document, by kind (requests and replies)."""
    sim, corpus, seed = ring.sim, ring.lab.corpus, ring.lab.scale.seed
    sim.settings.resolution = resolution
    sim.hold(batch > 1)  # a batch of one: the paper's protocol, each report delivered at once
    held_out = sim.held_out
    alerted: list[tuple] = []
    for e in sim.engines.values():
        e.home.alert_listeners.append(lambda subs, e=e: alerted.extend((e, sub) for sub in subs))
    messages, size, candidates = Counter(), Counter(), 0
    wrong = 0
    start = time.perf_counter()
    for first in range(0, docs, batch):
        picked = range(first, min(first + batch, docs))
        via = ring.addresses[place(seed, "doc", corpus.docnos[first], len(ring.addresses))]
        alerted.clear()
        report = sim.publish_batch(
            [Document(corpus.docnos[j], corpus.terms[j]) for j in picked], via
        )
        got = {
            (ring.query_of[sub], docno)
            for e, sub in alerted
            for docno, _, _ in e.subscriptions[sub].mailbox.take()
        }
        want = {(i, corpus.docnos[j]) for j in picked for i in ring.oracle[j]}
        wrong += len(got ^ want)
        candidates += report.candidates
        for kind, c in report.kinds.items():
            base = kind.split(".")[0]
            messages[base] += c.messages
            size[base] += c.bytes
    return {
        "resolution": resolution,
        "batch": batch,
        "documents": docs,
        "alerts_wrong": wrong,
        "batches_held_out": sim.held_out - held_out,  # delivered only when their hold ran out
        "seconds": time.perf_counter() - start,
        "candidates_per_doc": candidates / docs,
        "bytes_per_doc": {k: size[k] / docs for k in KINDS if size[k]},
        "messages_per_doc": {k: messages[k] / docs for k in KINDS if messages[k]},
        "total_bytes_per_doc": sum(size.values()) / docs,
        "total_messages_per_doc": sum(messages.values()) / docs,
    }


def plot(runs: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, what, label in (
        (axes[0], "bytes", "bytes per document"),
        (axes[1], "messages", "messages per document"),
    ):
        for resolution, style in (("td", "-"), ("bf", "--")):
            mine = sorted(
                (r for r in runs if r["resolution"] == resolution), key=lambda r: r["batch"]
            )
            xs = [r["batch"] for r in mine]
            for kind, color in zip(KINDS, ("C0", "C1", "C2", "C3", "C4")):
                ys = [r[f"{what}_per_doc"].get(kind, 0) for r in mine]
                if any(ys):
                    ax.plot(
                        xs,
                        ys,
                        style,
                        color=color,
                        marker="o",
                        ms=3,
                        label=f"{kind} ({resolution.upper()})",
                    )
            ax.plot(
                xs,
                [r[f"total_{what}_per_doc"] for r in mine],
                style,
                color="k",
                marker="o",
                ms=3,
                label=f"total ({resolution.upper()})",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("documents per batch")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("MHI, Skew (1,000 nodes, 100,000 queries): cost per document against batch size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, help="prep output (default: generate in-process)")
    p.add_argument("--docs", type=int, default=2048)
    p.add_argument("--batches", default="1,4,16,64")
    p.add_argument("--strategy", default="mhi")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    writable(args.out)
    batches = [int(b) for b in args.batches.split(",")]
    corpus = (
        load_prep(args.corpus)
        if args.corpus
        else generated(max(args.docs, 2), args.seed, 46654, 178.0)
    )
    lab = Lab(corpus, Scale(nodes=args.nodes, queries=args.queries, docs=args.docs, seed=args.seed))
    ring = IndexedRing(lab, IndexSpec(args.strategy, "skew"), 1, "[batching]")
    todo = [(r, b) for r in ("td", "bf") for b in batches]
    runs = []
    while todo:  # two at a time: one a core
        started = [(r, b, Background(publish, ring, r, b, args.docs)) for r, b in todo[:2]]
        todo = todo[2:]
        for r, b, job in started:
            runs.append(job.result())
            one = runs[-1]
            print(
                f"{r} batch {b}: {one['total_bytes_per_doc']:.0f} B/doc, "
                f"{one['total_messages_per_doc']:.1f} messages/doc, {one['seconds']:.1f}s, "
                f"{one['alerts_wrong']} alerts wrong",
                file=sys.stderr,
                flush=True,
            )
    out = {
        "benchmark": "bench_batching",
        "strategy": args.strategy,
        "workload": "skew",
        "corpus": corpus.describe(),
        "scale": {
            "nodes": args.nodes,
            "queries": args.queries,
            "docs": args.docs,
            "seed": args.seed,
        },
        "runs": runs,
    }
    (args.out / "bench_batching.json").write_text(json.dumps(out, indent=1) + "\n")
    plot(runs, args.out / "bench_batching.png")
    print(f"wrote {args.out / 'bench_batching.json'} and bench_batching.png")
    return 0 if all(r["alerts_wrong"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
