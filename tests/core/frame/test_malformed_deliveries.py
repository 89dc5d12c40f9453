"""Alert batches (Deliver) broken as a DN with a bug or a hostile one might send them to
a home: the documents, the counts and subscriptions, the titles, snippets and sequence
numbers, the home. Each is refused by the node it is handed to, counted, and changes
nothing of its state (support.malformed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.malformed import Breaks, assert_refused_and_unchanged, counts_for_one_or_none, pick

from cqengine.core.basis import limits

breaks = Breaks()


@breaks("Deliver", "no documents")
def _(m, node, draw):
    del m.docnos[:], m.titles[:], m.snippets[:], m.counts[:], m.subscription_ids[:]
    return True


@breaks("Deliver", "too many documents")
def _(m, node, draw):
    extra = limits.MAX_BATCH_DOCS + 1 - len(m.docnos)
    m.docnos.extend(["D"] * extra)
    del m.titles[:], m.snippets[:]
    if not m.counts:
        m.counts.append(len(m.subscription_ids))
    m.counts.extend([0] * extra)
    return True


@breaks("Deliver", "counts that do not sum to the subscriptions")
def _(m, node, draw):
    if not m.counts:
        return False
    if draw(st.booleans()):
        m.counts[pick(draw, range(len(m.counts)))] += 1
    else:
        m.subscription_ids.append(12345)
    return True


@breaks("Deliver", "titles not one per document")
def _(m, node, draw):
    m.titles[:] = [""] * (len(m.docnos) + draw(st.sampled_from([-1, 1])) or 2)
    return True


@breaks("Deliver", "snippets not one per document")
def _(m, node, draw):
    m.snippets[:] = [""] * (len(m.docnos) + 1)
    return True


@breaks("Deliver", "sequence numbers not one per alert")
def _(m, node, draw):
    m.seqs[:] = range(len(m.subscription_ids) + 1)
    return True


@breaks("Deliver", "a docno empty or too long")
def _(m, node, draw):
    at = pick(draw, range(len(m.docnos)))
    m.docnos[at] = draw(st.sampled_from(["", "D" * (limits.MAX_DOCNO + 1)]))
    return True


@breaks("Deliver", "a title or snippet too long")
def _(m, node, draw):
    field = m.titles if draw(st.booleans()) else m.snippets
    field[:] = [""] * len(m.docnos)
    field[pick(draw, range(len(m.docnos)))] = "T" * (node.settings.max_document_bytes + 1)
    return True


@breaks("Deliver", "bad home address")
def _(m, node, draw):
    m.owner, m.home = True, draw(st.sampled_from(["a b", "x" * 256, "\n"]))
    return True


breaks("Deliver", "counts for one document, or none for several")(
    counts_for_one_or_none("subscription_ids")
)


@pytest.mark.parametrize("method,how", sorted(breaks), ids=lambda x: x)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_malformed_engine_message_is_refused_and_changes_nothing(captured, method, how, data):
    assert_refused_and_unchanged(captured, breaks[(method, how)], method, data)
