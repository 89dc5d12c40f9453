"""How large the experiments run: the paper's scale, and --quick's. Apart from the runs so
that the command line states these defaults from here without importing the evaluation."""

from __future__ import annotations

from dataclasses import dataclass

from cqengine.core.terms.presence import DEFAULT_HEADER_TERMS
from cqengine.evaluation import EvaluationError

# `experiment beyond`: hot terms per term-presence header, chosen by measurement
HEADERS = DEFAULT_HEADER_TERMS
# `experiment beyond`: seconds an aggregate filter is good for. A simulated ring's clock
# stands still while it publishes, so each filter is granted once per sender and hop;
# a live ring grants it again each lease (docs/protocol.md, "Aggregate filters")
FILTER_LEASE = 10.0

# --quick: every run small, on a generated corpus of this vocabulary and document length
QUICK = {"nodes": 64, "queries": 2000, "docs": 300, "vocab": 3000, "mean_terms": 60}


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


def quick_scale(seed: int, workers: int) -> Scale:
    return Scale(
        nodes=QUICK["nodes"],
        queries=QUICK["queries"],
        docs=QUICK["docs"],
        seed=seed,
        workers=workers,
    )
