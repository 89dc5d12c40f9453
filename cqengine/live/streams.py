"""A home's alert streams: what each live StreamAlerts call has sent, and what its client
has acknowledged.

Alerts stay in their mailboxes until acknowledged; a stream only moves a cursor past them.
A client acknowledges either with each subscription's token and the number of the first
alert it still wants (AckRequest.subscriptions: a token hash per subscription), or, on a
stream opened with StreamRequest.watermark, with the stream's id and how many of its
messages it has handed out (AckRequest.stream, .through). The stream's tokens were checked
once, as it opened; for the watermark the stream keeps, per message sent and not yet
acknowledged, where it left each subscription it carried.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import Sequence

from cqengine.core.alerts.mailboxes import Subscription, numbered_batch, numbered_documents
from cqengine.proto import cqengine_pb2 as pb

ALERTS_PER_MESSAGE = 1_000  # alerts one message of a stream carries at most
# messages a watermark stream sends before its client acknowledges them: beyond, it waits
# (its alerts wait in their mailboxes), so a client that stopped reading costs the home no
# more memory than this. Far above what Client.alerts sends between acknowledgements (at
# most ACK_ALERTS alerts, each message one or more).
STREAM_UNACKED = 4096


class Stream:
    """A live StreamAlerts call: its subscriptions, where each stands in its mailbox (the
    number of the next alert to send), and those with alerts to send."""

    def __init__(
        self, subs: Sequence[Subscription], nexts: dict[int, int], watermark: bool = False
    ) -> None:
        self.subs = {s.id: s for s in subs}
        self.cursor = {s.id: nexts.get(s.id, 0) for s in subs}
        self.ready: dict[int, None] = dict.fromkeys(s.id for s in subs if self._unsent(s)[1])
        self.event = asyncio.Event()
        self.moved = False  # this node no longer serves one of its subscriptions
        # acknowledged by watermark: the stream's id, and per message sent and not yet
        # acknowledged, each subscription it carried and the number after its last alert
        self.id = secrets.token_bytes(16) if watermark else b""
        self.unacked: deque[list[tuple[int, int]]] = deque()
        self.acked = 0  # messages acknowledged so far

    @property
    def messages_sent(self) -> int:
        """Of a stream acknowledged by watermark: its messages sent so far."""
        return self.acked + len(self.unacked)

    def _unsent(self, sub: Subscription) -> tuple[int, int]:
        """The number of its first alert to send, and how many it has to send: from its
        cursor (or its mailbox's first: those below were dropped) to the first it may not
        send yet (not on every replica). Its mailbox's numbers read once (on the home log,
        from its table: a lookup and two array items)."""
        first, shown, _ = sub.span()
        start = max(self.cursor[sub.id], first)
        return start, shown - start

    def wake(self, sub_id: int) -> None:
        self.ready[sub_id] = None
        self.event.set()

    def message(self, waiting: list[tuple[Subscription, int, int]]) -> pb.AlertBatch:
        """The alerts waiting, each document once with the subscriptions it alerts, each
        alert with its sequence number: masked out of their table's columns at once where
        they are kept in one (a home on the log), else read mailbox by mailbox."""
        by_table: dict[int, list[tuple[Subscription, int, int]]] = {}
        for w in waiting:
            by_table.setdefault(id(w[0].table), []).append(w)
        if len(by_table) == 1 and waiting[0][0].table is not None:
            return waiting[0][0].table.message(waiting)  # the usual: one key's log
        alerts = []
        for part in by_table.values():
            table = part[0][0].table
            if table is None:
                alerts += [
                    (s.id, at + i, d)
                    for s, at, n in part
                    for i, d in enumerate(s.alerts(at, at + n))
                ]
            else:  # (a node leading several keys' logs: each table's masked at once)
                for doc, ids, seqs in numbered_documents(table.message(part)):
                    alerts += [(sub_id, seq, doc) for sub_id, seq in zip(ids, seqs)]
        return numbered_batch(alerts)

    def next_message(self) -> pb.AlertBatch | None:
        """The next message, taken as sent; None when nothing waits (or, acknowledged by
        watermark, STREAM_UNACKED messages wait for their acknowledgement)."""
        if len(self.unacked) >= STREAM_UNACKED:
            return None
        waiting = self.waiting()
        if not waiting:
            return None
        message = self.message(waiting)
        if self.id and not self.messages_sent:  # its first message
            message.stream = self.id
        self.sent(waiting)
        return message

    def sent(self, waiting: list[tuple[Subscription, int, int]]) -> None:
        for sub, start, n in waiting:
            self.cursor[sub.id] = start + n
        if self.id:
            self.unacked.append([(sub.id, start + n) for sub, start, n in waiting])

    def acknowledged(self, through: int) -> dict[int, int]:
        """The client handed out every alert of the first `through` messages: each
        subscription still on the stream whose alerts those newly acknowledge, and the
        number of the first alert it still wants. Acknowledgements made room: the stream
        sends on (woken)."""
        if through > self.messages_sent:
            raise ValueError(f"{through} messages acknowledged of {self.messages_sent} sent")
        nexts: dict[int, int] = {}
        while self.acked < through:
            for sub_id, next_seq in self.unacked.popleft():
                if sub_id in self.subs:
                    nexts[sub_id] = next_seq  # a later message's is later
            self.acked += 1
        self.event.set()
        return nexts

    def drop(self, sub_id: int) -> None:
        """The subscription leaves this stream (unsubscribed, or taken over by a newer one)."""
        self.subs.pop(sub_id, None)
        self.event.set()

    def waiting(self) -> list[tuple[Subscription, int, int]]:
        """The alerts to send next, up to a message's worth: each subscription, the number
        of its first alert to send, and how many."""
        out, room = [], ALERTS_PER_MESSAGE
        for sub_id in list(self.ready):
            sub = self.subs.get(sub_id)
            start, unsent = self._unsent(sub) if sub is not None else (0, 0)
            n = min(room, unsent)
            if n > 0:
                out.append((sub, start, n))
                room -= n
            if n >= unsent:
                del self.ready[sub_id]
            if not room:
                break
        return out
