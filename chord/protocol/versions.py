"""Which versions of the node-to-node protocol a node speaks, and which it still talks to.

Protocol buffers drop fields they do not know without a word: a node of an older release
would take a message of a newer one for what its own fields say (an old node indexing a
boolean query's alternatives under one slot and ignoring its conditions alerts falsely). So
every call a node makes to another names the protocol it speaks and the oldest it talks to
(HEADER, on unary calls and as an Exchange stream opens: the link's handshake); the callee's
Gate refuses a caller outside its range, FAILED_PRECONDITION with both ranges in words, and
the caller counts that peer as gone. A joining node reads its bootstrap node's range from
GetConfig and refuses to join a ring it cannot talk to. A node of a release before versions
names none: protocol 1.

What a newer protocol adds that a peer must understand is a feature (FEATURES): a node
uses it only once every member of the ring speaks it (chord.protocol.floor), so a ring upgraded one
node at a time works throughout, and the feature switches on when the last node is new.
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass

# what this release speaks (2: versions named, tombstone ages, incarnations; 3: a QN's
# matches as columns; 4: a home's log names its subscriptions by row)
PROTOCOL = 4
OLDEST = 1  # the oldest it talks to (1: the releases before versions were named)
HEADER = "cqengine-protocol"  # "SPEAKS-OLDEST", on every call between nodes
OF_ANOTHER_VERSION = "another protocol version"  # how such a refusal's details begin

# A feature a peer must understand -> the protocol version that brought it. Used only while
# the ring's floor (the oldest protocol any member speaks) is at least that version
# (ChordNode.uses). Protocol 2 brought none: an older node ignores each field it added and
# does what it did before (a tombstone's stamp beside its age, a batch's incarnation read as
# an earlier life's). Protocol 3 brought "columns": a QN reports its matches to the DN as
# packed columns (MatchedRequest.subscriptions...), which a node of 2 would read as none.
# Protocol 4 brought "rows": a home key's log names its subscriptions by row in its
# entries (cqengine.core.homelog.rows), which a member of 3 would read as no alerts.
FEATURES: dict[str, int] = {"columns": 3, "rows": 4}


@dataclass(frozen=True)
class Versions:
    speaks: int
    oldest: int

    @classmethod
    def parse(cls, value: str) -> Versions | None:
        """A HEADER's value ("": a node of a release before versions; None: not one)."""
        if not value:
            return cls(1, 1)
        speaks, _, oldest = value.partition("-")
        numbers = speaks.isascii() and speaks.isdigit() and oldest.isascii() and oldest.isdigit()
        if not numbers or not 1 <= int(oldest) <= int(speaks):
            return None
        return cls(int(speaks), int(oldest))

    def header(self) -> str:
        return f"{self.speaks}-{self.oldest}"

    def talks_to(self, other: Versions) -> bool:
        """Each side speaks a version the other still talks to."""
        return other.speaks >= self.oldest and self.speaks >= other.oldest

    def __str__(self) -> str:
        return f"protocol {self.speaks} (talks to {self.oldest}-{self.speaks})"


MINE = Versions(PROTOCOL, OLDEST)


@functools.cache
def software() -> str:
    """This release's version, as installed (read once: Stats and scrapes ask often)."""
    try:
        return importlib.metadata.version("cqengine")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def refusal(theirs: Versions | None, raw: str) -> str:
    """Why a caller's versions are refused, in words (OF_ANOTHER_VERSION first)."""
    said = str(theirs) if theirs is not None else f"an unreadable version {raw!r}"
    return (
        f"{OF_ANOTHER_VERSION}: the caller speaks {said}; this node (cqengine {software()}) "
        f"speaks {MINE}. Upgrade a ring one node at a time, each release talking to the one "
        "before it (docs/operations.md, Upgrades)"
    )
