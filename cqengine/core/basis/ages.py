"""Time as ages, so that no node's wall clock decides what is kept.

A tombstone is kept TOMBSTONE_TTL seconds and a copy of a DN's batch is stale after a
while: both by how long ago something happened, never by comparing two nodes' wall clocks
(one stepped 15 minutes ahead would drop every tombstone it is sent, and a deleted entry
would come back from a copy that missed the deletion). A node keeps such times on its
monotonic clock (`now`), sends them as ages, and a receiver sets them back on its own
`now`: a record's age grows only by the time it spends in flight.

The wall clock (`clock`) is kept for two things only: the stamp a node that predates ages
reads as a tombstone's time, and the stamp a journal keeps over a restart, when the
monotonic clock starts again. A clock stepped while a node is down moves that node's
tombstones by the step, at most to their whole life.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cqengine.core.basis import limits
from cqengine.proto import cqengine_pb2 as pb


@dataclass(frozen=True)
class Ages:
    now: Callable[[], float]  # seconds on a clock that never goes back
    clock: Callable[[], float]  # wall-clock seconds, for stamps

    def made(self, record: pb.EntryRecord | pb.HomeRecord) -> float | None:
        """When a record from another node was deleted, on my `now` clock, from the age it
        carries (None: it was not). A sender that predates ages sends none: taken as new,
        so kept the longest."""
        if not record.deleted:
            return None
        return self.now() - max(record.age, 0.0)

    def fresh(self, made: float) -> bool:
        """Whether a tombstone made then is still kept."""
        return self.now() - made < limits.TOMBSTONE_TTL

    def deleted(self, made: float) -> dict[str, float]:
        """A tombstone's time fields as sent: its age, and a stamp for older nodes (never
        0, which would read as no tombstone)."""
        return {"deleted": max(self.stamp(made), 1.0), "age": max(self.now() - made, 0.0)}

    def stamp(self, made: float) -> float:
        """A time on my `now` clock as a wall-clock stamp."""
        return self.clock() - (self.now() - made)

    def unstamp(self, stamp: float) -> float:
        """A journal's stamp back on my `now` clock after a restart (see above)."""
        return self.now() - min(max(self.clock() - stamp, 0.0), limits.TOMBSTONE_TTL)
