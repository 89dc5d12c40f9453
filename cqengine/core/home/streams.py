"""A home's alert streams: what each open stream of a subscriber has sent, what its
client's acknowledgement releases, and which stream serves each subscription.

Alerts stay in their mailboxes until acknowledged; a stream only moves a cursor past them,
so a stream that breaks loses none: the next resumes from the numbers its client gives
(each subscription's `next`). A client acknowledges either with each subscription's token
and the number of the first alert it still wants (AckRequest.subscriptions: a token hash
per subscription), or, on a stream opened with StreamRequest.watermark, with the stream's
id and how many of its messages it has handed out (AckRequest.stream, .through). The
stream's tokens were checked once, as it opened; for the watermark the stream keeps, per
message sent and not yet acknowledged, where it left each subscription it carried.

A subscription is served by one stream at a time: a newer one takes it over. The live
shell (cqengine.live.service) runs each stream's call: it waits until the stream is
notified, and sends the messages the stream gives.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from cqengine.core.alerts.batches import numbered_batch, numbered_documents
from cqengine.core.alerts.mailboxes import Subscription
from cqengine.core.basis.errors import EngineError
from cqengine.core.frame.context import Context
from cqengine.proto import cqengine_pb2 as pb

ALERTS_PER_MESSAGE = 1_000  # alerts one message of a stream carries at most
# messages a watermark stream sends before its client acknowledges them: beyond, it waits
# (its alerts wait in their mailboxes), so a client that stopped reading costs the home no
# more memory than this. Far above what Client.alerts sends between acknowledgements (at
# most ACK_ALERTS alerts, each message one or more).
STREAM_UNACKED = 4096

# what a stream sends next: each subscription, the number of its first alert, how many
Waiting = list[tuple[Subscription, int, int]]


def _unheard() -> None:
    """Notifies nobody: a stream driven directly, with no call waiting on it."""


class Stream:
    """An open stream: its subscriptions, where each stands in its mailbox (the number of
    the next alert to send), and those with alerts to send. `notify` tells its call there
    is something to look at: alerts to send, room made by an acknowledgement, a
    subscription gone or moved."""

    def __init__(
        self,
        subs: Sequence[Subscription],
        nexts: Mapping[int, int],
        watermark: bool = False,
        notify: Callable[[], None] = _unheard,
    ) -> None:
        self.subs = {s.id: s for s in subs}
        self.cursor = {s.id: nexts.get(s.id, 0) for s in subs}
        self.ready: dict[int, None] = dict.fromkeys(s.id for s in subs if self._unsent(s)[1])
        self.notify = notify
        self.moved = False  # this node no longer serves one of its subscriptions
        # acknowledged by watermark: the stream's id, and per message sent and not yet
        # acknowledged, each subscription it carried and the number after its last alert.
        # The id stands for the stream's tokens (an acknowledgement names no other), so it
        # is a secret's randomness, never the host's seeded ids
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
        """The subscription has new alerts to send."""
        self.ready[sub_id] = None
        self.notify()

    def message(self, waiting: Waiting) -> pb.AlertBatch:
        """The alerts waiting, each document once with the subscriptions it alerts, each
        alert with its sequence number: masked out of their table's columns at once where
        they are kept in one (a home on the log), else read mailbox by mailbox."""
        by_table: dict[int, Waiting] = {}
        for w in waiting:
            by_table.setdefault(id(w[0].table), []).append(w)
        if len(by_table) == 1 and waiting[0][0].table is not None:
            # the usual: one key's log
            batch: pb.AlertBatch = waiting[0][0].table.message(waiting)
            return batch
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

    def sent(self, waiting: Waiting) -> None:
        """The cursors move past what was sent; its alerts stay in their mailboxes."""
        for sub, start, n in waiting:
            self.cursor[sub.id] = start + n
        if self.id:
            self.unacked.append([(sub.id, start + n) for sub, start, n in waiting])

    def acknowledged(self, through: int) -> dict[int, int]:
        """The client handed out every alert of the first `through` messages: each
        subscription still on the stream whose alerts those newly acknowledge, and the
        number of the first alert it still wants. Acknowledgements made room: the stream
        sends on (notified). INVALID_ARGUMENT: more messages than it sent."""
        if through > self.messages_sent:
            raise EngineError(
                "INVALID_ARGUMENT", f"{through} messages acknowledged of {self.messages_sent} sent"
            )
        nexts: dict[int, int] = {}
        while self.acked < through:
            for sub_id, next_seq in self.unacked.popleft():
                if sub_id in self.subs:
                    nexts[sub_id] = next_seq  # a later message's is later
            self.acked += 1
        self.notify()
        return nexts

    def drop(self, sub_id: int) -> None:
        """The subscription leaves this stream (unsubscribed, or taken over by a newer one)."""
        self.subs.pop(sub_id, None)
        self.notify()

    def waiting(self) -> Waiting:
        """The alerts to send next, up to a message's worth: each subscription, the number
        of its first alert to send, and how many."""
        out, room = [], ALERTS_PER_MESSAGE
        for sub_id in list(self.ready):
            sub = self.subs.get(sub_id)
            if sub is None:  # it left the stream
                del self.ready[sub_id]
                continue
            start, unsent = self._unsent(sub)
            n = min(room, unsent)
            if n > 0:
                out.append((sub, start, n))
                room -= n
            if n >= unsent:
                del self.ready[sub_id]
            if not room:
                break
        return out


class Streams:
    """A node's open streams: the one that serves each subscription, and those
    acknowledged by watermark, by id. `served` is placement's check that I serve a
    subscription now (EngineError UNAVAILABLE if not: the client looks its home key up)."""

    def __init__(self, ctx: Context, served: Callable[[Subscription], Subscription]) -> None:
        self.ctx, self.served = ctx, served
        self.serving: dict[int, Stream] = {}  # subscription -> its one open stream
        self.by_id: dict[bytes, Stream] = {}  # streams acknowledged by watermark

    def open(
        self,
        subs: Sequence[Subscription],
        nexts: Mapping[int, int],
        watermark: bool = False,
        notify: Callable[[], None] = _unheard,
    ) -> Stream:
        """A stream of these subscriptions from the numbers their client gives (`nexts`),
        each taken over from the stream that served it (which goes on with the others)."""
        stream = Stream(subs, nexts, watermark, notify)
        if stream.id:
            self.by_id[stream.id] = stream
        for sub in subs:
            old = self.serving.get(sub.id)
            if old is not None:
                old.drop(sub.id)
            self.serving[sub.id] = stream
        return stream

    def close(self, stream: Stream) -> None:
        """Its call ended (broke, moved, or had no subscription left): it serves nothing
        now, and its watermark is no longer taken."""
        self.by_id.pop(stream.id, None)
        for sub_id in stream.subs:
            if self.serving.get(sub_id) is stream:
                del self.serving[sub_id]

    def alerted(self, sub_ids: Iterable[int]) -> None:
        """These subscriptions have new alerts: their streams send them."""
        serving = self.serving
        for sub_id in sub_ids:
            stream = serving.get(sub_id)
            if stream is not None:
                stream.wake(sub_id)

    def unsubscribed(self, sub_id: int) -> None:
        """The subscription ended: it leaves its stream (a stream left with none ends)."""
        stream = self.serving.pop(sub_id, None)
        if stream is not None:
            stream.drop(sub_id)

    def region_changed(self) -> None:
        """My region changed: the streams of subscriptions I no longer serve are moved (they
        end, so that their clients find the node that serves them now)."""
        ctx = self.ctx
        for sub_id, stream in list(self.serving.items()):
            sub = ctx.subscriptions.get(sub_id)
            if sub is None or (sub.key and not ctx.serves(sub.key)):
                stream.moved = True
                stream.notify()

    def watermark(self, stream_id: bytes, through: int) -> list[tuple[Subscription, int]]:
        """A stream's client handed out its first `through` messages: each subscription
        whose alerts those release, and the number of the first alert it still wants (the
        stream's tokens were checked as it opened: no hash per subscription). EngineError:
        NOT_FOUND, no open stream of that id; INVALID_ARGUMENT, more messages than it sent;
        UNAVAILABLE, a subscription served by another node now (the client follows)."""
        stream = self.by_id.get(stream_id)
        if stream is None:
            raise EngineError(
                "NOT_FOUND",
                f"no open stream of that id at {self.ctx.me.address}: acknowledge with tokens",
            )
        nexts = stream.acknowledged(through)
        subscriptions = self.ctx.subscriptions
        acks, keys = [], set()  # home keys found served (a node serves a few)
        for sub_id, next_seq in nexts.items():
            sub = subscriptions.get(sub_id)
            if sub is None:
                continue  # ended meanwhile: nothing of it to acknowledge
            if sub.key not in keys:
                self.served(sub)
                keys.add(sub.key)
            acks.append((sub, next_seq))
        return acks
