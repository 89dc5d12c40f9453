"""The ring's floor: the oldest protocol any of its members speaks, as a node can tell.

A feature that changes what a peer must understand (chord.protocol.versions.FEATURES) is used only
while the floor is at least the version that brought it, so that a ring upgraded one node at
a time works throughout and the feature switches on when the last older node is gone.

No node knows every member, so the floor travels the way stabilization already does: each
round a node reads its successor's floor in the GetNeighbors reply, with how many hops it
came, and keeps the lower of its own protocol and that (a node of a release before versions
sends none: it speaks 1). A floor falls to an older node's protocol at every node behind it
within as many rounds as it is hops away. Rising again needs forgetting: once the older node
is gone its floor would go round the ring for ever, so a floor that came further than the
ring can be long (LIMIT, from the ring's size as the successor list's spread suggests, with
a wide margin) is dropped. Its hops grow by one a round, so the floor rises some LIMIT rounds
after the last older node left: late, never early.
"""

from __future__ import annotations

from chord.protocol.ids import SPACE
from chord.protocol.routing import NodeRef

MARGIN, SLACK = 4, 32  # LIMIT: MARGIN times the ring's estimated size, plus SLACK
CEILING = 1 << 20  # hops at most, whatever the estimate


class Floor:
    def __init__(self, speaks: int) -> None:
        self.speaks = speaks  # the protocol I speak
        self.version, self.hops = speaks, 0  # the floor, and how far away its node is
        # heard from a successor (or found alone) at least once: before, a node that just
        # joined knows nothing of the ring's floor, and uses no feature
        self.known = False

    def heard(self, version: int, hops: int, limit: int) -> None:
        """My successor's floor this round (version 0: a node before versions, so 1)."""
        theirs = (version, hops + 1) if version else (1, 1)
        mine = (self.speaks, 0)
        self.version, self.hops = min(mine, theirs) if theirs[1] <= limit else mine
        self.known = True

    def alone(self) -> None:
        self.version, self.hops, self.known = self.speaks, 0, True

    def uses(self, since: int) -> bool:
        """Whether a feature that came with protocol `since` may be used."""
        return self.known and self.version >= since


def limit(me: NodeRef, successors: list[NodeRef]) -> int:
    """Hops at most a floor may have come: the ring's size as my successors' spread
    suggests (r of them over a span of the circle), times a margin."""
    others = [s for s in successors if s != me]
    if not others:
        return SLACK
    span = (others[-1].id - me.id) % SPACE or SPACE
    estimate = len(others) * SPACE // span
    return min(MARGIN * estimate + SLACK, CEILING)
