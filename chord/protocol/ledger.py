"""The byte ledger: every message a transport carries is counted here, by kind."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class Count:
    messages: int = 0
    bytes: int = 0


class Ledger:
    """Messages and serialized bytes by kind. Thread-safe: gRPC handlers may share one."""

    def __init__(self) -> None:
        self._counts: dict[str, Count] = defaultdict(Count)
        self._lock = threading.Lock()

    def record(self, kind: str, nbytes: int) -> None:
        with self._lock:
            c = self._counts[kind]
            c.messages += 1
            c.bytes += nbytes

    def snapshot(self) -> dict[str, Count]:
        with self._lock:
            return {k: Count(c.messages, c.bytes) for k, c in sorted(self._counts.items())}

    def total(self, prefix: str = "") -> Count:
        out = Count()
        for kind, c in self.snapshot().items():
            if kind.startswith(prefix):
                out.messages += c.messages
                out.bytes += c.bytes
        return out

    def merge(self, other: Ledger) -> None:
        for kind, c in other.snapshot().items():
            with self._lock:
                mine = self._counts[kind]
                mine.messages += c.messages
                mine.bytes += c.bytes

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


class LocalLedger(Ledger):
    """A ledger only its own thread writes (the simulator's: one process, thousands of
    messages a document), so a message is counted without taking the lock."""

    def record(self, kind: str, nbytes: int) -> None:
        c = self._counts[kind]
        c.messages += 1
        c.bytes += nbytes
