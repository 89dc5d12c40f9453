"""What the experiments run on: a corpus, its query workloads, the matcher's answers and
the popular terms a synopsis samples; `Inputs` makes each once for every run at a scale.

Documents are ordered by docno, so "the first half" (section 8.4's sample) is well
defined and the same for every run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cqengine.core.terms.synopsis import coin_tosses, rank_key
from cqengine.evaluation import EvaluationError
from cqengine.evaluation.setup.forks import Background
from cqengine.evaluation.setup.matcher import document_terms, match_documents
from cqengine.evaluation.setup.scale import Scale
from cqengine.text.analysis import term_id
from cqengine.text.workload import generate_queries


@dataclass
class Corpus:
    docnos: list[str]
    terms: list[list[str]]  # each document's distinct analyzed terms
    source: str
    dropped_duplicates: int = 0

    def __len__(self) -> int:
        return len(self.docnos)

    @cached_property
    def df(self) -> dict[str, int]:
        """Document frequency of every term: the paper's term statistics (OI, workloads)."""
        return dict(Counter(t for terms in self.terms for t in terms))

    @cached_property
    def sets(self) -> list[frozenset[str]]:
        return [frozenset(t) for t in self.terms]

    def head(self, n: int) -> Corpus:
        if n > len(self):
            raise EvaluationError(
                f"the corpus ({self.source}) has {len(self)} documents; --docs asks for {n}"
            )
        return Corpus(self.docnos[:n], self.terms[:n], self.source, self.dropped_duplicates)

    @property
    def generated(self) -> bool:
        """Written by cqengine.text.corpus (`cqengine gen-corpus`), whose docnos say so."""
        return bool(self.docnos) and all(d.startswith("GEN-") for d in self.docnos)

    def describe(self) -> dict:
        sizes = [len(t) for t in self.terms]
        return {
            "source": self.source,
            "generated": self.generated,
            "documents": len(self),
            "vocabulary": len(self.df),
            "unique_terms_per_document": sum(sizes) / max(len(sizes), 1),
            "duplicate_docnos_dropped": self.dropped_duplicates,
        }


def load_prep(directory: Path) -> Corpus:
    """The documents `cqengine prep` wrote into `directory`, by docno (first of duplicates)."""
    docs = directory / "documents.parquet"
    if not docs.exists():
        raise EvaluationError(
            f"{directory}: no documents.parquet here; run `cqengine prep "
            f"--input CORPUS --out {directory}` first"
        )
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(docs, columns=["docno", "terms"])
    except Exception as e:  # a damaged or foreign file: say which
        raise EvaluationError(f"{docs}: cannot read it as prep output ({e})") from None
    rows = sorted(
        zip(table.column("docno").to_pylist(), table.column("terms").to_pylist()),
        key=lambda r: r[0],
    )
    docnos, terms, dropped = [], [], 0
    for docno, ts in rows:
        if docnos and docnos[-1] == docno:
            dropped += 1
            continue
        docnos.append(docno)
        terms.append(list(dict.fromkeys(ts or [])))
    return Corpus(docnos, terms, str(directory), dropped)


def generated(n_docs: int, seed: int, vocab_size: int, mean_terms: float) -> Corpus:
    """A synthetic corpus analyzed here with the engine's analyzer, as prep would."""
    from cqengine.text.corpus import generate_corpus

    docs = list(generate_corpus(n_docs, seed=seed, vocab_size=vocab_size, mean_terms=mean_terms))
    return Corpus(
        [d.docno for d in docs],
        [sorted(document_terms(d.text, d.title)) for d in docs],
        f"generated: {n_docs} documents, {vocab_size}-word vocabulary, seed {seed}",
    )


def summary_of(directory: Path) -> dict | None:
    path = directory / "summary.json"
    return json.loads(path.read_text()) if path.exists() else None


def workload(corpus: Corpus, kind: str, n: int, mean_size: float, seed: int) -> list[list[str]]:
    """Section 7.1's queries over the corpus's term statistics (cqengine.text.workload, which the
    Spark job `cqengine workload` also draws with: the same queries for the same seed)."""
    return generate_queries(corpus.df, n, kind, mean_size, seed)


def oracle(corpus: Corpus, queries: list[list[str]]) -> list[list[int]]:
    """Per document, the queries that match it: what every run's alerts must equal."""
    return match_documents(queries, corpus.sets)


def popular_ranking(corpus: Corpus, sample: range, k: int, y: int = 32) -> list[str]:
    """The K terms a coin-toss synopsis of the sample documents holds, most popular first.

    This is the synopsis gossip converges to, computed centrally: the top K of each term's
    largest CT(y) over the sample (with one register merging is exact; see
    cqengine.core.terms.synopsis and tests/core/placement/test_gossip.py). The top K' of it for
    K' < K is the synopsis of size K'.
    """
    best: dict[int, tuple[int, ...]] = {}
    names: dict[int, str] = {}
    for i in sample:
        for t in corpus.terms[i]:
            x = term_id(t)
            names[x] = t
            v = coin_tosses(x, corpus.docnos[i], y)
            if best.get(x, (0,)) < v:
                best[x] = v
    return [names[x] for x, _ in sorted(best.items(), key=rank_key)[:k]]


class Inputs:
    """What every run at one scale on one corpus shares, each made once: the corpus cut to
    the scale, its query workloads, the matcher's answers (worked out in a process of its
    own while a ring is indexed), the popular terms a synopsis samples; with the time each
    took and where progress is told. The base of the lab (cqengine.evaluation.passes.lab.Lab),
    apart from it because the rings it builds (cqengine.evaluation.passes.rings) read these too."""

    def __init__(self, corpus: Corpus, scale: Scale, quiet: bool = False) -> None:
        scale.check()
        self.corpus = corpus.head(scale.docs)
        self.scale = scale
        self.half = scale.docs // 2
        self.quiet = quiet
        self._workloads: dict[str, list[list[str]]] = {}
        self._oracles: dict[str, list[list[int]]] = {}
        self._popular: tuple[int, list[str]] = (0, [])
        self.err = open(os.devnull, "w") if quiet else sys.stderr  # progress bars go here
        self.timings: dict[str, float] = Counter()

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def workload(self, kind: str) -> list[list[str]]:
        if kind not in self._workloads:
            t = time.perf_counter()
            s = self.scale
            self._workloads[kind] = workload(self.corpus, kind, s.queries, s.mean_size, s.seed)
            self.timings["workloads"] += time.perf_counter() - t
        return self._workloads[kind]

    def start_oracle(self, kind: str) -> None:
        """Start working out the workload's oracle in a process of its own: it takes the
        other core while this one indexes a ring (`oracle` then waits for it)."""
        if kind not in self._oracles:
            queries = self.workload(kind)
            self.say(
                f"matching {self.scale.queries} {kind} queries against {len(self.corpus)} "
                f"documents (the oracle)"
            )
            self._oracles[kind] = Background(oracle, self.corpus, queries)

    def oracle(self, kind: str) -> list[list[int]]:
        t = time.perf_counter()
        self.start_oracle(kind)
        got = self._oracles[kind]
        if isinstance(got, Background):
            got = self._oracles[kind] = got.result()
        self.timings["oracle"] += time.perf_counter() - t  # what it cost this process: the waiting
        return got

    def popular(self, k: int, k_max: int) -> frozenset[str]:
        """The K most popular terms of the first half, by coin-toss synopsis (one ranking of
        the largest K serves every smaller one)."""
        if self._popular[0] < k:
            t = time.perf_counter()
            self._popular = (
                max(k, k_max),
                popular_ranking(self.corpus, range(self.half), max(k, k_max)),
            )
            self.timings["synopsis"] += time.perf_counter() - t
        return frozenset(self._popular[1][:k])
