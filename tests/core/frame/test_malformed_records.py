"""Replication's messages, broken as a node with a bug or a hostile one might send them:
the records of a Replicate or a Repair (entries, tombstones, homes, held batches,
acknowledgements) and the rounds of a Reconcile; each is refused by the node it is handed
to, counted, and changes nothing of its state (support.malformed). A reply to a Reconcile
is checked as a request is."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.busy_rings import replicated_ring
from support.malformed import ENTRY_BREAKS, Breaks, assert_refused_and_unchanged, break_entry, pick

from cqengine.core.basis import limits
from cqengine.core.basis.limits import SEEN_KEPT
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

breaks = Breaks()


# -- records (Replicate, Repair)


def entry_record(m: pb.Records, draw, tombstone: bool):
    return pick(draw, [r for r in m.entries if (r.deleted > 0) == tombstone])


for _how in ENTRY_BREAKS:

    def _break(m, node, draw, how=_how):
        r = entry_record(m, draw, False)
        return r is not None and break_entry(r.entry, node, draw, how)

    for _method in ("Replicate", "Repair"):
        breaks(_method, f"entry record: {_how}")(_break)


def _record_breaks(method: str) -> None:
    @breaks(method, "entry record under another key")
    def _(m, node, draw):
        r = entry_record(m, draw, False)
        if r is None:
            return False
        r.key ^= 1
        return True

    @breaks(method, "tombstone carrying an entry")
    def _(m, node, draw):
        r = entry_record(m, draw, True)
        if r is None:
            return False
        r.entry.terms.append("x")
        r.entry.term_ids.append(term_id("x"))
        return True

    @breaks(method, "tombstone of no time")
    def _(m, node, draw):
        r = entry_record(m, draw, True)
        if r is None:
            return False
        r.deleted = draw(st.sampled_from([math.inf, -math.inf, math.nan, -1.0]))
        return True

    @breaks(method, "tombstone of no age")
    def _(m, node, draw):
        r = entry_record(m, draw, True)
        if r is None:
            return False
        r.age = draw(st.sampled_from([math.inf, math.nan, -1.0]))
        return True

    def home(m, draw, whole: bool | None = None, alerts: bool = False):
        return pick(
            draw,
            [
                h
                for h in m.homes
                if not h.deleted
                and (whole is None or bool(h.token_hash) == whole)
                and (not alerts or h.docnos)
            ],
        )

    home_break = breaks.part(method, "home record", home)

    @home_break("a token hash of a wrong size")
    def _(h, node, draw):
        h.token_hash = b"\x01" * draw(st.sampled_from([1, 31, 33, 64]))

    @home_break("too many terms", whole=True)
    def _(h, node, draw):
        h.terms.extend(f"t{i}" for i in range(limits.MAX_QUERY_TERMS))

    @home_break("a term too long")
    def _(h, node, draw):
        h.terms.append("x" * (limits.MAX_TERM_BYTES + 1))

    @home_break("indexed under none of its terms", whole=True)
    def _(h, node, draw):
        if draw(st.booleans()):
            h.index_term += "x"
        else:
            h.index_id ^= 1

    @home_break("alerts before the first kept")
    def _(h, node, draw):
        h.first = h.start + draw(st.integers(1, 5))

    @home_break("too many seen")
    def _(h, node, draw):
        h.seen.extend(f"D{i}" for i in range(SEEN_KEPT + 1))

    @home_break("a seen docno too long")
    def _(h, node, draw):
        h.seen.append("D" * (limits.MAX_DOCNO + 1))

    @home_break("titles not one per alert", alerts=True)
    def _(h, node, draw):
        h.titles[:] = [""] * (len(h.docnos) + draw(st.integers(1, 2)))

    @home_break("snippets not one per alert", alerts=True)
    def _(h, node, draw):
        h.snippets.extend([""] * (len(h.docnos) + 1 - len(h.snippets)))

    @home_break("an empty docno", alerts=True)
    def _(h, node, draw):
        h.docnos[draw(st.integers(0, len(h.docnos) - 1))] = ""

    @home_break("a title too long", alerts=True)
    def _(h, node, draw):
        h.titles[:] = [""] * len(h.docnos)
        h.titles[-1] = "T" * (node.settings.max_document_bytes + 1)

    @home_break("deleted at no time")
    def _(h, node, draw):
        h.deleted = draw(st.sampled_from([math.inf, math.nan, -5.0]))

    @home_break("unsubscribed no time ago")
    def _(h, node, draw):
        h.deleted, h.age = 1.0, draw(st.sampled_from([math.inf, math.nan, -5.0]))

    if method != "Replicate":
        return  # a Repair carries no held batch, nor acknowledgements

    @breaks(method, "acknowledgements: numbers not one per subscription")
    def _(m, node, draw):
        acked = m.acknowledged
        if not acked.subscription_ids:
            return False
        if draw(st.booleans()):
            acked.firsts.append(1)
        else:
            del acked.firsts[-1]
        return True

    def batch(m, draw):
        return pick(draw, list(m.batches))

    batch_break = breaks.part(method, "held batch", batch)

    @batch_break("bad DN address")
    def _(b, node, draw):
        b.dn = draw(st.sampled_from(["", "a b", "x" * 256]))

    @batch_break("no documents")
    def _(b, node, draw):
        del b.documents[:]

    @batch_break("too many documents")
    def _(b, node, draw):
        d = b.documents[0]
        b.documents.extend([d] * limits.MAX_BATCH_DOCS)

    @batch_break("an age of no time")
    def _(b, node, draw):
        b.age = draw(st.sampled_from([math.inf, math.nan]))

    @batch_break("a document without ids")
    def _(b, node, draw):
        del pick(draw, b.documents).ids[:]

    @batch_break("a docno too long")
    def _(b, node, draw):
        pick(draw, b.documents).docno = "D" * (limits.MAX_DOCNO + 1)

    @batch_break("a title too long")
    def _(b, node, draw):
        d = pick(draw, b.documents)
        text = "T" * (node.settings.max_document_bytes + 1)
        if draw(st.booleans()):
            d.title = text
        else:
            d.snippet = text


_record_breaks("Replicate")
_record_breaks("Repair")


# -- reconciliation


@breaks("Reconcile", "digests not one per bucket")
def _(m, node, draw):
    if m.want_homes or m.want_entry_keys:
        return False  # a second round has no digests
    field = m.entries if draw(st.booleans()) else m.homes
    if draw(st.booleans()):
        field.append(0)
    else:
        del field[-1]
    return True


@breaks("Reconcile", "entries asked for without their keys")
def _(m, node, draw):
    if not m.want_entry_keys:
        return False
    del m.want_entry_keys[-1]
    return True


@breaks("Reconcile", "more records asked for than a reply may carry")
def _(m, node, draw):
    if not (m.want_homes or m.want_entry_keys):
        return False
    m.want_homes.extend(range(1, limits.MAX_BATCH_QUERIES + 2))
    return True


@pytest.mark.parametrize("method,how", sorted(breaks), ids=lambda x: x)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_malformed_engine_message_is_refused_and_changes_nothing(captured, method, how, data):
    assert_refused_and_unchanged(captured, breaks[(method, how)], method, data)


@pytest.mark.parametrize("lie", ["a record", "summaries"])
def test_a_malformed_reconcile_reply_is_refused_and_changes_nothing(lie):
    """An owner reconciling merges the records its replicas send back and plans from their
    summaries: a replica that answers with a malformed record (an entry whose ids are not
    its terms', as one of an earlier version sends its records) or with summaries whose
    columns do not line up is refused, counted and marked out of sync, and the owner's
    state is as it was."""
    wl, s, sim, _ = replicated_ring("mhi", "td", 3)
    owner = sim.engines[sorted(sim.engines)[0]]
    replica = sim.engines[owner.ctx.replica_set()[0].address]
    genuine = replica.store.reconciliation.differing

    def lying(req):
        ones = dict(entries=[1] * len(req.entries), homes=[1] * len(req.homes))
        reply = genuine(pb.ReconcileRequest(lo=req.lo, hi=req.hi, **ones))  # all differ
        if lie == "summaries":
            del reply.summaries.home_nexts[-1]
            return reply
        bad = next(r for r in replica.store.entries.entry_records(req.lo, req.hi) if r.deleted == 0)
        bad.entry.term_ids[0] ^= 1
        reply.records.entries.append(bad)
        return reply

    replica.store.reconciliation.differing = lying
    before, count = owner.statistics.state_digest(), owner.counters["messages_refused"]
    lo, hi = owner.ctx.region()
    sim.ring.run(sim.ring.nodes[owner.me.address], owner.replication._reconcile(lo, hi))
    assert owner.counters["messages_refused"] == count + 1
    assert (
        owner.replication.in_sync[replica.me] is False
    )  # (which the full state_digest above sees)
    assert owner.statistics.state_digest() == before  # what it holds
