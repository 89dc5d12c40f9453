"""Announcements broken as a node with a bug or a hostile one might send them: the
documents, the DN, the hops and share, and the runs of ids with their piggybacked ids. Each
is refused by the node it is handed to, counted, and changes nothing of its state
(support.malformed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.malformed import Breaks, assert_refused_and_unchanged, pick

from cqengine.core.basis import limits

breaks = Breaks()


@breaks("Announce", "largest ids not one per document")
def _(m, node, draw):
    if draw(st.booleans()):
        m.max_ids.append(1)
    else:
        del m.max_ids[-1]
    return True


@breaks("Announce", "no documents")
def _(m, node, draw):
    del m.doc_keys[:], m.max_ids[:], m.runs[:]
    return True


@breaks("Announce", "too many documents")
def _(m, node, draw):
    extra = limits.MAX_BATCH_DOCS + 1 - len(m.doc_keys)
    m.doc_keys.extend([7] * extra)
    m.max_ids.extend([7] * extra)
    return True


@breaks("Announce", "bad DN address")
def _(m, node, draw):
    m.dn = draw(st.sampled_from(["", "x y", "\u00e9t\u00e9:1", "x" * 256]))
    return True


@breaks("Announce", "hops out of range")
def _(m, node, draw):
    m.hops = draw(st.sampled_from([0, limits.HOP_LIMIT + 1, 2**32 - 1]))
    return True


@breaks("Announce", "a share past the whole")
def _(m, node, draw):
    m.share = draw(st.integers(limits.WHOLE + 1, 2**64 - 1))
    return True


@breaks("Announce", "a run of no document")
def _(m, node, draw):
    pick(draw, m.runs).doc = len(m.doc_keys) + draw(st.integers(0, 3))
    return True


@breaks("Announce", "a run of no ids")
def _(m, node, draw):
    del pick(draw, m.runs).ids[:]
    return True


@breaks("Announce", "run ids out of ring order")
def _(m, node, draw):
    r = pick(draw, m.runs)
    ids = list(r.ids)
    if draw(st.booleans()) or len(set(ids)) < 2:
        r.ids.append(ids[0])  # back where it began: past its first id
    else:
        r.ids[:] = ids[::-1]
        if len(ids) == 2:  # reversed, two ids wrap once: make them three
            r.ids.append(ids[0])
    return True


@breaks("Announce", "a run past its document's largest id")
def _(m, node, draw):
    r = pick(draw, m.runs)
    top = max(*r.ids, r.prev, r.next, *r.succ)
    if top == 0:
        return False
    m.max_ids[r.doc] = top - 1
    return True


@breaks("Announce", "too many piggybacked ids")
def _(m, node, draw):
    r = pick(draw, m.runs)
    del r.succ[:]
    r.succ.extend(range(1, node.settings.piggyback + 2))
    m.max_ids[r.doc] = max(m.max_ids[r.doc], node.settings.piggyback + 1)
    return True


@breaks("Announce", "piggybacked ids not increasing")
def _(m, node, draw):
    r = pick(draw, m.runs)
    del r.succ[:]
    r.succ.extend([2, 2] if draw(st.booleans()) else [3, 1])
    m.max_ids[r.doc] = max(m.max_ids[r.doc], 3)
    return True


@pytest.mark.parametrize("method,how", sorted(breaks), ids=lambda x: x)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_malformed_engine_message_is_refused_and_changes_nothing(captured, method, how, data):
    assert_refused_and_unchanged(captured, breaks[(method, how)], method, data)
