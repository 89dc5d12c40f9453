"""Runs: one indexed ring per (strategy, workload, synopsis); one pass per workload on forks.

A run is one point of the evaluation: an indexing strategy over a workload, a resolution
method, a piggyback depth, and the documents measured (all, or the second half as in the
paper's section 8.4). Where a query is indexed depends on neither resolution nor
piggyback, so a ring is indexed once per IndexSpec — through the engine, subscription by
subscription, each placed at the owner a lookup finds (answered by the ring's oracle:
the ring stands still, and no run measures indexing) — and every run publishes on forked copies of
it: publishing never touches the indexed ring, so each run starts from the same state a
freshly built ring with that run's settings would have (tests/test_evaluation.py checks
this). A run's documents are shared out among worker processes (the machine's cores);
each document's publishing node is a seeded hash of its docno, so results do not depend
on the number of workers.

Term Dialogue and Bloom filter runs of one configuration differ only once a QN holds its
candidates, so they are measured in one pass: every QN resolves its candidates both ways
(the shadow resolution of cqengine.evaluation.measure.Shadows, its messages counted
under `bf:` kinds) and each run is read off the ledger as if it had been alone — which
tests/test_evaluation.py checks against runs made separately. Piggyback depths likewise
differ only in what a QN knows of the document (the announcement's tree does not depend
on k, and a shallower depth's succ ids are the first of a deeper one's), so a ring's
runs over the same documents are one pass: the announcement carries the deepest depth
and every QN also prunes and resolves as each shallower depth would have (its shadow
depths, under `kD:` kinds and counters, with the announcement bytes each would have
saved). Only the host's own method and depth sends its resolution messages: every shadow
is measured (cqengine.evaluation.meters.Meter), its messages worked out from the DN's
answers and counted as echoes, as its run alone would have sent them. Every method and
depth must match the same queries at every QN.

The indexes of one workload differ only in where each query sits; the announcement does
not depend on them, so a workload is one pass too: one ring hosts the others' indexes as
shadow indexes (cqengine.evaluation.measure.ShadowIndex, under INDEX/kD: kinds and counters), which
every QN also resolves at the depths wanted of them. A shadow index's matches are
measured too (the report to the DN and the alert batches it would send are counted),
and checked against the matcher as the host's alerts are. A shadow index measuring the
second half joins the pass when the second half starts.

Every alert a worker sees is checked against the matcher: the subscriber's mailbox is
emptied after each document (as a stream would) and the queries alerted must be exactly
the queries the matcher says the document matches.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import resource
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import wait

import mmh3
import numpy as np

from cqengine.core.settings import RESOLUTIONS, Settings
from cqengine.evaluation import EvaluationError
from cqengine.evaluation.inputs import Corpus, oracle, popular_ranking, workload
from cqengine.evaluation.measure import ShadowIndex, Shadows
from cqengine.evaluation.sim import ANNOUNCE, RESOLUTION, EngineSimulator
from cqengine.evaluation.tags import depth_tag, resolution_tag
from cqengine.progress import Progress
from cqengine.proto import cqengine_pb2 as pb

ALERTING = ("Matched", "Deliver")  # what a shadow index's matches would send: its own, by name

WORKER_GC = (50_000, 20, 100)  # collector thresholds while a worker publishes


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
    shadows: tuple["Pass", ...] = ()  # the shadow indexes': their index, depths and documents

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

    def part(self, index: IndexSpec) -> "Pass":
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


@dataclass
class Scale:
    nodes: int = 1000
    queries: int = 100_000
    docs: int = 10_000
    seed: int = 1
    mean_size: float = 5.0
    workers: int = 2
    bloom_bits: int = 1024
    bloom_hashes: int = 5

    def check(self) -> None:
        if self.nodes < 1 or self.queries < 1 or self.docs < 2 or self.workers < 1:
            raise EvaluationError(
                "--nodes, --queries and --workers must be positive and --docs at least 2"
            )


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


class Lab:
    """Runs specs at a scale on a corpus, each once, sharing workloads, oracles and rings."""

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
        self.results: dict[tuple, RunResult] = {}
        self.timings: dict[str, float] = Counter()

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    # ---- what runs share ----------------------------------------------------------------

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

    # ---- running ------------------------------------------------------------------------

    def run(self, specs: list[RunSpec]) -> dict[RunSpec, RunResult]:
        """Results for every spec. A spec measuring the second half is served by a run that
        published all documents when one is wanted anyway; the runs of one workload are
        made in one pass (every index, method and depth)."""
        wanted: dict[tuple, str] = {}
        for s in specs:
            key = (s.index, s.resolution, s.piggyback)
            wanted[key] = "all" if "all" in (s.documents, wanted.get(key)) else "second"
        todo = {
            k: d
            for k, d in wanted.items()
            if k not in self.results or (d == "all" and self.results[k].spec.documents != "all")
        }
        k_max = max([k[0].synopsis_k for k in wanted] + [1])
        plan = passes(todo)
        total = sum(len(p.runs) for p in plan)
        done = 0
        for p in plan:
            label = (
                f"[{done + 1}{'-' + str(done + len(p.runs)) if len(p.runs) > 1 else ''}/{total}]"
            )
            done += len(p.runs)
            host = IndexedRing(self, p.index, k_max, label)
            rings = {p.index: host} | {
                part.index: IndexedRing(self, part.index, k_max, label, host) for part in p.shadows
            }
            for spec, result in zip(p.runs, host.publish(p, label, rings)):
                self.results[(spec.index, spec.resolution, spec.piggyback)] = result
            for ring in rings.values():
                ring.close()
            del rings, host
            gc.unfreeze()
            gc.collect()
        return {s: self.results[(s.index, s.resolution, s.piggyback)] for s in specs}

    def memory(self) -> dict[str, float]:
        """Peak resident memory, MiB: this process, and the largest worker."""
        return {
            "main_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worker_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }


class IndexedRing:
    """A simulated ring holding one workload's queries, indexed by one strategy: each
    subscribed through the engine, or filed again from the ring of another strategy
    (`host`) when it is to be that ring's shadow index."""

    def __init__(
        self, lab: Lab, index: IndexSpec, k_max: int, label: str, host: "IndexedRing | None" = None
    ) -> None:
        self.lab, self.index = lab, index
        s = lab.scale
        popular = lab.popular(index.synopsis_k, k_max) if index.strategy == "sap-mhi" else None
        settings = Settings(
            strategy=index.strategy,
            df=lab.corpus.df,
            popular=popular,
            seed=s.seed,
            bloom_bits=s.bloom_bits,
            bloom_hashes=s.bloom_hashes,
        ).validate()
        queries = lab.workload(index.workload)
        lab.start_oracle(index.workload)
        t = time.perf_counter()
        self.sim = EngineSimulator(s.nodes, settings, seed=s.seed)
        self.addresses = sorted(self.sim.engines)
        self.query_of: dict[int, int] = {}
        self._filed: dict | None = None
        progress = Progress(
            f"{label} indexing {index.name}", len(queries), unit="queries", out=lab.err
        )
        if host is None:
            # the ring stands still and no run reads indexing's messages: each subscription
            # is placed at the owner its lookup would find, found without the lookup's hops
            with self.sim.ring.instant_lookups():
                for i, q in enumerate(queries):
                    home = self.addresses[place(s.seed, "query", i, s.nodes)]
                    self.query_of[self.sim.subscribe_terms(q, via=home).subscription_id] = i
                    if i % 256 == 0:
                        progress.update(i, i)
        else:
            self._refile(host, progress)
        progress.close()
        # each subscription's asking order is the same in every ring of its workload
        self.orders: dict[int, list[int]] = host.orders if host is not None else {}
        for e in self.sim.engines.values():  # once here, not again in every run's workers
            e.index.compile((s.bloom_bits, s.bloom_hashes), self.orders)
        self.load = self.sim.load()
        self.longest = longest_lists(self.sim, lab.corpus.df)
        self.seconds = time.perf_counter() - t
        lab.timings["indexing"] += self.seconds
        lab.say(
            f"{label} indexed {len(queries)} queries by {index.name} in {self.seconds:.1f}s; "
            f"entries per node (1st, 50th, 99th percentile) {percentiles(self.load)}"
        )
        self.oracle = lab.oracle(index.workload)
        gc.collect()
        gc.freeze()  # forked workers then share these pages instead of copying them for GC

    def _refile(self, host: "IndexedRing", progress: Progress) -> None:
        """File the host's subscriptions, in the order they were made, as this ring's
        strategy chooses, each at the owner of its key: what subscribing them here gives
        (the pass then equals runs of their own: tests/test_evaluation.py), without the
        lookups, which the pass never reads and which made most of indexing's time."""
        owners = self.sim.ring.oracle()
        for i, (sub_id, (original, pairs)) in enumerate(host.filed().items()):
            request = pb.IndexRequest()
            entry = request.entry
            entry.CopyFrom(original)
            entry.index_id = pairs[self.sim.engines[entry.home].choose(pairs, sub_id)][0]
            owner = self.sim.engines[owners.owner(entry.index_id).address]
            if not owner.handle("Index", request).owner:
                raise EvaluationError(f"{owner.me.address} refused the key its ring says it owns")
            if i % 256 == 0:
                progress.update(i, i)
        self.query_of = host.query_of  # the very subscriptions

    def filed(self) -> dict[int, tuple[pb.QueryEntry, list[tuple[int, str]]]]:
        """Every subscription's entry, in the order they were made, with its (term id,
        term) pairs: what filing them again as another strategy chooses starts from
        (worked out once for every ring filed from this one)."""
        if self._filed is None:
            entries = {
                e.subscription_id: e
                for engine in self.sim.engines.values()
                for key in engine.index.keys()
                for e in engine.index.get(key)
            }
            self._filed = {
                sub_id: (
                    entries[sub_id],
                    list(zip(entries[sub_id].term_ids, entries[sub_id].terms)),
                )
                for sub_id in self.query_of
            }
        return self._filed

    def close(self) -> None:
        self._filed = None
        del self.sim  # the caller unfreezes and collects once every ring of the pass is closed

    def publish(
        self, p: Pass, label: str, rings: dict[IndexSpec, "IndexedRing"]
    ) -> list[RunResult]:
        """One pass over the documents measuring all its runs, on this ring (the pass's
        host index) with the other rings' indexes as shadow indexes."""
        lab = self.lab
        first = lab.half if p.documents == "second" else 0
        positions = list(range(first, len(lab.corpus)))
        workers = max(1, min(lab.scale.workers, len(positions)))
        t = time.perf_counter()
        chunks = self._fork(p, positions, workers, label, rings)
        seconds = time.perf_counter() - t
        lab.timings["publishing"] += seconds
        results = []
        columns = Columns.of(chunks)
        for run in p.runs:
            ring = rings[run.index]
            result = merge(
                run,
                p,
                columns,
                chunks,
                ring.load,
                lab.half,
                {"index": ring.seconds, "publish": seconds},
            )
            result.longest = ring.longest
            o = result.oracle
            if o["missing"] or o["unexpected"] or o["wrong_docno"]:
                raise EvaluationError(f"run {run.name}: alerts differ from the matcher's: {o}")
            if o["disagreements"]:
                raise EvaluationError(
                    f"pass {p.name}: its methods or depths matched different queries at "
                    f"{o['disagreements']} QNs"
                )
            m = result.measure(run.documents)
            lab.say(
                f"{label} {run.name}: {len(result.positions)} documents in {seconds:.1f}s; "
                f"{m['queries_per_doc']:.0f} queries/doc, {m['resolution_bytes_per_doc']:.0f} "
                f"resolution bytes/doc; {o['alerted']} alerts = matcher"
            )
            results.append(result)
        return results

    def _fork(
        self,
        p: Pass,
        positions: list[int],
        workers: int,
        label: str,
        rings: dict[IndexSpec, "IndexedRing"],
    ) -> list[dict]:
        ctx = mp.get_context("fork")
        counts = [ctx.Value("q", 0, lock=False) for _ in range(workers)]
        pipes = [ctx.Pipe(duplex=False) for _ in range(workers)]
        procs = [
            ctx.Process(
                target=self._work,
                args=(p, positions[w::workers], counts[w], pipes[w][1], rings),
                daemon=True,
            )
            for w in range(workers)
        ]
        for proc in procs:
            proc.start()
        for _, send in pipes:
            send.close()
        name = p.name
        progress = Progress(f"{label} publishing {name}", len(positions), out=self.lab.err)
        waiting = {recv: w for w, (recv, _) in enumerate(pipes)}
        chunks: list[dict] = []
        try:
            while waiting:
                for recv in wait(list(waiting), timeout=0.2):
                    try:
                        status, payload = recv.recv()
                    except EOFError:
                        status, payload = "error", f"worker {waiting[recv]} died without a word"
                    del waiting[recv]
                    if status != "ok":
                        raise EvaluationError(f"pass {name}: a worker failed:\n{payload}")
                    chunks.append(payload)
                done = sum(c.value for c in counts)
                progress.update(done, done)
        finally:
            progress.close()
            for proc in procs:
                proc.join(timeout=5 if not waiting else 0)
                if proc.is_alive():
                    proc.kill()
        return chunks

    def _work(self, p: Pass, positions: list[int], count, conn, rings: dict) -> None:
        """A worker: publish my share of the documents on my copy of the ring."""
        # The ring is frozen out of the collector's reach; what a document allocates is
        # short-lived and nearly all acyclic, so the default young collections only cost
        # time. Cycles are still collected, less often.
        gc.set_threshold(*WORKER_GC)
        answer(conn, self._publish_share, p, positions, count, rings)

    def _publish_share(
        self, p: Pass, positions: list[int], count, rings: dict[IndexSpec, "IndexedRing"]
    ) -> dict:
        sim, corpus, seed, half = self.sim, self.lab.corpus, self.lab.scale.seed, self.lab.half
        settings = sim.settings  # every node's
        settings.resolution, settings.piggyback = p.resolution, p.piggyback
        settings.validate()
        shadows = Shadows(p.shadow, p.depths[:-1])
        shadows.check(settings)
        sim.observe(shadows)
        shadowed = Counter()  # the counters of shadows (TAG:NAME)
        alerted: list[tuple] = []
        for e in sim.engines.values():
            e.alert_listeners.append(lambda subs, e=e: alerted.extend((e, sub) for sub in subs))
        marks = {"all": (sim.ring.ledger.snapshot(), Counter())}  # where each half's growth starts
        rows: list[tuple] = []
        tally = {p.index_tag(part.index): Counter() for part in (p, *p.shadows)}
        self._host(p, "all", rings, shadows)
        for j in positions:  # ascending: the second half's shadow indexes join once it starts
            if j >= half and "second" not in marks:
                marks["second"] = (sim.ring.ledger.snapshot(), shadowed.copy())
                self._host(p, "second", rings, shadows)
            docno = corpus.docnos[j]
            alerted.clear()
            shadows.matched.clear()
            report = sim.publish_terms(
                docno,
                corpus.terms[j],
                via=self.addresses[place(seed, "doc", docno, len(self.addresses))],
            )
            got = set()
            for e, sub in alerted:
                for alerted_docno, _, _ in e.subscriptions[sub].mailbox.take():  # the stream's
                    tally[""]["wrong_docno"] += alerted_docno != docno
                got.add(self.query_of[sub])
            check(tally[""], got, self.oracle[j])
            for shadow in p.shadows:
                if shadow.documents == "all" or j >= half:
                    query_of = rings[shadow.index].query_of
                    check(
                        tally[shadow.index.tag],
                        {query_of[sub] for sub in shadows.matched.get(shadow.index.tag, ())},
                        self.oracle[j],
                    )
            counters = {k: n for k, n in report.counters.items() if ":" in k}
            shadowed.update(counters)
            rows.append(
                (
                    j,
                    report.candidates,
                    report.matches,
                    report.alerts,
                    {k: (c.messages, c.bytes) for k, c in report.kinds.items()},
                    counters,
                )
            )
            count.value += 1
        for t in tally.values():
            t["disagreements"] += sim.tally["shadow_disagreements"]
        after = sim.ring.ledger.snapshot()
        marks.setdefault("second", (after, shadowed.copy()))
        growth = {
            docs: {
                k: [
                    c.messages - before[k].messages if k in before else c.messages,
                    c.bytes - before[k].bytes if k in before else c.bytes,
                ]
                for k, c in after.items()
            }
            for docs, (before, _) in marks.items()
        }
        return {
            "rows": rows,
            "oracle": {t: dict(c) for t, c in tally.items()},
            "ledger": {docs: {k: v for k, v in g.items() if v[0]} for docs, g in growth.items()},
            "counters": {docs: dict(shadowed - since) for docs, (_, since) in marks.items()},
        }

    def _host(
        self, p: Pass, documents: str, rings: dict[IndexSpec, "IndexedRing"], shadows: Shadows
    ) -> None:
        """Host the shadow indexes that measure these documents on every node."""
        for shadow in p.shadows:
            if shadow.documents == documents:
                theirs = rings[shadow.index].sim.engines
                for address in self.sim.engines:
                    shadows.indexes.setdefault(address, {})[shadow.index.tag] = ShadowIndex(
                        theirs[address].index, shadow.depths
                    )


def answer(conn, fn, *args) -> None:
    """In a forked process: send fn's result, or the traceback that stopped it, and end."""
    try:
        conn.send(("ok", fn(*args)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()
        os._exit(0)  # no need to tear down a copy of the whole parent


class Background:
    """A function's result worked out in a forked process while this one goes on."""

    def __init__(self, fn, *args) -> None:
        ctx = mp.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=answer, args=(send, fn, *args), daemon=True)
        self._proc.start()
        send.close()

    def result(self):
        try:
            status, payload = self._recv.recv()
        except EOFError:
            status, payload = "error", "it died without a word"
        finally:
            self._recv.close()
            self._proc.join(timeout=5)
            if self._proc.is_alive():
                self._proc.kill()
        if status != "ok":
            raise EvaluationError(f"a background process failed:\n{payload}")
        return payload


def check(tally: Counter, got: set[int], want: list[int]) -> None:
    """Tally the queries alerted (or a shadow index matched) against the matcher's."""
    want = set(want)
    tally["expected"] += len(want)
    tally["alerted"] += len(got)
    tally["missing"] += len(want - got)
    tally["unexpected"] += len(got - want)


def longest_lists(sim: EngineSimulator, df: dict[str, int], n: int = 5) -> list[dict]:
    """The n longest inverted lists: a popular term that is often its queries' indexing term
    is what makes MHI's load (and candidates) uneven."""
    sizes = sorted(
        ((len(e.index.get(key)), key, e) for e in sim.engines.values() for key in e.index.keys()),
        reverse=True,
        key=lambda t: t[0],
    )[:n]
    out = []
    for size, key, e in sizes:
        entry = e.index.get(key)[0]
        term = entry.terms[list(entry.term_ids).index(key)]
        out.append({"term": term, "df": df.get(term, 0), "entries": size})
    return out


def measured_as(kinds: dict, run: RunSpec, p: Pass, counters: dict) -> dict:
    """A pass's ledger kinds as the run alone would have them. Resolution messages are
    tagged by index, depth and method (INDEX/kD/METHOD:KIND; no tag: the host index, the
    engine's own depth and method), so the run's are one tag's, with the messages a
    shadow measured instead of sending (echo:KIND and echo_bytes:KIND counters); a shadow
    index's Matched and Deliver are its measured ones (INDEX:KIND); the rest is shared,
    less the announcement bytes a shallower run would not have sent
    (kD:announce_bytes_saved)."""
    index = p.index_tag(run.index)
    shallower = run.piggyback != p.piggyback
    want = resolution_tag(p.run_tag(run), run.resolution, p.resolution)
    echoes = {
        kind: (n, counters.get(f"echo_bytes:{kind}", 0))
        for name, n in counters.items()
        for what, _, kind in [name.partition(":")]
        if what == "echo"
    }
    out = {}
    for kind in kinds.keys() | echoes.keys():
        tag, _, name = kind.rpartition(":")
        method = name.split(".")[0]
        if tag == (want if method in RESOLUTION else index if method in ALERTING else ""):
            m, b = kinds.get(kind, (0, 0))
            e = echoes.get(kind, (0, 0))
            out[name] = (m + e[0], b + e[1])
    if shallower and "Announce" in out:
        m, b = out["Announce"]
        out["Announce"] = (
            m,
            b - counters.get(f"{depth_tag(run.piggyback)}:announce_bytes_saved", 0),
        )
    return out


@dataclass
class Columns:
    """A pass's rows, one per document published, as columns in the order of their
    positions: every run of the pass is read off them (a ledger kind or counter a
    document did not grow is 0 there)."""

    positions: np.ndarray
    candidates: np.ndarray
    matches: np.ndarray
    alerts: np.ndarray
    kinds: dict[str, tuple[np.ndarray, np.ndarray]]  # ledger kind -> messages, bytes
    counters: dict[str, np.ndarray]

    @classmethod
    def of(cls, chunks: list[dict]) -> "Columns":
        rows = sorted((row for c in chunks for row in c["rows"]), key=lambda row: row[0])
        n = len(rows)
        kinds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        counters: dict[str, np.ndarray] = {}
        for i, (*_, grown, counted) in enumerate(rows):
            for k, (m, b) in grown.items():
                if k not in kinds:
                    kinds[k] = (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
                kinds[k][0][i], kinds[k][1][i] = m, b
            for k, v in counted.items():
                if k not in counters:
                    counters[k] = np.zeros(n, dtype=np.int64)
                counters[k][i] = v
        at = [np.array([row[i] for row in rows], dtype=np.int64) for i in range(4)]
        return cls(*at, kinds, counters)


def merge(
    spec: RunSpec,
    p: Pass,
    columns: Columns,
    chunks: list[dict],
    load: list[int],
    half: int,
    seconds: dict,
) -> RunResult:
    """One run's result from its workers' chunks of pass p, whose rows are `columns`."""
    part = p.part(spec.index)
    index, tag = p.index_tag(spec.index), p.run_tag(spec)
    mask = columns.positions >= (half if part.documents == "second" else 0)
    zeros = np.zeros(len(mask), dtype=np.int64)
    per_doc = {
        "candidates": (
            columns.counters.get(f"{tag}:candidates", zeros) if tag else columns.candidates
        )[mask],
        "matches": (columns.counters.get(f"{index}:matches", zeros) if index else columns.matches)[
            mask
        ],
        "alerts": columns.alerts[mask],
    }
    for k, (m, b) in sorted(measured_as(columns.kinds, spec, p, columns.counters).items()):
        messages = (zeros + m)[mask]
        if messages.any():  # a kind none of its documents sent is none of its kinds
            per_doc[f"{k}:messages"], per_doc[f"{k}:bytes"] = messages, (zeros + b)[mask]
    ledger: dict[str, list[int]] = {}
    for c in chunks:
        for k, (m, b) in measured_as(
            c["ledger"][part.documents], spec, p, c["counters"][part.documents]
        ).items():
            ledger.setdefault(k, [0, 0])
            ledger[k][0] += m
            ledger[k][1] += b
    oracle_tally = Counter()
    for c in chunks:
        oracle_tally.update(c["oracle"][index])
    for k in ("expected", "alerted", "missing", "unexpected", "wrong_docno", "disagreements"):
        oracle_tally.setdefault(k, 0)
    return RunResult(
        spec,
        columns.positions[mask],
        per_doc,
        dict(sorted(ledger.items())),
        load,
        dict(oracle_tally),
        seconds,
        half,
    )
