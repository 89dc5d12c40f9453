"""The home log's messages broken as a member with a bug or a hostile one might send them:
an append's entries and epochs, and a promise's members. Each is refused by the node it is
handed to, counted, and changes nothing of its state (support.malformed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.malformed import Breaks, assert_refused_and_unchanged, pick

from cqengine.proto import cqengine_pb2 as pb

breaks = Breaks()


@breaks("LogAppend", "an entry of a kind no member knows")
def _unknown_kind(m, node, draw) -> bool:
    if not m.entries:
        return False
    pick(draw, m.entries).kind = max(pb.LogKind.values()) + 1
    return True


@breaks("LogAppend", "an epoch whose member is no address")
def _epoch_member(m, node, draw) -> bool:
    epochs = [e for e in m.entries if e.kind == pb.LOG_EPOCH]
    if not epochs:
        return False
    pick(draw, epochs).members.append(draw(st.sampled_from(["", "a b", "x" * 300])))
    return True


@breaks("LogPromise", "a member that is no address")
def _promise_member(m, node, draw) -> bool:
    m.members.append(draw(st.sampled_from(["", "a b", "x" * 300])))
    return True


@pytest.mark.parametrize("method,how", sorted(breaks), ids=lambda x: x)
@hsettings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_malformed_engine_message_is_refused_and_changes_nothing(captured, method, how, data):
    assert_refused_and_unchanged(captured, breaks[(method, how)], method, data)
