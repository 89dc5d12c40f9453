"""The hand-offs between an engine node's roles, named: what one role needs of another, as
a Protocol the other's class meets. A role holds the other role itself, typed by what it
needs of it here, so that reading `self.qn.heard(h)` leads to the QN (go-to-definition
here, then to the class named in the docstring); the node (cqengine.core.node) hands each
role the roles it names. A document's whole path: docs/architecture.md.
"""

from __future__ import annotations

from typing import Protocol

from chord.protocol.calls import Op
from chord.protocol.routing import NodeRef
from cqengine.core.resolution.runs import Announced, Heard, Run
from cqengine.proto import cqengine_pb2 as pb


class Hearer(Protocol):
    """The QN (cqengine.core.qn.qn.QN), as the announcer hands it what stopped here."""

    def heard(self, h: Heard) -> Op:
        """The runs of a batch that stopped in my region: resolved with their DN, and the
        matches reported."""
        ...


class Announcing(Protocol):
    """The announcer (cqengine.core.announcement.announcer.Announcer), as the DN hands it a
    batch to announce."""

    def announce(
        self,
        dn: NodeRef,
        docs: list[Announced],
        hops: int,
        batch: int = 0,
        share: int = 0,
        owner: bool = False,
    ) -> Op:
        """A batch's documents down the ring's embedded trees from here."""
        ...


class HopFilters(Protocol):
    """The aggregate filters (cqengine.core.announcement.filters.Filters), as the announcer
    asks its hops for theirs, keeps them, leaves out what they spare, and grants its own."""

    def wanted(self, hop: NodeRef) -> bool:
        """Should my announcement ask the hop for its filter (I hold none current)?"""
        ...

    def keep(self, hop: NodeRef, reply: pb.AnnounceReply, asked_at: float) -> None:
        """The filter a hop granted in its reply to a message sent at `asked_at`."""
        ...

    def forget(self, hop: NodeRef) -> None:
        """The hop did not answer: its filter goes."""
        ...

    def spared(self, hop: NodeRef, parts: dict[int, list[Run]]) -> list[int]:
        """The documents (places in the batch) the hop's filter says to leave out."""
        ...

    def grant(self, reply: pb.AnnounceReply) -> None:
        """My filter into my reply, if I can state my region and it is small enough."""
        ...


class Expecting(Protocol):
    """The DN's reports (cqengine.core.delivery.reports.Reports), as the DN hands them a
    batch it sends out."""

    hold: float  # seconds a batch's alerts are held for its reports (0: none counted)

    def expect(self, name: int, batch: list[Announced], again: int = 0) -> None:
        """My batch `name` goes out now: its reports are counted, for the hold at most."""
        ...


class Releasing(Protocol):
    """The DN (cqengine.core.dn.dn.DN), as its deliveries tell it that a batch of its own
    is through."""

    def release(self, batch: int) -> None:
        """My batch is through: its copies are needed no more."""
        ...


class Copier(Protocol):
    """Replication (cqengine.core.home.replication.Replication): the one way a role's
    records reach my replicas (the home's alerts and acknowledgements, placement's entries
    and home records, gossip's moved entries)."""

    def copy(self, records: pb.Records) -> Op:
        """Records changed here, to my replica set."""
        ...


class OwnBatches(Protocol):
    """The DN (cqengine.core.dn.dn.DN), as replication sees it: the batches of mine not
    through yet, whose copies must stay, and the batches of DNs gone that are mine now."""

    own: dict[int, list[NodeRef]]

    def take_over(self) -> Op:
        """Finish the batches of DNs whose key is mine now."""
        ...
