"""The ring's values as its messages carry them: a node (NodeRef <-> NodeInfo) and keys
handed over (key, bytes) <-> KeyItem. Beside both the node and its checks, which read them."""

from __future__ import annotations

from collections.abc import Iterable

from chord.proto import chord_pb2 as pb
from chord.protocol.routing import NodeRef


def to_ref(info: pb.NodeInfo) -> NodeRef:
    return NodeRef(info.id, info.address)


def to_info(ref: NodeRef) -> pb.NodeInfo:
    return pb.NodeInfo(id=ref.id, address=ref.address)


def items_to_pb(items: list[tuple[int, bytes]]) -> list[pb.KeyItem]:
    return [pb.KeyItem(key=k, value=v) for k, v in items]


def items_from_pb(items: Iterable[pb.KeyItem]) -> list[tuple[int, bytes]]:
    return [(i.key, i.value) for i in items]
