"""What a node tells a shell of its state as it changes it, so that the shell can keep it.

The engine core does no I/O: a live node with a data directory gives its EngineNode a
journal (cqengine.live.storage) that writes these records to disk; the simulator gives none.
What a node must not lose when its process dies is exactly what passes through here: the
subscriptions homed (or replicated) at it, the inverted-list entries it holds and their
tombstones, and the alerts waiting in its mailboxes, each alert under its subscription's
sequence number. On the home log, the logs of home keys instead of the subscriptions and
their mailboxes, which are derived from the logs again (cqengine.core.homelog).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from cqengine.core.alerts.mailboxes import AlertDoc, Subscription
from cqengine.core.homelog.log import Log
from cqengine.proto import cqengine_pb2 as pb


class Journal(Protocol):
    def subscribed(self, sub: Subscription) -> None:
        """A subscription is homed or replicated here (its token only as a hash), with the
        alerts its mailbox holds."""

    def unsubscribed(self, sub_id: int, key: int, deleted: float) -> None:
        """It is gone, with its mailbox; `deleted` > 0: its tombstone (home key, when) is
        kept, 0: no tombstone either (collected)."""

    def tombstoned(self, key: int, sub_id: int, version: int | None, deleted: float) -> None:
        """An entry's tombstone under key: its version and when it was made; None: collected."""

    def indexed(self, key: int, entry: pb.QueryEntry) -> None:
        """An entry is held under key (instead of any of its subscription's there)."""

    def unindexed(self, key: int, sub_ids: Iterable[int] | None) -> None:
        """These subscriptions' entries under key are gone (None: every entry under it)."""

    def alerted(self, alerts: list[tuple[int, int, AlertDoc]]) -> None:
        """Alerts entered mailboxes: (subscription, its sequence number, the document)."""

    def alerted_runs(self, runs: list[tuple[AlertDoc, list[int], list[int]]]) -> None:
        """The same, a document at a time: the document, the subscriptions it entered the
        mailboxes of, and its alert's number in each."""

    def acknowledged(self, sub_id: int, first: int) -> None:
        """A subscription's alerts numbered below `first` were acknowledged: they left its
        mailbox."""

    def log_changed(self, key: int, log: Log) -> None:
        """A home key's log changed here (Settings.home_log): its entries from
        `log.changed` on replace those kept, its promise and commit position as they are."""

    def commit(self) -> None:
        """Make everything recorded so far survive the process (one commit per batch).
        A StatusError if it cannot (its disk full: what it was told waits for the next)."""

    def full(self) -> str | None:
        """Why nothing more can be kept now (its disk full, or below its reserve), None if
        it can: the node then refuses every call that would change what it keeps."""
