"""Reading each run off its pass, as if it had been alone.

A pass (cqengine.evaluation.passes.runs.Pass) measures many runs in one publishing; its workers
return, per document, the ledger's growth by kind and the shadows' counters
(cqengine.evaluation.passes.publishing). A run's messages are those of its tag
(cqengine.evaluation.measuring.tags) with the echoes its shadow measured instead of sending
(`measured_as`); `Columns` lays the workers' rows out by corpus position, and `merge`
makes a run's result of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from cqengine.evaluation.measuring.sim import RESOLUTION
from cqengine.evaluation.measuring.tags import depth_tag, resolution_tag
from cqengine.evaluation.passes.runs import Pass, RunResult, RunSpec

ALERTING = ("Matched", "Deliver")  # what a shadow index's matches would send: its own, by name


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
    def of(cls, chunks: list[dict]) -> Columns:
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
