"""Reconciliation between two record stores, as Replication.reconcile runs it between nodes
(every message through its bytes, as on the wire)."""

from __future__ import annotations

from cqengine.core.state.records import RecordStore
from cqengine.proto import cqengine_pb2 as pb


def wire(message):
    return type(message).FromString(message.SerializeToString())


def reconcile(owner: RecordStore, replica: RecordStore, lo: int = 0, hi: int = 0) -> pb.Records:
    """The owner's digests, the replica's summaries where they differ, the records the
    owner lacks asked for, and what the replica lacks sent back: that repair."""
    return finish(owner, replica, *ask(owner, replica, lo, hi))


def ask(owner: RecordStore, replica: RecordStore, lo: int = 0, hi: int = 0) -> tuple:
    """The first round: the owner's request (with the summaries it was made of), and the
    replica's reply."""
    summarized = (*owner.reconciliation.summaries(lo, hi), owner.homes.settled())
    entries, homes = owner.reconciliation.digests(lo, hi, summarized[:2])
    request = pb.ReconcileRequest(lo=lo, hi=hi, entries=entries, homes=homes)
    return request, summarized, wire(replica.reconciliation.differing(wire(request)))


def finish(owner: RecordStore, replica: RecordStore, request, summarized, reply) -> pb.Records:
    """The owner's plan from the reply, the second round, and the repair sent."""
    lo, hi = request.lo, request.hi
    plan = owner.reconciliation.plan(request, reply, summarized[:2], summarized[2])
    if plan.want_entries or plan.want_homes:
        more = pb.ReconcileRequest(lo=lo, hi=hi, want_homes=plan.want_homes)
        for key, sub in plan.want_entries:
            more.want_entry_keys.append(key)
            more.want_entry_subs.append(sub)
        owner.merge(wire(replica.reconciliation.wanted(wire(more))), lambda key: True)
        plan = plan.with_wanted(owner.reconciliation.plan(request, reply))
    repair = wire(owner.reconciliation.repairs(plan))
    replica.merge(repair)
    return repair
