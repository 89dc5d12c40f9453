"""What a node holds under ring keys, as records that merge: replication and reconciliation.

With R replicas (Settings.replicas) every record lives on its key's owner and the owner's
next R-1 successors:

- an inverted-list entry, under its indexing term's id. Entries are immutable: a record is
  (version, tombstone or entry), and of two records of one (key, subscription) the higher
  version wins, a tombstone at equal version. Merging is a maximum, so copies that have
  seen the same records agree whatever the order (a join semilattice); a tombstone is
  kept TOMBSTONE_TTL seconds, long enough to reach every replica, then collected. Its age
  travels with it, counted on each holder's monotonic clock, so every copy collects it at
  about the same time whatever the nodes' wall clocks say.
- a subscription's home record with its mailbox, under its home key
  (cqengine.core.alerts.mailboxes).
- the documents of a DN's batch until it is resolved, under the DN's id (its successor holds
  them: no reconciliation, they live for seconds).

The owner of a range reconciles it with each replica (cqengine.core.home.replication): it sends a
digest per bucket of its records, the replica answers with its records in the buckets that
differ, the owner merges them and sends back what the replica lacks. Each node holds
exactly one `RecordStore`; the ring hands over its records (chord.protocol.store.KeyStore) on joins
and leaves: copied, not moved, when R > 1, since the node that gives them stays a replica.
With R = 1 the store is the paper's: entries move with ownership and nothing else does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from chord.protocol.ids import in_open_closed
from cqengine.core.alerts.copies import Copies, numbers
from cqengine.core.alerts.mailboxes import (
    AlertDoc,
    Subscription,
    Subscriptions,
    alerts_taken,
    cost,
    home_record,
    numbered_batch,
    numbered_documents,
    record_alerts,
    runs_of,
    subscription_of,
)
from cqengine.core.basis import limits
from cqengine.core.basis.ages import Ages
from cqengine.core.state import summaries
from cqengine.core.state.journal import Journal
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.summaries import Entries, Homes
from cqengine.core.terms.queries import entry_slot
from cqengine.proto import cqengine_pb2 as pb


def in_range(key: int, lo: int, hi: int) -> bool:
    """key in (lo, hi] clockwise; lo == hi is the whole circle."""
    return lo == hi or in_open_closed(key, lo, hi)


@dataclass(frozen=True)
class Rank:
    """How an entry record compares: by version, a tombstone winning at equal version."""

    version: int
    deleted: bool

    def __lt__(self, other: Rank) -> bool:
        return (self.version, self.deleted) < (other.version, other.deleted)


class RecordStore:
    """A node's records: index entries and their tombstones, the subscriptions homed or
    replicated here with their mailboxes, and the batches held for DNs.

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
        self.journal: Journal | None = None
        # when a tombstone was made and a copy first held: on the `now` clock
        self.tombstones: dict[tuple[int, int], tuple[int, float]] = {}  # (key, slot): version, made
        self.gone: dict[int, tuple[int, float]] = {}  # unsubscribed: sub -> home key, made
        self.held: OrderedDict[int, pb.HeldBatch] = OrderedDict()  # batch name -> its documents
        self.held_since: dict[int, float] = {}  # batch name -> when its first copy was made
        self.held_documents = 0
        self._kept: dict[tuple, tuple[int, object]] = {}  # see summaries
        # subscriptions served here with copies on their way to the replicas (alerts or
        # acknowledgements; cqengine.core.home.home): how many copies each
        self.copying: dict[int, int] = {}
        # copies kept as columns until a mailbox is read (a plain dict tells no departures)
        self.logged = logged
        columns = replicas > 1 and isinstance(subscriptions, Subscriptions) and not logged
        self.copied: Copies | None = Copies(subscriptions) if columns else None

    # ---- entries -----------------------------------------------------------------------

    def rank(self, key: int, sub: int) -> Rank | None:
        tomb = self.tombstones.get((key, sub))
        if tomb is not None:
            return Rank(tomb[0], True)
        e = self.index.entry(key, sub)
        return None if e is None else Rank(e.version, False)

    def put_entry(self, key: int, entry: pb.QueryEntry, made: float | None = None) -> bool:
        """Merge an entry record (a tombstone when `made`: when it was, on my `now` clock);
        whether it changed what is held."""
        sub = entry_slot(entry)  # tombstones carry the slot as their subscription
        new = Rank(entry.version, made is not None)
        old = self.rank(key, sub)
        if old is not None and not old < new:
            return False
        if made is not None:
            if self.index.holds(key, sub):
                self.index.remove(key, lambda e: entry_slot(e) == sub)
            if self.ages.fresh(made):
                self.tombstones[(key, sub)] = (entry.version, made)
                if self.journal is not None:
                    self.journal.tombstoned(key, sub, entry.version, self.ages.stamp(made))
            return True
        if self.tombstones.pop((key, sub), None) is not None and self.journal is not None:
            self.journal.tombstoned(key, sub, None, 0.0)
        self.index.replace(key, entry)
        return True

    def delete_entry(self, key: int, sub: int, version: int) -> bool:
        """Tombstone (key, sub) at this version, now."""
        return self.put_entry(key, pb.QueryEntry(subscription_id=sub, version=version), self.now())

    def entry_records(self, lo: int, hi: int) -> Iterator[pb.EntryRecord]:
        """Every entry record under keys in (lo, hi], tombstones too."""
        for key in self.index.keys_in(lo, hi):
            for e in self.index.get(key):
                yield pb.EntryRecord(key=key, entry=e)
        for (key, sub), (version, made) in self.tombstones.items():
            if in_range(key, lo, hi):
                entry = pb.QueryEntry(subscription_id=sub, version=version)
                yield pb.EntryRecord(key=key, entry=entry, **self.ages.deleted(made))

    # ---- homes -------------------------------------------------------------------------

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
            self._journal_alerted(sub, before)
        return changed

    def _journal_alerted(self, sub: Subscription, before: int) -> None:
        """Tell the journal of the alerts a copy of a mailbox took, numbered from `before`."""
        if self.journal is not None and sub.mailbox.next != before:
            self.journal.alerted(alerts_taken(sub, before))

    def put_alerts(
        self, batch: pb.AlertBatch, serves: Callable[[int], bool]
    ) -> list[tuple[int, int]]:
        """Merge alerts a home numbered (mailboxes.numbered_batch) into the copies of their
        mailboxes (`serves(key)`: this node serves that home key, so its own numbering
        wins). Returns the subscriptions of which this copy lacks alerts before those,
        each with the number it lacks from (0: the record itself): send from there.

        Nearly every alert simply joins on, and is acknowledged before anyone reads this
        copy: those are kept as columns (cqengine.core.alerts.copies), told to the journal a
        document at a time. The others (a gap, an early copy, one held already, a
        subscription served here) are merged the old way."""
        if self.copied is None:
            return self._merged(batch, serves)
        runs, rest = self.copied.take_alerts(batch, serves)
        if runs and self.journal is not None:
            self.journal.alerted_runs(runs)
        return self._merged(numbered_batch(rest), serves) if rest else []

    def _merged(self, batch: pb.AlertBatch, serves: Callable[[int], bool]) -> list[tuple[int, int]]:
        """put_alerts, a mailbox at a time: each alert that joins on is appended where it
        lands in one pass over the batch's columns; a subscription with an alert that
        does not has its alerts of the batch from there on merged in order of number
        (Mailbox.put)."""
        behind: dict[int, int] = {}
        merged: dict[int, list[tuple[int, AlertDoc]]] = {}  # those that do not join on
        runs: list[tuple[AlertDoc, list[int], list[int]]] = []
        get = self.subscriptions.get
        for doc, subs, seqs in numbered_documents(batch):
            size = cost(doc)
            took, numbers = [], []
            for sub_id, seq in zip(subs, seqs):
                if sub_id in merged:
                    merged[sub_id].append((seq, doc))
                    continue
                sub = get(sub_id)
                if sub is None:
                    if sub_id not in self.gone:
                        behind[sub_id] = 0
                    continue
                box = sub.mailbox
                if seq == box.first + len(box.queue) and not box.early:
                    box.join(doc, size)
                    took.append(sub_id)
                    numbers.append(seq)
                else:
                    merged[sub_id] = [(seq, doc)]
            if took:
                runs.append((doc, took, numbers))
        if runs and self.journal is not None:
            self.journal.alerted_runs(runs)
        for sub_id, alerts in merged.items():
            gap = self._merge_alerts(self.subscriptions[sub_id], alerts, serves)
            if gap is not None:
                behind[sub_id] = gap
        return list(behind.items())

    def put_acknowledged(self, acked: pb.Acknowledged) -> list[int]:
        """Acknowledgements a home copied: each subscription's alerts numbered below its
        first are acknowledged. Returns the subscriptions whose records this copy lacks."""
        journal = self.journal
        if self.copied is None:
            rest = zip(acked.subscription_ids, acked.firsts)
        else:
            kept, rest = self.copied.take_acknowledged(acked)
            if journal is not None:
                for sub_id, first in kept:
                    journal.acknowledged(sub_id, first)
        lacks = []
        for sub_id, first in rest:
            sub = self.subscriptions.get(sub_id)
            if sub is None:
                if sub_id not in self.gone:
                    lacks.append(sub_id)
            elif sub.mailbox.acknowledge(first) and journal is not None:
                journal.acknowledged(sub_id, sub.mailbox.first)
        return lacks

    def _merge_alerts(
        self, sub: Subscription, alerts: list[tuple[int, AlertDoc]], serves: Callable[[int], bool]
    ) -> int | None:
        """A copy's alerts of one subscription into its mailbox, run by run in order of
        number; the number it lacks alerts from, if there is a gap before them."""
        box = sub.mailbox
        before = box.next
        alerts.sort(key=lambda a: a[0])
        gap = None
        for start, docs in runs_of(alerts):
            gap = box.put(start, docs, serves(sub.key))
            if gap is not None:
                break
        self._journal_alerted(sub, before)
        return gap

    def unsubscribe(self, sub_id: int, key: int) -> bool:
        return self._unsubscribed(sub_id, key, self.now())

    def _unsubscribed(self, sub_id: int, key: int, made: float) -> bool:
        had = self.subscriptions.pop(sub_id, None) is not None
        fresh = sub_id not in self.gone and self.ages.fresh(made)
        if fresh:
            self.gone[sub_id] = (key, made)
        if (had or fresh) and self.journal is not None:
            self.journal.unsubscribed(sub_id, key, self.ages.stamp(made) if fresh else 0.0)
        return had or fresh

    def homes_in(self, lo: int, hi: int) -> Iterator[tuple[tuple, Subscription | None]]:
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

    # ---- reconciliation (cqengine.core.state.summaries) -------------------------------------

    def summaries(self, lo: int, hi: int) -> tuple[Entries, Homes]:
        """The summaries of my entry and home records in (lo, hi], tombstones too. Which
        entries and subscriptions lie in a range is kept from one round to the next while
        none comes or goes (every few seconds a replica and its owner both summarize it):
        only the mailboxes' numbers are read again."""
        entries = self._derived(("entries", lo, hi), self.index.generation, self._entries_in)
        tombs = [
            (k, s, v, True) for (k, s), (v, _) in self.tombstones.items() if in_range(k, lo, hi)
        ]
        generation = getattr(self.subscriptions, "generation", None)
        chosen, keys, ids = self._derived(("homes", lo, hi), generation, self._homed_in)
        firsts, nexts, blind = numbers(chosen, self.copied)
        n = len(chosen)
        homes = Homes(
            keys,
            ids,
            np.zeros(n, dtype=bool),
            firsts.astype(np.uint64),
            nexts.astype(np.uint64),
            blind,
        )
        gone = [(k, s, True, 0, 0, False) for s, (k, _) in self.gone.items() if in_range(k, lo, hi)]
        return entries.plus(Entries.of(tombs)), homes.plus(Homes.of(gone))

    def _derived(self, what: tuple, generation: int | None, make: Callable):
        """make(lo, hi), kept while `generation` stays (None: never kept)."""
        got = self._kept.get(what)
        if got is not None and generation is not None and got[0] == generation:
            return got[1]
        value = make(*what[1:])
        if generation is not None:
            while len(self._kept) >= limits.KEPT_RANGES:
                del self._kept[next(iter(self._kept))]
            self._kept[what] = (generation, value)
        return value

    def _entries_in(self, lo: int, hi: int) -> Entries:
        return Entries.of([(k, s, v, False) for k, s, v in self.index.versions_in(lo, hi)])

    def _homed_in(self, lo: int, hi: int) -> tuple[list[Subscription], np.ndarray, np.ndarray]:
        subs = [] if self.logged else list(self.subscriptions.values())
        keys = np.fromiter((s.key for s in subs), dtype=np.uint64, count=len(subs))
        at = np.flatnonzero(summaries.in_range(keys, lo, hi) & (keys > 0))
        chosen = [subs[i] for i in at]
        return chosen, keys[at], np.fromiter((s.id for s in chosen), dtype=np.uint64)

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

    def digests(
        self, lo: int, hi: int, summarized: tuple[Entries, Homes] | None = None
    ) -> tuple[list[int], list[int]]:
        """A digest of each bucket of my entry records and of my home records in (lo, hi]
        (of `summarized`, their summaries made before; by default as they are now)."""
        e, h = summarized or self.summaries(lo, hi)
        return summaries.digests(e.hashes(), e.subs), summaries.digests(h.hashes(), h.subs)

    def differing(self, req: pb.ReconcileRequest) -> pb.ReconcileReply:
        """A replica's answer to an owner's digests: the buckets that differ, and the
        summaries of my records in them."""
        e, h = self.summaries(req.lo, req.hi)
        ne, nh = len(req.entries), len(req.homes)
        eb = summaries.differing(summaries.digests(e.hashes(), e.subs, ne), req.entries)
        hb = summaries.differing(summaries.digests(h.hashes(), h.subs, nh), req.homes)
        reply = pb.ReconcileReply(entry_buckets=eb, home_buckets=hb)
        if eb or hb:
            e = e.where(summaries.in_buckets(e.subs, eb, ne))
            h = h.where(summaries.in_buckets(h.subs, hb, nh))
            reply.summaries.CopyFrom(summaries.to_message(e, h))
        return reply

    def plan(
        self,
        req: pb.ReconcileRequest,
        reply: pb.ReconcileReply,
        summarized: tuple[Entries, Homes] | None = None,
        settled: dict[int, tuple[int, int]] | None = None,
    ) -> summaries.Plan:
        """What to send a replica that answered my request so, and what to ask it for
        (from `summarized`, my summaries as the request was made, by default as now; and
        `settled`, what I had on its way to the replicas then: RecordStore.settled)."""
        e, h = summarized or self.summaries(req.lo, req.hi)
        e = e.where(summaries.in_buckets(e.subs, reply.entry_buckets, len(req.entries)))
        h = h.where(summaries.in_buckets(h.subs, reply.home_buckets, len(req.homes)))
        return summaries.plan((e, h), summaries.of_message(reply.summaries), settled)

    def wanted(self, req: pb.ReconcileRequest) -> pb.Records:
        """The records an owner asks me for (a second round)."""
        out = pb.Records()
        for key, sub in zip(req.want_entry_keys, req.want_entry_subs):
            r = self._entry_record(key, sub)
            if r is not None:
                out.entries.append(r)
        out.homes.extend(filter(None, map(self._home_record, req.want_homes)))
        return out

    def repairs(self, plan: summaries.Plan) -> pb.Records:
        """What a replica lacks of my records, as a plan found it."""
        out = pb.Records()
        out.entries.extend(filter(None, (self._entry_record(k, s) for k, s in plan.send_entries)))
        for sub_id, since in plan.send_homes:
            sub = self.subscriptions.get(sub_id)
            if sub is not None and since is not None:
                out.homes.append(home_record(sub, start=since))
            else:
                r = self._home_record(sub_id)
                if r is not None:
                    out.homes.append(r)
        return out

    def _entry_record(self, key: int, sub: int) -> pb.EntryRecord | None:
        tomb = self.tombstones.get((key, sub))
        if tomb is not None:
            entry = pb.QueryEntry(subscription_id=sub, version=tomb[0])
            return pb.EntryRecord(key=key, entry=entry, **self.ages.deleted(tomb[1]))
        e = self.index.entry(key, sub)
        return None if e is None else pb.EntryRecord(key=key, entry=e)

    def _home_record(self, sub_id: int) -> pb.HomeRecord | None:
        sub = self.subscriptions.get(sub_id)
        if sub is not None:
            return home_record(sub) if sub.key else None
        return self.gone_record(sub_id) if sub_id in self.gone else None

    def gone_record(self, sub_id: int) -> pb.HomeRecord:
        """An unsubscribed subscription's tombstone, as sent."""
        key, made = self.gone[sub_id]
        return pb.HomeRecord(key=key, subscription_id=sub_id, **self.ages.deleted(made))

    def merge(self, records: pb.Records, serves: Callable[[int], bool] = lambda key: False) -> int:
        """Merge records from another node; how many changed what I hold. `serves(key)`:
        whether I serve that home key (my numbering of its alerts wins)."""
        changed = 0
        for r in records.entries:
            changed += self.put_entry(r.key, r.entry, self.ages.made(r))
        for r in records.homes:
            changed += self.put_home(r, serves(r.key)) is True
        for batch in records.batches:
            changed += self.hold(batch)
        return changed

    # ---- documents held for DNs --------------------------------------------------------

    def hold(self, batch: pb.HeldBatch) -> bool:
        if batch.batch in self.held:
            return False
        self.held[batch.batch] = batch
        self.held_since[batch.batch] = self.now() - max(batch.age, 0.0)
        self.held_documents += len(batch.documents)
        while self.held_documents > limits.HELD_DOCUMENTS and len(self.held) > 1:
            self.release(next(iter(self.held)))
        return True

    def release(self, batch: int) -> pb.HeldBatch | None:
        held = self.held.pop(batch, None)
        if held is not None:
            self.held_documents -= len(held.documents)
            del self.held_since[batch]
        return held

    def release_stale(self, lo: int, hi: int, live: set[int], before: float) -> int:
        """Let go of the copies under (lo, hi] that its owner no longer counts as
        unfinished (a release that missed me), held since before `before`; how many."""
        stale = [
            name
            for name, b in self.held.items()
            if in_range(b.key, lo, hi) and name not in live and self.held_since[name] < before
        ]
        for name in stale:
            self.release(name)
        return len(stale)

    # ---- collection --------------------------------------------------------------------

    def expire(self) -> None:
        """Collect the tombstones older than TOMBSTONE_TTL."""
        due = self.now() - limits.TOMBSTONE_TTL
        for (key, sub), (_, made) in list(self.tombstones.items()):
            if made < due:
                del self.tombstones[(key, sub)]
                if self.journal is not None:
                    self.journal.tombstoned(key, sub, None, 0.0)
        for sub_id, (key, made) in list(self.gone.items()):
            if made < due:
                del self.gone[sub_id]
                if self.journal is not None:
                    self.journal.unsubscribed(sub_id, key, 0.0)

    def drop_outside(self, ranges: list[tuple[int, int]]) -> int:
        """Drop the records under keys in none of these ranges (no owner counts on me for
        them any more); how many went. It runs every round and mostly finds nothing to
        drop: the keys are tested as arrays, not one by one."""

        def outside(keys: Iterable[int]) -> np.ndarray:
            keys = np.fromiter(keys, dtype=np.uint64)
            kept = np.zeros(len(keys), dtype=bool)
            for lo, hi in ranges:
                kept |= summaries.in_range(keys, lo, hi)
            return ~kept

        gone = 0
        keys = self.index.keys()
        for at in np.flatnonzero(outside(keys)).tolist():
            gone += self.index.remove(keys[at], lambda e: True)
        tombs = list(self.tombstones)
        for at in np.flatnonzero(outside(k for k, _ in tombs)).tolist():
            key, sub = tombs[at]
            del self.tombstones[(key, sub)]
            if self.journal is not None:
                self.journal.tombstoned(key, sub, None, 0.0)
        names = list(self.held)
        for at in np.flatnonzero(outside(self.held[n].key for n in names)).tolist():
            gone += len(self.release(names[at]).documents)
        subs = [] if self.logged else list(self.subscriptions.values())
        keys = [s.key for s in subs]
        for at in np.flatnonzero(outside(keys) & (np.array(keys, dtype=np.uint64) > 0)).tolist():
            sub = subs[at]
            del self.subscriptions[sub.id]
            gone += 1
            if self.journal is not None:
                self.journal.unsubscribed(sub.id, sub.key, 0.0)
        return gone

    # ---- the ring's hand-over (chord.protocol.store.KeyStore) -----------------------------------

    @property
    def copies(self) -> bool:
        return self.replicas > 1

    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        """The records under keys in (lo, hi]: moved (R = 1, entries only), or copied."""
        if self.replicas == 1:
            return self.index.take_range(lo, hi)
        out = []
        for r in self.entry_records(lo, hi):
            out.append((r.key, pb.Records(entries=[r]).SerializeToString()))
        for r in self.home_records(lo, hi):
            out.append((r.key, pb.Records(homes=[r]).SerializeToString()))
        for name, b in self.held.items():
            if in_range(b.key, lo, hi):
                b.age = self.now() - self.held_since[name]
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
