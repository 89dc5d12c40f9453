"""`cqengine experiment`: run the experiments asked for, sharing their runs, and report."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from cqengine.evaluation import EvaluationError
from cqengine.evaluation.passes.lab import Lab
from cqengine.evaluation.reports import report
from cqengine.evaluation.reports.experiments import EXPERIMENTS, Plan
from cqengine.evaluation.setup.inputs import Corpus, generated, load_prep
from cqengine.evaluation.setup.scale import QUICK, Scale

NAMES = tuple(EXPERIMENTS) + ("all",)


# --quick: every experiment on a small generated corpus, in about a minute on 2 cores
def corpus_for(path: Path | None, quick: bool, seed: int, docs: int = QUICK["docs"]) -> Corpus:
    if path is not None:
        return load_prep(path)
    if not quick:
        raise EvaluationError(
            "give --corpus DIR (the output of `cqengine prep`), or --quick for a small generated "
            "corpus"
        )
    return generated(docs, seed, QUICK["vocab"], QUICK["mean_terms"])


def writable(out: Path) -> None:
    """Fail now, not after the runs (half an hour at paper scale), if the reports cannot
    be written into out."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise EvaluationError(f"cannot write the reports into {out}: {e.strerror or e}") from None


def evaluate(
    name: str,
    corpus: Corpus,
    scale: Scale,
    out: Path,
    command: str,
    quick: bool = False,
    quiet: bool = False,
) -> list[Path]:
    """Run experiment `name` (or all), write its reports into out; returns the files."""
    started = time.monotonic()
    writable(out)
    lab = Lab(corpus, scale, quiet)
    plan = Plan.scaled(scale, len(lab.corpus.df)) if quick else Plan(scale)
    chosen = list(EXPERIMENTS.values()) if name == "all" else [EXPERIMENTS[name]]
    results = lab.run(
        [s for e in chosen for s in e.specs(plan)]
    )  # a run two experiments need runs once
    files: list[Path] = []
    for e in chosen:
        runs = {s: results[s] for s in e.specs(plan)}
        files += report.write(e, plan, lab, e.numbers(plan, runs), runs, out, command, started)
    lab.say(
        f"done in {time.monotonic() - started:.0f}s "
        f"({', '.join(f'{k} {v:.0f}s' for k, v in lab.timings.items())}); peak memory "
        f"{lab.memory()['main_mib']:.0f} MiB, workers {lab.memory()['worker_mib']:.0f} MiB"
    )
    return files


def default_workers() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
