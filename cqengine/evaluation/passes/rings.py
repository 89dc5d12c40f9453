"""Indexed rings: a simulated ring per (strategy, workload, synopsis), built once for
every run that publishes on it.

Where a query is indexed depends on neither resolution nor piggyback, so a ring is
indexed once per IndexSpec — through the engine, subscription by subscription, each
placed at the owner a lookup finds (answered by the ring's oracle: the ring stands still,
and no run measures indexing) — and every run publishes on forked copies of it
(cqengine.evaluation.passes.publishing): publishing never touches the indexed ring, so each run
starts from the same state a freshly built ring with that run's settings would have
(tests/evaluation/test_evaluation.py checks this). A ring that is to be another's shadow index is
filed from that ring's subscriptions rather than subscribed again. Before the forks,
every key's block is built at once (`compile_blocks`), so that no worker builds one.
"""

from __future__ import annotations

import gc
import time

import numpy as np

from cqengine.core.state.postings import Block, InvertedIndex, ask_order, objects
from cqengine.core.terms.bloom import positions_array
from cqengine.core.terms.queries import entry_slot
from cqengine.core.terms.settings import Settings
from cqengine.evaluation import EvaluationError
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.passes.runs import IndexSpec, percentiles, place
from cqengine.evaluation.setup.inputs import Inputs
from cqengine.progress import Progress
from cqengine.proto import cqengine_pb2 as pb


class IndexedRing:
    """A simulated ring holding one workload's queries, indexed by one strategy: each
    subscribed through the engine, or filed again from the ring of another strategy
    (`host`) when it is to be that ring's shadow index."""

    def __init__(
        self,
        lab: Inputs,
        index: IndexSpec,
        k_max: int,
        label: str,
        host: IndexedRing | None = None,
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
            compile_blocks(e.index, (s.bloom_bits, s.bloom_hashes), self.orders)
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

    def _refile(self, host: IndexedRing, progress: Progress) -> None:
        """File the host's subscriptions, in the order they were made, as this ring's
        strategy chooses, each at the owner of its key: what subscribing them here gives
        (the pass then equals runs of their own: tests/evaluation/test_evaluation.py), without the
        lookups, which the pass never reads and which made most of indexing's time."""
        owners = self.sim.ring.oracle()
        for i, (sub_id, (original, pairs)) in enumerate(host.filed().items()):
            request = pb.IndexRequest()
            entry = request.entry
            entry.CopyFrom(original)
            entry.index_id = pairs[self.sim.engines[entry.home].placement.choose(pairs, sub_id)][0]
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


def compile_blocks(
    index: InvertedIndex, bloom: tuple[int, int], orders: dict[int, list[int]]
) -> None:
    """Build every key's block of the index now, with its terms' filter positions for
    bloom (bits, hashes): a ring about to be forked for many runs builds them once, and
    all at once (one array of entries, one hashing of every key's terms), where a live
    node builds a key's when a document first consults it. `orders` keeps each
    subscription's asking order for other indexes of the same subscriptions, with the
    same rarity, to reuse."""
    unbuilt = index.unbuilt()
    if not unbuilt:
        return
    entries = objects([e for _, values in unbuilt for e in values])
    rows = []
    for e in entries:
        row = orders.get(entry_slot(e))
        if row is None:
            row = orders[entry_slot(e)] = ask_order(e, index.rarity)
        rows.append(row)
    blocks, start = [], 0
    for key, values in unbuilt:
        end = start + len(values)
        block = Block.of_rows(entries[start:end], rows[start:end], index.merge)
        blocks.append(index.compiled(key, block))
        start = end
    positions = positions_array(np.concatenate([b.terms for b in blocks]), *bloom)
    start = 0
    for (key, _), b in zip(unbuilt, blocks):
        b.set_bloom_positions(*bloom, positions[:, start : start + len(b.terms)])
        b.subscriptions()  # once here, not again in every run's workers
        index.adopt(key, b)
        start += len(b.terms)
