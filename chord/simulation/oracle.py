"""Global truth about a ring, from its sorted ids, and the checks tables must pass.

`RingOracle` answers who owns a key and what each node's table should hold. `ring_problems`
compares actual tables with it and also checks the ring invariants in Zave's sense (one
ordered ring through the successor pointers; successor lists in ring order) directly, so a
failure says which property broke.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from chord.protocol.ids import BITS, distance, finger_start
from chord.protocol.routing import NodeRef, RoutingTable


class RingOracle:
    def __init__(self, nodes: Iterable[NodeRef]) -> None:
        self.nodes = sorted(set(nodes))
        if not self.nodes:
            raise ValueError("a ring needs at least one node")
        self.ids = [n.id for n in self.nodes]

    def _index_of_owner(self, key: int) -> int:
        return bisect.bisect_left(self.ids, key) % len(self.ids)

    def owner(self, key: int) -> NodeRef:
        return self.nodes[self._index_of_owner(key)]

    def successors(self, node: NodeRef, r: int) -> list[NodeRef]:
        i = self.ids.index(node.id)
        n = len(self.nodes)
        if n == 1:
            return [node]
        return [self.nodes[(i + k) % n] for k in range(1, min(r, n - 1) + 1)]

    def predecessor(self, node: NodeRef) -> NodeRef | None:
        if len(self.nodes) == 1:
            return None
        return self.nodes[self.ids.index(node.id) - 1]

    def fingers(self, node: NodeRef) -> list[NodeRef]:
        return [self.owner(finger_start(node.id, i)) for i in range(BITS)]

    def table(self, node: NodeRef, r: int) -> RoutingTable:
        return RoutingTable(
            node,
            r=r,
            predecessor=self.predecessor(node),
            successors=self.successors(node, r),
            fingers=list(self.fingers(node)),  # a list of the table's own, of NodeRef | None
        )


def zave_problems(tables: list[RoutingTable]) -> list[str]:
    """One ordered ring through successor pointers; every successor list in ring order."""
    problems: list[str] = []
    by_id = {t.me.id: t for t in tables}
    for t in tables:
        ds = [distance(t.me.id, s.id) for s in t.successors if s != t.me]
        if ds != sorted(set(ds)):
            problems.append(f"{t.me}: successor list out of ring order")
    start = min(by_id)
    seen, node, wraps = [start], by_id[start], 0
    while True:
        nxt = node.successor.id
        if nxt not in by_id:
            problems.append(f"{node.me}: successor {node.successor} is not a ring member")
            return problems
        wraps += nxt <= node.me.id
        if nxt == start:
            break
        if nxt in seen:
            problems.append(f"successor pointers loop without reaching {start:016x}")
            return problems
        seen.append(nxt)
        node = by_id[nxt]
    if len(seen) != len(by_id):
        problems.append(f"successor ring holds {len(seen)} of {len(by_id)} nodes")
    if wraps != 1:
        problems.append(f"successor ring wraps {wraps} times around the circle, not once")
    return problems


def ring_problems(tables: list[RoutingTable], r: int) -> list[str]:
    """Everything that differs from the converged ring; empty when every table is correct."""
    if not tables:
        return ["no nodes"]
    problems = zave_problems(tables)
    oracle = RingOracle(t.me for t in tables)
    for t in tables:
        want = oracle.table(t.me, r)
        if t.predecessor != want.predecessor:
            problems.append(f"{t.me}: predecessor {t.predecessor}, should be {want.predecessor}")
        if t.successors != want.successors:
            problems.append(f"{t.me}: successor list differs from the ring's")
        wrong = sum(a != b for a, b in zip(t.fingers, want.fingers))
        if wrong:
            problems.append(f"{t.me}: {wrong} of {BITS} fingers wrong")
    return problems
