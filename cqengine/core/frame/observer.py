"""What an engine node tells an observer: the points where measurement attaches.

A live node has no observer. The simulator passes one to every node to sum counters ring
wide and, in an experiment, to measure what other settings would have sent
(cqengine.evaluation.measuring.measure). The node calls it and goes on: nothing it does depends on
being observed, as aioquic's connection calls its quic_logger. An observer reads of the
node only what `Node` names.
"""

from __future__ import annotations

from typing import Any, Protocol

from chord.protocol.routing import NodeRef
from cqengine.core.frame.documents import PublishedDoc
from cqengine.core.resolution.runs import Heard
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.terms.settings import Settings
from cqengine.proto import cqengine_pb2 as pb


class Node(Protocol):
    """What an observer may read of the node that tells it (cqengine.core.frame.context.Context)."""

    settings: Settings
    index: InvertedIndex

    @property
    def me(self) -> NodeRef: ...

    def region(self) -> tuple[int, int] | None: ...


class Observer(Protocol):
    def on_count(self, node: Node, name: str, n: int) -> None:
        """A counter of the node grew by n."""

    def on_published(self, node: Node, doc: PublishedDoc) -> None:
        """The node, a DN, stored a document it is about to announce."""

    def on_announce(self, node: Node, msg: pb.Announcement) -> None:
        """The node sends this announcement to a next hop."""

    def on_heard(self, node: Node, heard: Heard) -> None:
        """The node, a QN, holds these runs of an announcement, before it resolves them."""

    def on_resolution_call(
        self, node: Node, heard: Heard, rpc: str, request: Any, reply: Any
    ) -> None:
        """The node asked the DN of `heard` and was answered (a call to itself included)."""

    def on_matched(self, node: Node, heard: Heard, matched: list[list[pb.QueryEntry]]) -> None:
        """The node resolved `heard`: the queries each of its documents matched."""
