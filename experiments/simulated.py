"""What the benchmarks of a simulated ring over a corpus share (bench_boolean,
bench_headroom, bench_header_cover): their options, the corpus's documents, every query
subscribed in batches, and the check of the alerts against the matcher's."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.text.corpus import generate_corpus
from cqengine.text.trec import TrecDoc, iter_trec

BATCH = 1000  # queries per SubscribeBatch


def load(corpus: Path | None, docs: int, seed: int) -> list[TrecDoc]:
    if corpus is None:
        return list(generate_corpus(docs, seed=seed, vocab_size=20000, mean_terms=120))
    out = []
    for path in sorted(corpus.glob("*.trec*")):
        for d in iter_trec(path):
            out.append(d)
            if len(out) == docs:
                return out
    return out


def subscribed(sim: EngineSimulator, queries: list[str]) -> list:
    """Every query subscribed, in SubscribeBatch calls: the replies; none may be refused."""
    replies = []
    for i in range(0, len(queries), BATCH):
        replies += sim.subscribe_many(queries[i : i + BATCH])
    refused = [r for r in replies if not hasattr(r, "subscription_id")]
    if refused:
        raise SystemExit(f"{len(refused)} queries refused, e.g. {refused[0]}")
    return replies


def corpus_options(
    p: argparse.ArgumentParser, queries: int, mean_size: float, docs: int, out: Path
) -> None:
    """The options of a benchmark of a simulated ring over a corpus (this one's and its
    siblings')."""
    p.add_argument("--corpus", type=Path, help="a directory of TREC files (default: generate)")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--queries", type=int, default=queries)
    p.add_argument("--mean-size", type=float, default=mean_size)
    p.add_argument("--docs", type=int, default=docs)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=out)


def check(alerts: list, want: set, what: str) -> None:
    got = Counter(alerts)
    if set(got) != want or max(got.values(), default=1) > 1:
        raise SystemExit(
            f"{what}: alerts differ from the matcher's (missing {len(want - set(got))}, "
            f"wrong {len(set(got) - want)}, repeated {sum(v > 1 for v in got.values())})"
        )
