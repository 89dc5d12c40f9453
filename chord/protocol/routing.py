"""A node's routing table and the next-hop rules built on it.

`next_hop` is the paper's Algorithm 1 (lines 5-16) for a single id; `group_by_next_hop`
applies it to a batch of ids, which is how the engine aggregates an announcement per
neighbour. Lookups use the same rule, so an announcement travels the path a lookup takes.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from chord.protocol.ids import BITS, MASK, SPACE, distance, in_open_closed, short

T = TypeVar("T")


@dataclass(frozen=True, order=True)
class NodeRef:
    id: int
    address: str

    def __str__(self) -> str:
        return f"{short(self.id)}@{self.address}"


# a table's successors and fingers as a key: what is worked out of them is kept until they change
_Slots = tuple[tuple[NodeRef, ...], tuple[NodeRef | None, ...]]

SUCCESSORS = 8  # a node's successor list's length, unless a ring says otherwise (--successors)


@dataclass
class RoutingTable:
    me: NodeRef
    r: int = SUCCESSORS
    predecessor: NodeRef | None = None
    successors: list[NodeRef] = field(default_factory=list)
    fingers: list[NodeRef | None] = field(default_factory=lambda: [None] * BITS)

    # the neighbours and their distances (_sorted_neighbors), with the slots they come from
    _cache: tuple[_Slots, list[NodeRef], list[int]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # each rule precomputed (piecewise) by its name: the table it was made of, the rule, where
    # its stretches start and their answers; the router's also its hops and their places
    _compiled: dict[str, tuple[Any, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.successors:
            self.successors = [self.me]

    @property
    def successor(self) -> NodeRef:
        return self.successors[0]

    def alone(self) -> bool:
        return self.successor == self.me

    def owns(self, key: int) -> bool:
        """Key in (predecessor, me]; a node that knows no predecessor owns only when alone."""
        if self.predecessor is None:
            return self.alone() or key == self.me.id
        return in_open_closed(key, self.predecessor.id, self.me.id)

    def neighbors(self) -> list[NodeRef]:
        """Distinct successors and fingers other than me, in clockwise order."""
        return list(self._sorted_neighbors()[0])

    def _sorted_neighbors(self) -> tuple[list[NodeRef], list[int]]:
        """Neighbours and their clockwise distances, sorted; recomputed only when the table's
        contents change (tables are assigned to directly, so the contents are the key)."""
        key = (tuple(self.successors), tuple(self.fingers))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        seen = {n for n in self.successors if n != self.me}
        seen.update(f for f in self.fingers if f is not None and f != self.me)
        nodes = sorted(seen, key=lambda n: distance(self.me.id, n.id))
        dists = [distance(self.me.id, n.id) for n in nodes]
        self._cache = (key, nodes, dists)
        return nodes, dists

    def successor_covering(self, key: int, avoid: frozenset[int] = frozenset()) -> NodeRef | None:
        """The first successor whose id is equal to or follows key, if the list reaches it.

        A successor in `avoid` is dead: its keys now belong to the next live one after it.
        """
        if self.alone():
            return self.me
        covered = False
        for s in self.successors:
            covered = covered or in_open_closed(key, self.me.id, s.id)
            if covered and s.id not in avoid:
                return s
        return None

    def closest_preceding(self, key: int, avoid: frozenset[int] = frozenset()) -> NodeRef | None:
        """The neighbour equal to or immediately preceding key (Algorithm 1, line 13)."""
        nodes, dists = self._sorted_neighbors()
        i = bisect.bisect_right(dists, distance(self.me.id, key)) - 1
        while i >= 0 and nodes[i].id in avoid:
            i -= 1
        return nodes[i] if i >= 0 else None

    def next_hop(self, key: int, avoid: frozenset[int] = frozenset()) -> NodeRef | None:
        """Where a message for key goes next; None when key is mine (Algorithm 1)."""
        if self.owns(key):
            return None
        s = self.successor_covering(key, avoid)
        if s is not None:
            return s
        hop = self.closest_preceding(key, avoid)
        if hop is None:  # everything closer is dead: the first live successor is the way on
            hop = next((s for s in self.successors if s.id not in avoid and s != self.me), None)
        return hop

    def router(self) -> Callable[[int], NodeRef | None]:
        """`next_hop` (avoiding nobody) for the table as it is now, as a bisect per key, and
        None where the hop would be me."""
        return self.piecewise("router", self._route)

    def routes(
        self, keys: np.ndarray | list[int]
    ) -> tuple[np.ndarray | list[int], list[NodeRef | None]]:
        """`router` for many keys at once (an announcement routes every id it carries): for
        each key the place of its hop among the distinct hops, and those hops. A list of
        keys (a few) gets a list, found a bisect each; an array, an array."""
        self.piecewise("router", self._route)
        compiled = self._compiled["router"]
        if len(compiled) == 4:  # the distinct hops, worked out once per table
            starts, answers = compiled[2:]
            hops = list(dict.fromkeys(answers))  # a hop may answer several stretches of the circle
            at = {hop: i for i, hop in enumerate(hops)}
            place = [at[a] for a in answers]
            compiled = self._compiled["router"] = (
                *compiled,
                np.array(place, dtype=np.intp),
                place,
                hops,
            )
        starts, place, hops = compiled[2], compiled[4], compiled[6]
        me = self.me.id
        if isinstance(keys, list):
            found, marks = compiled[5], compiled[1].starts
            return [found[bisect.bisect_right(marks, (x - me) & MASK) - 1] for x in keys], hops
        return place[starts.searchsorted(keys - np.uint64(me), side="right") - 1], hops

    def _route(self, key: int) -> NodeRef | None:
        return None if (hop := self.next_hop(key)) == self.me else hop

    def piecewise(self, name: str, rule: Callable[[int], T]) -> Callable[[int], T]:
        """A rule of this table's (Algorithm 1, a lookup step) precomputed as a bisect per key.

        Such a rule only changes where a key passes the predecessor, a successor or a
        finger: at such a point or just after it. So it is asked once at each point and
        once just after it, and a key takes the answer of the last probe at or below its
        clockwise distance from me. Kept (under `name`) until the table changes.
        """
        key = (self.predecessor, tuple(self.successors), tuple(self.fingers))
        cached = self._compiled.get(name)
        if cached is not None and cached[0] == key:
            made: Callable[[int], T] = cached[1]  # what this rule made, kept under its name
            return made
        me = self.me.id
        marks = {
            distance(me, n.id)
            for n in (self.predecessor, *self.successors, *self.fingers)
            if n is not None
        }
        probes = sorted({0, 1} | {q for b in marks for q in (b, b + 1) if q < SPACE})
        starts: list[int] = []
        answers: list[T] = []
        for q in probes:
            answer = rule((me + q) & MASK)
            if not answers or answer != answers[-1]:
                starts.append(q)
                answers.append(answer)

        def compiled(x: int) -> T:
            return answers[bisect.bisect_right(starts, (x - me) & MASK) - 1]

        compiled.starts = starts  # type: ignore[attr-defined]

        self._compiled[name] = (key, compiled, np.array(starts, dtype=np.uint64), answers)
        return compiled

    def group_by_next_hop(self, keys: Iterable[int]) -> tuple[list[int], dict[NodeRef, list[int]]]:
        """Split keys into those I own and those per next-hop neighbour, order kept."""
        local: list[int] = []
        groups: dict[NodeRef, list[int]] = {}
        for k in keys:
            hop = self.next_hop(k)
            if hop is None or hop == self.me:
                local.append(k)
            else:
                groups.setdefault(hop, []).append(k)
        return local, groups

    def set_successors(self, candidates: Iterable[NodeRef]) -> None:
        """Successor list from candidates in ring order: distinct, stops before me, at most r."""
        out: list[NodeRef] = []
        for n in candidates:
            if n == self.me:
                break
            if n not in out:
                out.append(n)
            if len(out) == self.r:
                break
        self.successors = out or [self.me]

    def forget(self, dead: NodeRef) -> None:
        """Drop a node found dead from every slot it occupies."""
        if self.predecessor == dead:
            self.predecessor = None
        rest = [s for s in self.successors if s != dead]
        self.successors = rest or [self.me]
        self.fingers = [None if f == dead else f for f in self.fingers]
