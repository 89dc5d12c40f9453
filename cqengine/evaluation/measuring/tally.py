"""The simulator's default observer: every node's counters summed ring-wide.

It is the observer protocol (cqengine.core.frame.observer) doing the least it can, and so the
base of the measurement pass's observer (cqengine.evaluation.measuring.measure.Shadows), which
measures on top of the same counters. It lives apart from the pass because every
simulated ring has one, measured or not.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cqengine.core.frame.documents import PublishedDoc
from cqengine.core.frame.observer import Node
from cqengine.core.resolution.runs import Heard
from cqengine.proto import cqengine_pb2 as pb


class Tally:
    """The observer a simulator gives its nodes unless told otherwise: every node's
    counters summed ring-wide, as they grow."""

    def __init__(self) -> None:
        self.tally: Counter[str] = Counter()

    def on_count(self, node: Node, name: str, n: int) -> None:
        self.tally[name] += n

    def on_published(self, node: Node, doc: PublishedDoc) -> None:
        pass

    def on_announce(self, node: Node, msg: pb.Announcement) -> None:
        pass

    def on_heard(self, node: Node, heard: Heard) -> None:
        pass

    def on_resolution_call(
        self, node: Node, heard: Heard, rpc: str, request: Any, reply: Any
    ) -> None:
        pass

    def on_matched(self, node: Node, heard: Heard, matched: list[list[pb.QueryEntry]]) -> None:
        pass

    def settle(self) -> None:
        """A document has run its course (the simulator says so)."""
