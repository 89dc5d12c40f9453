"""Markdown as the reports write it: numbers rounded for reading, and tables.

Every part of a report (cqengine.evaluation.reports.report, .sections, .differences) prints its
numbers the same way; they live here, apart from any one of them.
"""

from __future__ import annotations


def n(x: float | None) -> str:
    """A number to read: whole from 100 up, else to one decimal; none is a dash."""
    return "–" if x is None else f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"


def pct(x: float | None) -> str:
    """A percentage to one decimal; none is a dash."""
    return "–" if x is None else f"{x:.1f}%"


def load(values: list[int]) -> str:
    """Load percentiles as the paper writes them: (1st, 50th, 99th)."""
    return "(" + ", ".join(str(v) for v in values) + ")"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(r) + " |" for r in rows
    ]
