"""Runs: what one point of the evaluation is, and the passes that measure many at once.

A run is one point of the evaluation: an indexing strategy over a workload, a resolution
method, a piggyback depth, and the documents measured (all, or the second half as in the
paper's section 8.4), at a scale (`Scale`). Where a query is indexed depends on neither
resolution nor piggyback, so a ring is indexed once per IndexSpec
(cqengine.evaluation.passes.rings) and every run publishes on forked copies of it
(cqengine.evaluation.passes.publishing).

Term Dialogue and Bloom filter runs of one configuration differ only once a QN holds its
candidates, so they are measured in one pass: every QN resolves its candidates both ways
(the shadow resolution of cqengine.evaluation.measuring.measure.Shadows, its messages
counted under `bf:` kinds) and each run is read off the ledger as if it had been alone
(cqengine.evaluation.passes.readoff) — which tests/evaluation/test_evaluation.py checks
against runs made separately. Piggyback depths likewise differ only in what a QN knows of
the document (the announcement's tree does not depend on k, and a shallower depth's succ ids
are the first of a deeper one's), so a ring's runs over the same documents are one pass: the
announcement carries the deepest depth and every QN also prunes and resolves as each
shallower depth would have (its shadow depths, under `kD:` kinds and counters, with the
announcement bytes each would have saved). Only the host's own method and depth sends its
resolution messages: every shadow is measured (cqengine.evaluation.measuring.meters.Meter),
its messages worked out from the DN's answers and counted as echoes, as its run alone would
have sent them. Every method and depth must match the same queries at every QN.

The indexes of one workload differ only in where each query sits; the announcement does
not depend on them, so a workload is one pass too: one ring hosts the others' indexes as
shadow indexes (cqengine.evaluation.measuring.measure.ShadowIndex, under INDEX/kD: kinds and
counters), which every QN also resolves at the depths wanted of them. A shadow index's
matches are measured too (the report to the DN and the alert batches it would send are
counted), and checked against the matcher as the host's alerts are. A shadow index
measuring the second half joins the pass when the second half starts.

`RunResult` is what a run measured; the lab (cqengine.evaluation.passes.lab) makes the runs
asked for, each once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mmh3
import numpy as np

from cqengine.core.terms.settings import RESOLUTIONS
from cqengine.evaluation import EvaluationError
from cqengine.evaluation.measuring.sim import ANNOUNCE, RESOLUTION
from cqengine.evaluation.measuring.tags import depth_tag


@dataclass(frozen=True, order=True)
class IndexSpec:
    strategy: str
    workload: str
    synopsis_k: int = 0  # SAP-MHI: this many popular terms, sampled from the first half

    @property
    def name(self) -> str:
        k = f"(K={self.synopsis_k})" if self.synopsis_k else ""
        return f"{self.strategy}{k}/{self.workload}"

    @property
    def tag(self) -> str:
        """Its name as a shadow index (a ledger tag: no ':', '.' or '/')."""
        return f"{self.strategy}{self.synopsis_k or ''}"


@dataclass(frozen=True, order=True)
class RunSpec:
    index: IndexSpec
    resolution: str
    piggyback: int = 0
    documents: str = "all"  # or "second": only the second half is published and measured

    @property
    def name(self) -> str:
        return f"{self.index.name}/{self.resolution}/k={self.piggyback}"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "strategy": self.index.strategy,
            "workload": self.index.workload,
            "synopsis_k": self.index.synopsis_k,
            "resolution": self.resolution,
            "piggyback": self.piggyback,
        }


@dataclass(frozen=True)
class Pass:
    """One pass over the documents, measuring every (resolution, depth) of its methods and
    depths as runs: the engine resolves by the first method (TD first) at the deepest
    depth, by the other as its shadow resolution and at the other depths as its shadow
    piggyback depths. The workload's other indexes ride along as shadow indexes, each
    resolved by every method at its own depths (all of them among the pass's)."""

    index: IndexSpec
    resolutions: tuple[str, ...]
    depths: tuple[int, ...]  # ascending
    documents: str
    shadows: tuple[Pass, ...] = ()  # the shadow indexes': their index, depths and documents

    @property
    def resolution(self) -> str:
        return self.resolutions[0]

    @property
    def shadow(self) -> str:
        return self.resolutions[1] if len(self.resolutions) > 1 else ""

    @property
    def piggyback(self) -> int:
        return self.depths[-1]

    @property
    def runs(self) -> list[RunSpec]:
        return [
            RunSpec(self.index, r, d, self.documents) for d in self.depths for r in self.resolutions
        ] + [run for shadow in self.shadows for run in shadow.runs]

    def part(self, index: IndexSpec) -> Pass:
        """The part of the pass that measures this index: itself or a shadow index."""
        return next(p for p in (self, *self.shadows) if p.index == index)

    def index_tag(self, index: IndexSpec) -> str:
        """What the index's messages and counters are tagged with: its name if a shadow."""
        return "" if index == self.index else index.tag

    def run_tag(self, run: RunSpec) -> str:
        """The tag of the run's depth (INDEX/kD; none for the host's own depth)."""
        index = self.index_tag(run.index)
        return depth_tag(run.piggyback, index) if index or run.piggyback != self.piggyback else ""

    @property
    def name(self) -> str:
        more = f" + {len(self.shadows)} shadow indexes" if self.shadows else ""
        depths = ",".join(map(str, self.depths))
        return f"{self.index.name}/{'+'.join(self.resolutions)}/k={depths}{more}"


def passes(keys: dict[tuple, str]) -> list[Pass]:
    """The passes that measure these runs ((index, resolution, depth) -> documents): one
    per workload. Its host index resolves at every depth any index wants (the
    announcement carries the deepest and knows what each shallower one would have
    saved), so the host is the index wanted at most depths: the fewest made in vain.
    Every index runs every method wanted of the workload, and publishes all documents if
    any of its runs measures all."""
    parts: dict[IndexSpec, tuple[set, str]] = {}
    methods: dict[str, set] = {}
    for (index, resolution, depth), documents in keys.items():
        got, docs = parts.get(index, (set(), "second"))
        parts[index] = (got | {depth}, "all" if "all" in (docs, documents) else docs)
        methods.setdefault(index.workload, set()).add(resolution)
    out = []
    for kind in sorted(methods):
        resolutions = tuple(r for r in RESOLUTIONS if r in methods[kind])  # TD first
        mine = sorted(
            (len(d), docs == "all", index)
            for index, (d, docs) in parts.items()
            if index.workload == kind
        )
        host = mine[-1][-1]
        shadows = tuple(
            Pass(index, resolutions, tuple(sorted(parts[index][0])), parts[index][1])
            for *_, index in mine[:-1]
        )
        every = tuple(sorted(set().union(*(parts[index][0] for *_, index in mine))))
        documents = "all" if any(p.documents == "all" for p in shadows) else parts[host][1]
        out.append(Pass(host, resolutions, every, documents, shadows))
    return out


def place(seed: int, what: str, name: object, n: int) -> int:
    """A seeded, process-independent choice among n (a query's home, a document's DN)."""
    return mmh3.hash64(f"{seed}:{what}:{name}".encode(), signed=False)[0] % n


@dataclass
class RunResult:
    spec: RunSpec
    positions: np.ndarray  # the corpus positions published, ascending
    per_doc: dict[str, np.ndarray]  # candidates, matches, alerts, and KIND:messages / KIND:bytes
    ledger: dict[str, list[int]]  # the ring ledger's growth over the run: kind -> [messages, bytes]
    load: list[int]  # query-index entries per node
    oracle: dict[str, int]
    seconds: dict[str, float]
    half: int  # first position of the second half
    longest: list[dict] = field(
        default_factory=list
    )  # the longest inverted lists: term, df, entries

    def measure(self, documents: str = "all") -> dict:
        """The paper's metrics over all documents or the second half, with the ledger they
        come from (requests and replies: `.reply` kinds)."""
        mask = (
            self.positions >= self.half
            if documents == "second"
            else np.ones(len(self.positions), bool)
        )
        n = int(mask.sum())
        if n == 0:
            raise EvaluationError(
                f"run {self.spec.name} published none of the {documents} documents"
            )
        kinds: dict[str, list[int]] = {}
        for key in sorted(self.per_doc):
            kind, _, what = key.rpartition(":")
            if kind:
                kinds.setdefault(kind, [0, 0])[what == "bytes"] += int(
                    self.per_doc[key][mask].sum()
                )

        def total(methods):
            picked = [c for k, c in kinds.items() if k.split(".")[0] in methods]
            return sum(c[0] for c in picked), sum(c[1] for c in picked)

        res_m, res_b = total(RESOLUTION)
        ann_m, ann_b = total(ANNOUNCE)
        bloom_m, bloom_b = total(("GetBloom",))
        return {
            "documents": n,
            "queries_per_doc": float(self.per_doc["candidates"][mask].mean()),
            "resolution_bytes_per_doc": res_b / n,
            "resolution_messages_per_doc": res_m / n,
            "announce_bytes_per_doc": ann_b / n,
            "announce_messages_per_doc": ann_m / n,
            "bloom_filters_per_doc": kinds.get("GetBloom", [0, 0])[0] / n,
            "bloom_bytes_per_doc": bloom_b / n,  # requests and the filters they fetch
            "matches_per_doc": float(self.per_doc["matches"][mask].mean()),
            "alerts_per_doc": float(self.per_doc["alerts"][mask].mean()),
            "ledger": kinds,
        }

    def load_percentiles(self) -> list[int]:
        return percentiles(self.load)


def percentiles(load: list[int]) -> list[int]:
    """1st, 50th and 99th percentile of index entries per node (nearest rank): the paper's
    load distribution."""
    return [int(v) for v in np.percentile(load, [1, 50, 99], method="nearest")]
