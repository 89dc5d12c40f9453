"""The documents of DNs' batches a node holds until they are resolved.

A DN's successor holds a copy of each batch the DN publishes, under the DN's id, until the
DN releases it (cqengine.core.dn.dn): should the DN fail, the successor finishes the batch.
They live for seconds, so they are never reconciled: a copy whose release missed this node
is let go once its owner no longer counts the batch as unfinished, and the oldest go first
when more than limits.HELD_DOCUMENTS documents are held. When a copy was made travels with
it as an age, as a tombstone's does (cqengine.core.basis.ages).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from cqengine.core.basis import limits
from cqengine.core.state.ranges import in_range, outside
from cqengine.proto import cqengine_pb2 as pb


class HeldBatches:
    """The batches held, oldest first, each with when its first copy was made (on the
    `now` clock, which never goes back)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.held: OrderedDict[int, pb.HeldBatch] = OrderedDict()  # batch name -> its documents
        self.held_since: dict[int, float] = {}  # batch name -> when its first copy was made
        self.documents = 0

    def hold(self, batch: pb.HeldBatch) -> bool:
        if batch.batch in self.held:
            return False
        self.held[batch.batch] = batch
        self.held_since[batch.batch] = self.now() - max(batch.age, 0.0)
        self.documents += len(batch.documents)
        while self.documents > limits.HELD_DOCUMENTS and len(self.held) > 1:
            self.release(next(iter(self.held)))
        return True

    def release(self, batch: int) -> pb.HeldBatch | None:
        held = self.held.pop(batch, None)
        if held is not None:
            self.documents -= len(held.documents)
            del self.held_since[batch]
        return held

    def release_stale(self, lo: int, hi: int, live: set[int], before: float) -> int:
        """Let go of the copies under (lo, hi] that its owner no longer counts as
        unfinished (a release that missed me), held since before `before`; how many."""
        stale = [
            name
            for name, b in self.held.items()
            if in_range(b.key, lo, hi) and name not in live and self.held_since[name] < before
        ]
        for name in stale:
            self.release(name)
        return len(stale)

    def drop_outside(self, ranges: Sequence[tuple[int, int]]) -> int:
        """Let go of the copies under keys in none of these ranges; how many documents
        went."""
        gone = 0
        names = list(self.held)
        for at in np.flatnonzero(outside((self.held[n].key for n in names), ranges)).tolist():
            gone += len(self.held[names[at]].documents)
            self.release(names[at])
        return gone

    def handed_over(self, lo: int, hi: int) -> Iterator[pb.HeldBatch]:
        """The copies under keys in (lo, hi], each with its age as it leaves."""
        for name, b in self.held.items():
            if in_range(b.key, lo, hi):
                b.age = self.now() - self.held_since[name]
                yield b
