"""Resolution's messages broken as a node with a bug or a hostile one might send them: a
QN's filter requests (GetBloom) and Term Dialogue rounds, and its report of matches
(Matched, as columns or a Match each). Each is refused by the node it is handed to,
counted, and changes nothing of its state (support.malformed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.malformed import Breaks, assert_refused_and_unchanged, counts_for_one_or_none, pick

from cqengine.core.basis import limits
from cqengine.core.resolution import matches
from cqengine.proto import cqengine_pb2 as pb

breaks = Breaks()


@breaks("GetBloom", "no documents")
def _(m, node, draw):
    del m.doc_keys[:]
    return True


@breaks("GetBloom", "too many documents")
def _(m, node, draw):
    m.doc_keys.extend([5] * (limits.MAX_BATCH_DOCS + 1 - len(m.doc_keys)))
    return True


@breaks("TermDialogue", "no documents")
def _(m, node, draw):
    del m.doc_keys[:], m.counts[:]
    return True


@breaks("TermDialogue", "too many documents")
def _(m, node, draw):
    extra = limits.MAX_BATCH_DOCS + 1 - len(m.doc_keys)
    m.doc_keys.extend([5] * extra)
    m.counts.extend([0] * (extra + (len(m.counts) == 0)))
    return True


@breaks("TermDialogue", "counts that do not sum to the ids")
def _(m, node, draw):
    if not m.counts:
        return False
    m.counts[pick(draw, range(len(m.counts)))] += draw(st.integers(1, 3))
    return True


@breaks("TermDialogue", "counts not one per document")
def _(m, node, draw):
    if not m.counts:
        return False
    if draw(st.booleans()):
        m.counts.append(0)
    else:
        m.counts[0] += m.counts.pop()
    return True


breaks("TermDialogue", "counts for one document, or none for several")(
    counts_for_one_or_none("ids")
)


def one_by_one(m: pb.MatchedRequest) -> None:
    """A report in columns rewritten as a node of protocol 2 sends it: a Match each."""
    runs = list(matches.runs(m))
    for name in ("subscriptions", "counts", "docs", "home_of", "homes", "home_ids"):
        m.ClearField(name)
    for doc, (home, key), subs in runs:
        for sub in subs:
            m.matches.add(subscription_id=sub, home=home, home_id=key, doc=doc)


@breaks("Matched", "a match of no document")
def _(m, node, draw):
    one_by_one(m)
    if not m.matches:
        m.matches.add(subscription_id=1, home="node-1", doc=len(m.doc_keys))
    else:
        pick(draw, m.matches).doc = len(m.doc_keys) + draw(st.integers(0, 3))
    return True


@breaks("Matched", "bad home address")
def _(m, node, draw):
    one_by_one(m)
    if not m.matches:
        return False
    pick(draw, m.matches).home = draw(st.sampled_from(["a b", "x" * 256, "\t"]))
    return True


@breaks("Matched", "columns: a run of no document")
def _(m, node, draw):
    if not m.docs:
        return False
    m.docs[draw(st.integers(0, len(m.docs) - 1))] = len(m.doc_keys) + draw(st.integers(0, 3))
    return True


@breaks("Matched", "columns: a run of no home")
def _(m, node, draw):
    if not m.home_of:
        return False
    m.home_of[draw(st.integers(0, len(m.home_of) - 1))] = len(m.homes) + draw(st.integers(0, 3))
    return True


@breaks("Matched", "columns: runs that do not add up")
def _(m, node, draw):
    if not m.counts:
        return False
    if draw(st.booleans()):
        m.counts[draw(st.integers(0, len(m.counts) - 1))] += draw(st.integers(1, 3))
    else:
        m.home_of.append(0)  # a run without its length
    return True


@breaks("Matched", "columns: bad home address")
def _(m, node, draw):
    if not m.homes:
        return False
    m.homes[draw(st.integers(0, len(m.homes) - 1))] = draw(st.sampled_from(["a b", "x" * 256]))
    return True


@breaks("Matched", "columns: homes without their keys")
def _(m, node, draw):
    if not m.homes:
        return False
    m.home_ids.append(draw(st.integers(1, 2**64 - 1)))
    return True


@breaks("Matched", "columns and matches one by one")
def _(m, node, draw):
    if not m.subscriptions:
        return False
    m.matches.add(subscription_id=m.subscriptions[0], home=m.homes[0], doc=0)
    return True


@breaks("Matched", "a share past the whole")
def _(m, node, draw):
    m.share = draw(st.integers(limits.WHOLE + 1, 2**64 - 1))
    return True


@breaks("Matched", "too many documents")
def _(m, node, draw):
    m.doc_keys.extend([5] * (limits.MAX_BATCH_DOCS + 1 - len(m.doc_keys)))
    return True


@pytest.mark.parametrize("method,how", sorted(breaks), ids=lambda x: x)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_malformed_engine_message_is_refused_and_changes_nothing(captured, method, how, data):
    assert_refused_and_unchanged(captured, breaks[(method, how)], method, data)
