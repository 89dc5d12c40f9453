"""The lab: the runs asked for, each made once, each workload's in one pass.

`Lab` is what experiments and benchmarks drive. Given run specs it plans the passes that
measure them (cqengine.evaluation.passes.runs.passes), builds each pass's indexed rings
(cqengine.evaluation.passes.rings), publishes the pass (cqengine.evaluation.passes.publishing) and
keeps every run's result, so a run two experiments need is made once. What runs share
besides rings (workloads, the matcher's answers, popular terms) comes from its base,
cqengine.evaluation.setup.inputs.Inputs, which the rings it builds read too.
"""

from __future__ import annotations

import gc
import resource

from cqengine.evaluation.passes.publishing import publish
from cqengine.evaluation.passes.rings import IndexedRing
from cqengine.evaluation.passes.runs import RunResult, RunSpec, passes
from cqengine.evaluation.setup.inputs import Corpus, Inputs
from cqengine.evaluation.setup.scale import Scale


class Lab(Inputs):
    """Runs specs at a scale on a corpus, each once, sharing workloads, oracles and rings."""

    def __init__(self, corpus: Corpus, scale: Scale, quiet: bool = False) -> None:
        super().__init__(corpus, scale, quiet)
        self.results: dict[tuple, RunResult] = {}

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
            for spec, result in zip(p.runs, publish(host, p, label, rings)):
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
