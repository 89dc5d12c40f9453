"""Reconciliation between two record stores, as Replication.reconcile runs it between nodes
(every message through its bytes, as on the wire)."""

from __future__ import annotations

from cqengine.core.records import RecordStore
from cqengine.proto import cqengine_pb2 as pb


def wire(message):
    return type(message).FromString(message.SerializeToString())


def reconcile(owner: RecordStore, replica: RecordStore, lo: int = 0, hi: int = 0) -> pb.Records:
    """The owner's digests, the replica's summaries where they differ, the records the
    owner lacks asked for, and what the replica lacks sent back: that repair."""
    entries, homes = owner.digests(lo, hi)
    request = pb.ReconcileRequest(lo=lo, hi=hi, entries=entries, homes=homes)
    reply = wire(replica.differing(wire(request)))
    plan = owner.plan(request, reply)
    if plan.want_entries or plan.want_homes:
        ask = pb.ReconcileRequest(lo=lo, hi=hi, want_homes=plan.want_homes)
        for key, sub in plan.want_entries:
            ask.want_entry_keys.append(key)
            ask.want_entry_subs.append(sub)
        owner.merge(wire(replica.wanted(wire(ask))), lambda key: True)
        plan = owner.plan(request, reply)
    repair = wire(owner.repairs(plan))
    replica.merge(repair)
    return repair
