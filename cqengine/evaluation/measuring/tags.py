"""What a measured message is counted as: ledger kinds and tags, and echo counters.

A measurement pass measures many runs at once (cqengine.evaluation.passes.runs) and reads each
run off the ring's one ledger afterwards, so every message a shadow sends or measures is
counted under a tag naming the run it belongs to: kD for a shadow piggyback depth,
INDEX/kD for a shadow index, METHOD for the shadow resolution method. The observer that
counts (cqengine.evaluation.measuring.measure) and the passes that read the counts back
(cqengine.evaluation.passes.readoff) share these names from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from chord.protocol.transport import REPLY

Unsent = dict[
    str, list[int]
]  # calls measured, not sent: ledger kind -> [calls, request bytes, reply bytes]


def ledger_kind(method: str, tag: str = "") -> str:
    """What a measured call is counted as: its method, or TAG:METHOD for a shadow's."""
    return f"{tag}:{method}" if tag else method


@cache  # asked per QN, index and depth: few distinct answers
def depth_tag(d: int, index: str = "") -> str:
    """The tag a shadow piggyback depth's messages and counters carry (INDEX/kD for a
    depth of a shadow index)."""
    return "/".join(t for t in (index, f"k{d}") if t)


@cache  # asked for every resolution call: few distinct answers
def resolution_tag(depth: str, method: str, own: str) -> str:
    """The ledger tag of resolving by `method` under a depth's tag on a ring that resolves
    by `own`: kD, METHOD or kD/METHOD (the ring's own method and depth: none)."""
    return "/".join(t for t in (depth, "" if method == own else method) if t)


@cache
def call_kind(rpc: str, tag: str, method: str, own: str) -> str:
    """The ledger kind of a resolution call by `method` under a depth's tag."""
    return ledger_kind(rpc, resolution_tag(tag, method, own))


@cache
def _echo_names(kind: str) -> tuple[str, str, str, str]:
    """The counters of a kind's echoes: messages and bytes, requests then replies."""
    return tuple(f"{what}:{k}" for k in (kind, kind + REPLY) for what in ("echo", "echo_bytes"))


def unsent_counts(unsent: Unsent) -> Iterator[tuple[str, int]]:
    """The counters of calls measured instead of sent, as a run alone would have sent
    them: echo:KIND messages and echo_bytes:KIND bytes, requests then replies."""
    for kind, (calls, request, reply) in unsent.items():
        yield from zip(_echo_names(kind), (calls, request, calls, reply))
