"""Publishing a pass: its documents shared out among workers on forked copies of its ring.

A pass (cqengine.evaluation.passes.runs.Pass) publishes its documents on its host ring
(cqengine.evaluation.passes.rings), shared out among worker processes (the machine's cores),
each on a forked copy of the ring, with the pass's observer
(cqengine.evaluation.measuring.measure.Shadows) and the other rings' indexes hosted as shadow
indexes. Each document's publishing node is a seeded hash of its docno, so results do not
depend on the number of workers. A worker returns, per document, the ledger's growth and
the shadows' counters; every run of the pass is read off them
(cqengine.evaluation.passes.readoff).

Every alert a worker sees is checked against the matcher: the subscriber's mailbox is
emptied after each document (as a stream would) and the queries alerted must be exactly
the queries the matcher says the document matches. A shadow index's matches are checked
alike.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import time
from collections import Counter
from multiprocessing.connection import wait

from cqengine.evaluation import EvaluationError
from cqengine.evaluation.measuring.measure import ShadowIndex, Shadows
from cqengine.evaluation.passes.readoff import Columns, merge
from cqengine.evaluation.passes.rings import IndexedRing
from cqengine.evaluation.passes.runs import IndexSpec, Pass, RunResult, place
from cqengine.evaluation.setup.forks import answer
from cqengine.progress import Progress

WORKER_GC = (50_000, 20, 100)  # collector thresholds while a worker publishes


def publish(
    host: IndexedRing, p: Pass, label: str, rings: dict[IndexSpec, IndexedRing]
) -> list[RunResult]:
    """One pass over the documents measuring all its runs, on the ring of the pass's
    host index (`host`) with the other rings' indexes as shadow indexes."""
    lab = host.lab
    first = lab.half if p.documents == "second" else 0
    positions = list(range(first, len(lab.corpus)))
    workers = max(1, min(lab.scale.workers, len(positions)))
    t = time.perf_counter()
    chunks = _fork(host, p, positions, workers, label, rings)
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
    host: IndexedRing,
    p: Pass,
    positions: list[int],
    workers: int,
    label: str,
    rings: dict[IndexSpec, IndexedRing],
) -> list[dict]:
    ctx = mp.get_context("fork")
    counts = [ctx.Value("q", 0, lock=False) for _ in range(workers)]
    pipes = [ctx.Pipe(duplex=False) for _ in range(workers)]
    procs = [
        ctx.Process(
            target=_work,
            args=(host, p, positions[w::workers], counts[w], pipes[w][1], rings),
            daemon=True,
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for _, send in pipes:
        send.close()
    name = p.name
    progress = Progress(f"{label} publishing {name}", len(positions), out=host.lab.err)
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


def _work(host: IndexedRing, p: Pass, positions: list[int], count, conn, rings: dict) -> None:
    """A worker: publish my share of the documents on my copy of the ring."""
    # The ring is frozen out of the collector's reach; what a document allocates is
    # short-lived and nearly all acyclic, so the default young collections only cost
    # time. Cycles are still collected, less often.
    gc.set_threshold(*WORKER_GC)
    answer(conn, _publish_share, host, p, positions, count, rings)


def _publish_share(
    host: IndexedRing, p: Pass, positions: list[int], count, rings: dict[IndexSpec, IndexedRing]
) -> dict:
    """A worker's share of the pass: publish these documents on its copy of the host ring,
    checking every alert (and shadow index's match) against the matcher; returns a row
    per document (its counts, ledger growth and shadows' counters) and, per half, the
    ledger's and the counters' growth."""
    sim, corpus, seed, half = host.sim, host.lab.corpus, host.lab.scale.seed, host.lab.half
    settings = sim.settings  # every node's
    settings.resolution, settings.piggyback = p.resolution, p.piggyback
    settings.validate()
    shadows = Shadows(p.shadow, p.depths[:-1])
    shadows.check(settings)
    sim.observe(shadows)
    shadowed = Counter()  # the counters of shadows (TAG:NAME)
    alerted: list[tuple] = []
    for e in sim.engines.values():
        e.home.alert_listeners.append(lambda subs, e=e: alerted.extend((e, sub) for sub in subs))
    marks = {"all": (sim.ring.ledger.snapshot(), Counter())}  # where each half's growth starts
    rows: list[tuple] = []
    tally = {p.index_tag(part.index): Counter() for part in (p, *p.shadows)}
    _host_shadow_indexes(host, p, "all", rings, shadows)
    for j in positions:  # ascending: the second half's shadow indexes join once it starts
        if j >= half and "second" not in marks:
            marks["second"] = (sim.ring.ledger.snapshot(), shadowed.copy())
            _host_shadow_indexes(host, p, "second", rings, shadows)
        docno = corpus.docnos[j]
        alerted.clear()
        shadows.matched.clear()
        report = sim.publish_terms(
            docno,
            corpus.terms[j],
            via=host.addresses[place(seed, "doc", docno, len(host.addresses))],
        )
        got = set()
        for e, sub in alerted:
            for alerted_docno, _, _ in e.subscriptions[sub].mailbox.take():  # the stream's
                tally[""]["wrong_docno"] += alerted_docno != docno
            got.add(host.query_of[sub])
        check(tally[""], got, host.oracle[j])
        for shadow in p.shadows:
            if shadow.documents == "all" or j >= half:
                query_of = rings[shadow.index].query_of
                check(
                    tally[shadow.index.tag],
                    {query_of[sub] for sub in shadows.matched.get(shadow.index.tag, ())},
                    host.oracle[j],
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


def _host_shadow_indexes(
    host: IndexedRing,
    p: Pass,
    documents: str,
    rings: dict[IndexSpec, IndexedRing],
    shadows: Shadows,
) -> None:
    """Host the shadow indexes that measure these documents on every node."""
    for shadow in p.shadows:
        if shadow.documents == documents:
            theirs = rings[shadow.index].sim.engines
            for address in host.sim.engines:
                shadows.indexes.setdefault(address, {})[shadow.index.tag] = ShadowIndex(
                    theirs[address].index, shadow.depths
                )


def check(tally: Counter, got: set[int], want: list[int]) -> None:
    """Tally the queries alerted (or a shadow index matched) against the matcher's."""
    want = set(want)
    tally["expected"] += len(want)
    tally["alerted"] += len(got)
    tally["missing"] += len(want - got)
    tally["unexpected"] += len(got - want)
