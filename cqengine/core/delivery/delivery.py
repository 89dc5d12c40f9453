"""Delivery: a DN's alerts to the homes of the subscriptions they are for.

One alert batch per home node: each document once, with its subscriptions there. A home
that cannot be reached (restarting, say) is tried again, each wait twice the last, for the
DN's hold in all; only then are its alerts counted lost. A home takes a batch twice
harmlessly: a docno enters a mailbox once. Replicated, a batch goes to whichever node
serves its home key now: where it was last found, else the key's owner, looked up (a
replica took over from the home). A home whose log has no majority (Settings.home_log)
holds the batch, and so does a home whose data directory is full (it refused the batch
RESOURCE_EXHAUSTED): it is tried again every few seconds for limits.HELD_FOR, so that a
partition healing or space freed meanwhile loses nothing. A batch of the DN's own is
through, and its held copies may go, once each of its deliveries has ended: taken, or
counted lost.
"""

from __future__ import annotations

from collections import OrderedDict

from chord.protocol.calls import Call, Op, PeerFailed, PeerUnreachable
from cqengine.core.alerts.batches import alert_batch
from cqengine.core.basis import limits
from cqengine.core.basis.errors import FULL as DIRECTORY_FULL
from cqengine.core.frame.context import Context
from cqengine.core.frame.documents import PublishedDoc
from cqengine.core.frame.handoffs import Releasing
from cqengine.proto import cqengine_pb2 as pb

# a DN's alerts: (home address, home key) -> document key -> the document, its subscriptions
Alerts = dict[tuple[str, int], dict[int, tuple[PublishedDoc, list[int]]]]
# home, batch, s waited, batch of mine, why a home held it ("": none did; held, it is
# kept longer)
Retry = tuple[str, pb.AlertBatch, float, "int | None", str]
HELD, FULL = "home_in_minority", "home_full"  # why a home held a batch (counted if lost)


class Delivery:
    def __init__(self, ctx: Context, hold: float, dn: Releasing) -> None:
        """`hold`: seconds a home that cannot be reached is tried for; `dn`: told when
        every delivery of a batch of its own has ended."""
        self.ctx, self.hold, self.dn = ctx, hold, dn
        self.retrying: list[Retry] = []  # alert batches waiting to be tried again
        self.unsent: dict[int, int] = {}  # a batch of mine -> its deliveries not yet ended
        self.homes_at: OrderedDict[int, str] = OrderedDict()  # home key -> where it was found
        # alert batches carry when I accepted their first document, for the homes' latency
        # histograms: a live node's (9 bytes a Deliver); the paper's protocol has no such field
        self.stamped = False

    def deliver(self, alerts: Alerts, mine: int | None = None) -> Op:
        """One batch of alerts to each home node: its subscriptions of each document. Then,
        once every home took its alerts (or they were counted lost), the batch of `mine`
        they are of needs its copies no more (while a home is tried again, they stay:
        should I fail, my successor announces it again)."""
        self._unsent(mine, 1)  # until the last home is tried, whatever its retries do
        for (home, key), per_doc in sorted(alerts.items()):
            batch = alert_batch([(doc.alert, subs) for doc, subs in per_doc.values()])
            batch.home_id = key
            if self.stamped:
                batch.accepted = min(d.accepted for d, _ in per_doc.values())
            yield from self._send(home, batch, 0.0, mine)
        self._unsent(mine, -1)

    def flush(self) -> None:
        """The node stops: alerts waiting to be tried again get one last try."""
        retrying, self.retrying = self.retrying, []
        for home, batch, _, mine, _ in retrying:
            self.ctx.host.spawn(self._send(home, batch, self.hold, mine))

    def waiting(self) -> int:
        """Alert batches of no batch of mine (replicas = 1) waiting to be tried again."""
        return sum(1 for _, _, _, mine, _ in self.retrying if mine is None)

    def _unsent(self, mine: int | None, n: int) -> None:
        """Deliveries of my batch `mine` begun (n > 0) or ended (n < 0): when none is left,
        the batch is through."""
        if mine is None:
            return
        left = self.unsent[mine] = self.unsent.get(mine, 0) + n
        if left <= 0:
            del self.unsent[mine]
            self.dn.release(mine)

    def _send(
        self, home: str, batch: pb.AlertBatch, waited: float, mine: int | None, held: str = ""
    ) -> Op:
        """Deliver an alert batch, to the node that serves its home key; if none takes it,
        try again later. The delivery of my batch `mine` has ended when the home took it
        or it is lost."""
        ctx = self.ctx
        key = batch.home_id
        at = self.homes_at.get(key, home) if key else home
        for _ in range(2):
            if at != home and not batch.owner:
                found = pb.AlertBatch()
                found.CopyFrom(batch)
                found.owner, found.home = True, home  # the ring says the key is its now
                batch = found
            try:
                reply = yield Call(ctx.peer(at), "Deliver", batch)
                if reply.held:  # its home's log has no majority now: nothing was numbered
                    self._later(home, batch, waited, mine, held=HELD)
                    return
                if not reply.moved:
                    if key and at != home:
                        self._found_home(key, at)
                    if waited:  # a retry: the delivery ends here
                        self._unsent(mine, -1)
                    return
            except PeerFailed as e:
                if e.code == "RESOURCE_EXHAUSTED" and DIRECTORY_FULL in e.details:
                    # its data directory full: it took nothing, for now
                    self._later(home, batch, waited, mine, held=FULL)
                    return
            except PeerUnreachable:
                pass
            if not key:
                break
            owner, _ = yield from ctx.chord.lookup(key, verify=True)
            if owner.address == at:
                break  # it is there but does not serve the key yet: wait for it
            at = owner.address
        self._later(home, batch, waited, mine, held)

    def _later(
        self, home: str, batch: pb.AlertBatch, waited: float, mine: int | None, held: str = ""
    ) -> None:
        """No node took the batch: try it again after a wait, or, after the hold, count its
        alerts lost. A batch a home `held` (why: its log has no majority now, or its disk
        is full) is kept longer: a partition that heals, or space freed, within
        limits.HELD_FOR loses nothing."""
        ctx = self.ctx
        wait = max(waited, limits.RETRY_FIRST)
        if held:
            wait = min(wait, limits.RETRY_MOST)
        if waited + wait > (limits.HELD_FOR if held else self.hold):
            why = held or "home_unreachable"
            ctx.count(f"dropped:{why}", len(batch.subscription_ids))
            if waited:
                self._unsent(mine, -1)
            return
        ctx.count("alerts_retried", len(batch.subscription_ids))
        if not waited:  # a delivery of the batch goes on after `deliver` is through
            self._unsent(mine, 1)
        retry = (home, batch, waited + wait, mine, held)
        self.retrying.append(retry)
        ctx.host.later(wait, lambda: self._retry(retry))

    def _found_home(self, key: int, address: str) -> None:
        self.homes_at[key] = address
        self.homes_at.move_to_end(key)
        while len(self.homes_at) > limits.PEERS:
            self.homes_at.popitem(last=False)

    def _retry(self, retry: Retry) -> None:
        if retry in self.retrying:  # not already sent by flush
            self.retrying.remove(retry)
            self.ctx.host.spawn(self._send(*retry))
