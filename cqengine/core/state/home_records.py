"""A node's home records as records that merge: the subscriptions homed or replicated
here with their mailboxes, and the tombstones of those unsubscribed.

A subscription's home record lives under its home key (cqengine.core.alerts.mailboxes),
on the key's owner, which serves it, and on the owner's next R-1 successors. A record
merges into a copy by its mailbox's numbers: alerts join on, acknowledgements move the
first on, and a gap before a copy's alerts is sent for. An unsubscribed subscription
leaves a tombstone, which beats every record of it and is kept TOMBSTONE_TTL seconds
(its age travelling with it, as an entry's does: cqengine.core.state.entry_records).

The alerts and acknowledgements a home copies here between records are taken in by
cqengine.core.state.replica_intake; this part of the record store
(cqengine.core.state.records) holds the records, and counts the copies that the
subscriptions served here have on their way to the replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from cqengine.core.alerts.batches import alerts_taken
from cqengine.core.alerts.mailboxes import Subscription, home_record, record_alerts, subscription_of
from cqengine.core.basis.ages import Ages
from cqengine.core.state import summaries
from cqengine.core.state.journal import Journal
from cqengine.core.state.ranges import in_range, outside
from cqengine.proto import cqengine_pb2 as pb

# what tells copies of a home record apart: key, subscription, unsubscribed, first, next
Summary = tuple[int, int, bool, int, int]
# the subscriptions with home keys in a range, with their keys and ids as columns
Homed = tuple[list[Subscription], np.ndarray, np.ndarray]


class HomeRecords:
    """The home records under a node's keys. `subscriptions` is the engine's own dict (a
    subscription served here is one of them); `logged`: the home log keeps them
    (cqengine.core.homelog), so they are none of these records, neither copied, nor
    handed over, nor collected."""

    def __init__(self, subscriptions: dict[int, Subscription], ages: Ages, logged: bool) -> None:
        self.subscriptions = subscriptions
        self.ages = ages
        self.logged = logged
        self.journal: Journal | None = None
        self.gone: dict[int, tuple[int, float]] = {}  # unsubscribed: sub -> home key, made
        # subscriptions served here with copies on their way to the replicas (alerts or
        # acknowledgements; cqengine.core.home.home): how many copies each
        self.copying: dict[int, int] = {}

    # ---- merging -----------------------------------------------------------------------

    def put_home(self, record: pb.HomeRecord, authority: bool = False) -> bool | int:
        """Merge a home record (`authority`: this node serves its home key, so its own
        numbering of alerts wins). True if it changed anything, False if not, or the number
        of the first alert this copy lacks before the record's (a gap: send from there)."""
        sub_id = record.subscription_id
        made = self.ages.made(record)
        if made is not None:
            return self._unsubscribed(sub_id, record.key, made)
        if sub_id in self.gone:
            return False
        sub = self.subscriptions.get(sub_id)
        changed = False
        if sub is None:
            if not record.token_hash:
                return False  # alerts of a record not here yet: reconciliation brings it whole
            sub = self.subscriptions[sub_id] = subscription_of(record)
            changed = True
            if self.journal is not None:
                self.journal.subscribed(sub)
        box = sub.mailbox
        box.saw(record.seen, record.first)
        if box.acknowledge(record.first):
            changed = True
            if self.journal is not None:
                self.journal.acknowledged(sub_id, box.first)
        if record.token_hash:  # a whole record: its memory of what was acknowledged came
            box.remembered(record.first)
        if not record.docnos:  # an acknowledgement: alerts still on their way here are no gap
            return changed
        before = box.next
        gap = box.put(record.start, record_alerts(record), authority)
        if gap is not None:
            return gap
        if box.next != before:
            changed = True
            self.journal_alerted(sub, before)
        return changed

    def journal_alerted(self, sub: Subscription, before: int) -> None:
        """Tell the journal of the alerts a copy of a mailbox took, numbered from `before`."""
        if self.journal is not None and sub.mailbox.next != before:
            self.journal.alerted(alerts_taken(sub, before))

    def unsubscribe(self, sub_id: int, key: int) -> bool:
        return self._unsubscribed(sub_id, key, self.ages.now())

    def _unsubscribed(self, sub_id: int, key: int, made: float) -> bool:
        had = self.subscriptions.pop(sub_id, None) is not None
        fresh = sub_id not in self.gone and self.ages.fresh(made)
        if fresh:
            self.gone[sub_id] = (key, made)
        if (had or fresh) and self.journal is not None:
            self.journal.unsubscribed(sub_id, key, self.ages.stamp(made) if fresh else 0.0)
        return had or fresh

    # ---- the records as sent -----------------------------------------------------------

    def homes_in(self, lo: int, hi: int) -> Iterator[tuple[Summary, Subscription | None]]:
        """Each home record in (lo, hi] as what tells copies apart (key, subscription,
        unsubscribed, first, next), with its subscription (None: a tombstone)."""
        if self.logged:
            return
        for sub in self.subscriptions.values():
            if sub.key and in_range(sub.key, lo, hi):
                yield (sub.key, sub.id, False, sub.mailbox.first, sub.mailbox.next), sub
        for sub_id, (key, _) in self.gone.items():
            if in_range(key, lo, hi):
                yield (key, sub_id, True, 0, 0), None

    def home_records(self, lo: int, hi: int) -> Iterator[pb.HomeRecord]:
        for (_key, sub_id, _, _, _), sub in self.homes_in(lo, hi):
            if sub is not None:
                yield home_record(sub)
            else:
                yield self.gone_record(sub_id)

    def home_record(self, sub_id: int) -> pb.HomeRecord | None:
        """A subscription's record as sent, its tombstone if it has one (None: neither, or
        a subscription with no home key)."""
        sub = self.subscriptions.get(sub_id)
        if sub is not None:
            return home_record(sub) if sub.key else None
        return self.gone_record(sub_id) if sub_id in self.gone else None

    def gone_record(self, sub_id: int) -> pb.HomeRecord:
        """An unsubscribed subscription's tombstone, as sent."""
        key, made = self.gone[sub_id]
        times = self.ages.deleted(made)
        return pb.HomeRecord(
            key=key, subscription_id=sub_id, deleted=times["deleted"], age=times["age"]
        )

    # ---- for reconciliation's summaries ------------------------------------------------

    def homed_in(self, lo: int, hi: int) -> Homed:
        """The subscriptions with home keys in (lo, hi], their keys and their ids."""
        subs = [] if self.logged else list(self.subscriptions.values())
        keys = np.fromiter((s.key for s in subs), dtype=np.uint64, count=len(subs))
        at = np.flatnonzero(summaries.in_range(keys, lo, hi) & (keys > 0))
        chosen = [subs[i] for i in at]
        return chosen, keys[at], np.fromiter((s.id for s in chosen), dtype=np.uint64)

    def gone_in(self, lo: int, hi: int) -> summaries.Homes:
        """The summaries of my tombstones under home keys in (lo, hi]."""
        gone = self.gone.items()
        return summaries.Homes.of(
            [(k, s, True, 0, 0, False) for s, (k, _) in gone if in_range(k, lo, hi)]
        )

    def settled(self) -> dict[int, tuple[int, int]]:
        """The (first, next) of each mailbox with copies on their way to the replicas, as
        every replica holds it unless a copy is lost (Mailbox.settled); the others are as
        they are."""
        subs = self.subscriptions
        return {s: subs[s].mailbox.settled for s in self.copying if s in subs}

    def count_copies(self, subs: Iterable[int], n: int = 1) -> None:
        """n more copies of these subscriptions' alerts or acknowledgements on their way
        (1: one began; -1: one ended)."""
        copying = self.copying
        for s in subs:
            left = copying.get(s, 0) + n
            if left > 0:
                copying[s] = left
            else:
                copying.pop(s, None)

    # ---- collection --------------------------------------------------------------------

    def expire(self, due: float) -> None:
        """Collect the tombstones made before `due`."""
        for sub_id, (key, made) in list(self.gone.items()):
            if made < due:
                del self.gone[sub_id]
                if self.journal is not None:
                    self.journal.unsubscribed(sub_id, key, 0.0)

    def drop_outside(self, ranges: Sequence[tuple[int, int]]) -> int:
        """Drop the subscriptions with home keys in none of these ranges; how many went."""
        subs = [] if self.logged else list(self.subscriptions.values())
        keys = [s.key for s in subs]
        keyed = np.array(keys, dtype=np.uint64) > 0
        gone = 0
        for at in np.flatnonzero(outside(keys, ranges) & keyed).tolist():
            sub = subs[at]
            del self.subscriptions[sub.id]
            gone += 1
            if self.journal is not None:
                self.journal.unsubscribed(sub.id, sub.key, 0.0)
        return gone
