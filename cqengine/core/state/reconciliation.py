"""A node's side of reconciling its entry and home records with another copy of a range.

The owner of a range reconciles it with each replica (cqengine.core.home.replication): it
sends a digest per bucket of its records' summaries (cqengine.core.state.summaries), the
replica answers with its summaries in the buckets that differ, and the owner plans from
the two what to send back and what to ask for. Here are both sides' steps over a node's
records (cqengine.core.state.records): the summaries, the digests, the answer, the plan,
and the records a plan or a request names.

Every few seconds a replica and its owner both summarize a range: which entries and
subscriptions lie in it is kept from one round to the next while none comes or goes, and
only the mailboxes' numbers are read again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import numpy as np

from cqengine.core.alerts.copies import numbers
from cqengine.core.alerts.mailboxes import home_record
from cqengine.core.basis import limits
from cqengine.core.state import summaries
from cqengine.core.state.entry_records import EntryRecords
from cqengine.core.state.home_records import HomeRecords
from cqengine.core.state.replica_intake import ReplicaIntake
from cqengine.core.state.summaries import Entries, Homes, Plan
from cqengine.proto import cqengine_pb2 as pb

T = TypeVar("T")
Kept = tuple[str, int, int]  # what is kept of a range: ("entries" or "homes", lo, hi)


class Reconciliation:
    """Reconciliation over a node's entry records, its home records, and the copies of
    mailboxes its intake keeps as columns (counted in the summaries, not folded)."""

    def __init__(self, entries: EntryRecords, homes: HomeRecords, intake: ReplicaIntake) -> None:
        self.entries = entries
        self.homes = homes
        self.intake = intake
        self._kept: dict[Kept, tuple[int, object]] = {}  # what -> (generation, value)

    def summaries(self, lo: int, hi: int) -> tuple[Entries, Homes]:
        """The summaries of my entry and home records in (lo, hi], tombstones too."""
        return self._entry_summaries(lo, hi), self._home_summaries(lo, hi)

    def _entry_summaries(self, lo: int, hi: int) -> Entries:
        generation = self.entries.index.generation
        indexed = self._derived(("entries", lo, hi), generation, self.entries.indexed_in)
        return indexed.plus(self.entries.tombstones_in(lo, hi))

    def _home_summaries(self, lo: int, hi: int) -> Homes:
        generation = getattr(self.homes.subscriptions, "generation", None)
        chosen, keys, ids = self._derived(("homes", lo, hi), generation, self.homes.homed_in)
        firsts, nexts, blind = numbers(chosen, self.intake.copied)
        homes = Homes(
            keys,
            ids,
            np.zeros(len(chosen), dtype=bool),
            firsts.astype(np.uint64),
            nexts.astype(np.uint64),
            blind,
        )
        return homes.plus(self.homes.gone_in(lo, hi))

    def _derived(self, what: Kept, generation: int | None, make: Callable[[int, int], T]) -> T:
        """make(lo, hi), kept while `generation` stays (None: never kept)."""
        got = self._kept.get(what)
        if got is not None and generation is not None and got[0] == generation:
            return cast(T, got[1])
        value = make(what[1], what[2])
        if generation is not None:
            while len(self._kept) >= limits.KEPT_RANGES:
                del self._kept[next(iter(self._kept))]
            self._kept[what] = (generation, value)
        return value

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
    ) -> Plan:
        """What to send a replica that answered my request so, and what to ask it for
        (from `summarized`, my summaries as the request was made, by default as now; and
        `settled`, what I had on its way to the replicas then: HomeRecords.settled)."""
        e, h = summarized or self.summaries(req.lo, req.hi)
        e = e.where(summaries.in_buckets(e.subs, reply.entry_buckets, len(req.entries)))
        h = h.where(summaries.in_buckets(h.subs, reply.home_buckets, len(req.homes)))
        return summaries.plan((e, h), summaries.of_message(reply.summaries), settled)

    def wanted(self, req: pb.ReconcileRequest) -> pb.Records:
        """The records an owner asks me for (a second round)."""
        out = pb.Records()
        for key, sub in zip(req.want_entry_keys, req.want_entry_subs):
            r = self.entries.entry_record(key, sub)
            if r is not None:
                out.entries.append(r)
        out.homes.extend(filter(None, map(self.homes.home_record, req.want_homes)))
        return out

    def repairs(self, plan: Plan) -> pb.Records:
        """What a replica lacks of my records, as a plan found it."""
        out = pb.Records()
        sent = (self.entries.entry_record(k, s) for k, s in plan.send_entries)
        out.entries.extend(filter(None, sent))
        for sub_id, since in plan.send_homes:
            sub = self.homes.subscriptions.get(sub_id)
            if sub is not None and since is not None:
                out.homes.append(home_record(sub, start=since))
            else:
                r = self.homes.home_record(sub_id)
                if r is not None:
                    out.homes.append(r)
        return out
