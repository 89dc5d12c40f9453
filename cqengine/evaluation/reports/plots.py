"""The figures, as PNG (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cqengine.evaluation.reports.experiments import LABELS, WORKLOADS  # noqa: E402

METRICS = (
    ("queries", "queries per document"),
    ("bf", "Bloom filter bytes per document"),
    ("td", "Term Dialogue bytes per document"),
)


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def table2(numbers: dict, out: Path) -> list[str]:
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    keys = (
        ("queries_per_doc", "queries per document"),
        ("td_bytes_per_doc", "TD bytes per document"),
        ("bf_bytes_per_doc", "BF bytes per document"),
    )
    strategies = list(LABELS)
    for ax, (key, label) in zip(axes, keys):
        for i, s in enumerate(strategies):
            values = [numbers["workloads"][w]["rows"][s][key] for w in WORKLOADS]
            ax.bar([x + i * 0.2 for x in range(len(WORKLOADS))], values, width=0.2, label=LABELS[s])
        ax.set_xticks([x + 0.3 for x in range(len(WORKLOADS))], WORKLOADS)
        ax.set_yscale("log")
        ax.set_title(label)
    axes[0].legend()
    return [_save(fig, out / "table2.png")]


def figure3(numbers: dict, out: Path) -> list[str]:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ks = [r["k"] for r in numbers["rows"]]
    for ax, (metric, title) in zip(
        axes, (("bf", "(a) Bloom filters"), ("td", "(b) Term Dialogue"))
    ):
        ax.plot(ks, [r["saving_over_ri"][metric] for r in numbers["rows"]], marker="o")
        ax.set_xlabel("piggybacked successor ids k")
        ax.set_ylabel("% bandwidth saved by MHI over RI")
        ax.set_title(f"{title}, {numbers['workload']} queries")
        ax.grid(alpha=0.3)
    return [_save(fig, out / "figure3.png")]


def figure4(numbers: dict, out: Path) -> list[str]:
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, w in zip(axes, WORKLOADS):
        data = numbers["workloads"][w]
        ks = [r["k"] for r in data["rows"]]
        for i, name in enumerate(("1st", "50th", "99th")):
            (line,) = ax.plot(
                ks,
                [max(r["sap_mhi"]["load"][i], 0.5) for r in data["rows"]],
                marker="o",
                label=f"SAP-MHI {name}",
            )
            ax.axhline(max(data["mhi"]["load"][i], 0.5), color=line.get_color(), ls="--", lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("synopsis size K")
        ax.set_ylabel("queries indexed per node (0 drawn at 0.5)")
        ax.set_title(f"{w} (dashed: MHI)")
    axes[0].legend()
    return [_save(fig, out / "figure4.png")]


def figure5(numbers: dict, out: Path) -> list[str]:
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (metric, label), tag in zip(axes, METRICS, "abc"):
        for w in WORKLOADS:
            rows = numbers["workloads"][w]["rows"]
            ax.plot(
                [r["k"] for r in rows],
                [r["reduction_over_mhi"][metric] for r in rows],
                marker="o",
                label=w,
            )
        ax.set_xlabel("synopsis size K")
        ax.set_ylabel("% reduction over MHI")
        ax.set_title(f"({tag}) {label}")
        ax.grid(alpha=0.3)
    axes[0].legend()
    return [_save(fig, out / "figure5.png")]


def figure6(numbers: dict, out: Path) -> list[str]:
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    parts = (("mhi", "MHI"), ("sampling", "sampling"), ("piggybacking", "piggybacking"))
    for ax, (metric, label) in zip(axes, METRICS):
        up = [0.0] * len(WORKLOADS)  # gains stack upwards, losses downwards
        down = [0.0] * len(WORKLOADS)
        for part, name in parts:
            values = [numbers["workloads"][w]["parts"][metric][part] for w in WORKLOADS]
            bottoms = [u if v >= 0 else d for v, u, d in zip(values, up, down)]
            ax.bar(WORKLOADS, values, bottom=bottoms, label=name)
            up = [u + max(v, 0) for u, v in zip(up, values)]
            down = [d + min(v, 0) for d, v in zip(down, values)]
        totals = [numbers["workloads"][w]["parts"][metric]["total"] for w in WORKLOADS]
        ax.plot(WORKLOADS, totals, "kD", label="total")
        ax.axhline(0, color="black", lw=0.6)
        ax.set_ylabel("% reduction over RI")
        ax.set_title(label)
    axes[0].legend()
    return [_save(fig, out / "figure6.png")]


PLOTS = {
    "table2": [table2],
    "piggyback": [figure3],
    "synopsis": [figure4, figure5],
    "breakdown": [figure6],
}


def draw(name: str, numbers: dict, out: Path) -> list[str]:
    return [f for plot in PLOTS[name] for f in plot(numbers, out)]
