"""Progress for long commands: a bar rewritten in place on a terminal, else a line every few
seconds."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(
        self,
        label: str,
        total: float | None = None,
        unit: str = "docs",
        out: TextIO = sys.stderr,
        every: float = 5.0,
    ) -> None:
        self.label, self.total, self.unit, self.out, self.every = label, total, unit, out, every
        self.count = 0
        self.start = self._last = time.monotonic()
        self.tty = out.isatty()

    def update(self, count: int, done: float | None = None) -> None:
        """`count` items so far; `done` how much of `total` (bytes, say) they account for."""
        self.count = count
        now = time.monotonic()
        if now - self._last < (0.1 if self.tty else self.every):
            return
        self._last = now
        self._show(done, end="" if self.tty else "\n")

    def _show(self, done: float | None, end: str) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.count / elapsed
        text = f"{self.label}: {self.count} {self.unit} ({rate:.0f}/s)"
        if self.total and done is not None:
            frac = min(1.0, done / self.total)
            bar = "#" * int(frac * 30)
            left = (
                f", {duration(elapsed * (1 - frac) / frac)} left" if frac > 0 else ""
            )  # at the pace so far
            text = (
                f"{self.label}: [{bar:<30}] {frac:4.0%} {self.count} {self.unit} "
                f"({rate:.0f}/s{left})"
            )
        print(
            ("\r" if self.tty else "") + text + ("\033[K" if self.tty else ""),
            end=end,
            file=self.out,
            flush=True,
        )

    def close(self) -> None:
        if self.tty:
            print("\r\033[K", end="", file=self.out, flush=True)


def duration(seconds: float) -> str:
    """A time span as a person reads it: 42s, 3m05s, 1h02m."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
