"""Placement's messages, broken as a node with a bug or a hostile one might send them:
an Index request's query entries, and a Gossip of synopses. Each is refused by the node it
is handed to, counted, and changes nothing of its state (support.malformed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.malformed import ENTRY_BREAKS, Breaks, assert_refused_and_unchanged, break_entry, pick

from cqengine.core.basis import limits
from cqengine.proto import cqengine_pb2 as pb

breaks = Breaks()


# -- query entries of an Index request


def index_entry(m: pb.IndexRequest, draw) -> pb.QueryEntry:
    """The request's one entry, or one of a batch's."""
    return pick(draw, m.entries) if m.entries else m.entry


for _how in ENTRY_BREAKS:
    breaks("Index", _how)(
        lambda m, node, draw, how=_how: break_entry(index_entry(m, draw), node, draw, how)
    )


@breaks("Index", "an entry and entries")
def _entry_and_entries(m, node, draw) -> bool:
    if m.entries:
        m.entry.CopyFrom(m.entries[0])
    else:
        m.entries.append(m.entry)
    return True


@breaks("Index", "too many entries")
def _too_many_entries(m, node, draw) -> bool:
    e = m.entries[0] if m.entries else m.entry
    m.ClearField("entry")
    m.entries.extend([e] * (limits.MAX_BATCH_QUERIES + 1 - len(m.entries)))
    return True


# -- gossip


@breaks("Gossip", "another number of registers")
def _(m, node, draw):
    h = draw(st.sampled_from([0, 2, 3, 16]))
    m.hashes = h
    m.values = bytes([1]) * (len(m.term_ids) * h)
    return True


@breaks("Gossip", "registers not one per term")
def _(m, node, draw):
    m.values = m.values[:-1] if draw(st.booleans()) else m.values + b"\x01"
    return True


@breaks("Gossip", "a register out of range")
def _(m, node, draw):
    v = bytearray(m.values)
    v[pick(draw, range(len(v)))] = draw(st.sampled_from([0, node.settings.synopsis_y + 1, 255]))
    m.values = bytes(v)
    return True


@breaks("Gossip", "more terms than a synopsis keeps")
def _(m, node, draw):
    n = node.settings.synopsis_k + 1
    m.term_ids[:] = range(1, n + 1)
    m.values = bytes([1]) * (n * m.hashes)
    return True


@pytest.mark.parametrize("method,how", sorted(breaks), ids=lambda x: x)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_malformed_engine_message_is_refused_and_changes_nothing(captured, method, how, data):
    assert_refused_and_unchanged(captured, breaks[(method, how)], method, data)
