"""What a node holds under ring keys, as records that merge: replication and reconciliation.

With R replicas (Settings.replicas) every record lives on its key's owner and the owner's
next R-1 successors:

- an inverted-list entry, under its indexing term's id, or its tombstone
  (cqengine.core.state.entry_records).
- a subscription's home record with its mailbox, under its home key, or its tombstone
  (cqengine.core.state.home_records); the alerts and acknowledgements its home copies to
  it between records are taken in by cqengine.core.state.replica_intake.
- the documents of a DN's batch until it is resolved, under the DN's id (its successor holds
  them: no reconciliation, they live for seconds; cqengine.core.state.held_batches).

The owner of a range reconciles it with each replica (cqengine.core.home.replication;
this node's side of it: cqengine.core.state.reconciliation). Each node holds exactly one
`RecordStore`, the one object the rest of the node holds: it is made of a part for each
kind of record, and keeps what spans them, the merge of records from another node, their
collection, and the ring's hand-over (chord.protocol.store.KeyStore) on joins and leaves:
copied, not moved, when R > 1, since the node that gives them stays a replica. With R = 1
the store is the paper's: entries move with ownership and nothing else does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cqengine.core.alerts.mailboxes import Subscription
from cqengine.core.basis import limits
from cqengine.core.basis.ages import Ages
from cqengine.core.state.entry_records import EntryRecords
from cqengine.core.state.held_batches import HeldBatches
from cqengine.core.state.home_records import HomeRecords
from cqengine.core.state.journal import Journal
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.reconciliation import Reconciliation
from cqengine.core.state.replica_intake import ReplicaIntake
from cqengine.proto import cqengine_pb2 as pb


class RecordStore:
    """A node's records: index entries and their tombstones (`entries`), the
    subscriptions homed or replicated here with their mailboxes (`homes`, copies taken in
    by `intake`), and the batches held for DNs (`batches`); their reconciliation
    (`reconciliation`).

    `subscriptions` is the engine's own dict (a subscription served here is one of them);
    `now` a clock that never goes back: when a tombstone was made and a copy first held
    are kept on it, and travel as ages. `clock` is wall time (default: `now`), only for
    the stamps an older node reads as a tombstone's time and a journal keeps over a
    restart, when the monotonic clock starts again."""

    def __init__(
        self,
        index: InvertedIndex,
        subscriptions: dict[int, Subscription],
        replicas: int,
        now: Callable[[], float],
        logged: bool = False,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`logged`: the home log keeps the subscriptions (cqengine.core.homelog): they are
        none of this store's records, neither copied, nor handed over, nor collected."""
        self.index = index
        self.subscriptions = subscriptions
        self.replicas = replicas
        self.ages = Ages(now, clock or now)
        self.now = now
        self.entries = EntryRecords(index, self.ages)
        self.homes = HomeRecords(subscriptions, self.ages, logged)
        self.intake = ReplicaIntake(self.homes, replicas)
        self.batches = HeldBatches(now)
        self.reconciliation = Reconciliation(self.entries, self.homes, self.intake)

    @property
    def journal(self) -> Journal | None:
        """Where the parts that change what outlives the process tell of it."""
        return self.entries.journal

    @journal.setter
    def journal(self, journal: Journal | None) -> None:
        self.entries.journal = self.homes.journal = journal

    @property
    def held_documents(self) -> int:
        return self.batches.documents

    def merge(self, records: pb.Records, serves: Callable[[int], bool] = lambda key: False) -> int:
        """Merge records from another node; how many changed what I hold. `serves(key)`:
        whether I serve that home key (my numbering of its alerts wins)."""
        changed = 0
        for r in records.entries:
            changed += self.entries.put_entry(r.key, r.entry, self.ages.made(r))
        for h in records.homes:
            changed += self.homes.put_home(h, serves(h.key)) is True
        for batch in records.batches:
            changed += self.batches.hold(batch)
        return changed

    # ---- collection --------------------------------------------------------------------

    def expire(self) -> None:
        """Collect the tombstones older than TOMBSTONE_TTL."""
        due = self.now() - limits.TOMBSTONE_TTL
        self.entries.expire(due)
        self.homes.expire(due)

    def drop_outside(self, ranges: list[tuple[int, int]]) -> int:
        """Drop the records under keys in none of these ranges (no owner counts on me for
        them any more); how many went. It runs every round and mostly finds nothing to
        drop: the keys are tested as arrays, not one by one."""
        gone = self.entries.drop_outside(ranges)
        gone += self.batches.drop_outside(ranges)
        return gone + self.homes.drop_outside(ranges)

    # ---- the ring's hand-over (chord.protocol.store.KeyStore) --------------------------

    @property
    def copies(self) -> bool:
        return self.replicas > 1

    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        """The records under keys in (lo, hi]: moved (R = 1, entries only), or copied."""
        if self.replicas == 1:
            return self.index.take_range(lo, hi)
        out = []
        for r in self.entries.entry_records(lo, hi):
            out.append((r.key, pb.Records(entries=[r]).SerializeToString()))
        for h in self.homes.home_records(lo, hi):
            out.append((h.key, pb.Records(homes=[h]).SerializeToString()))
        for b in self.batches.handed_over(lo, hi):
            out.append((b.key, pb.Records(batches=[b]).SerializeToString()))
        return out

    def put_items(self, items: Iterable[tuple[int, bytes]]) -> None:
        if self.replicas == 1:
            self.index.put_items(items)
            return
        for _, data in items:
            self.merge(pb.Records.FromString(data))

    def __len__(self) -> int:
        return len(self.index)
