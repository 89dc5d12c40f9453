from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeInfo(_message.Message):
    __slots__ = ("id", "address")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeyItem(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: int
    value: bytes
    def __init__(self, key: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class FindSuccessorRequest(_message.Message):
    __slots__ = ("key", "avoid")
    KEY_FIELD_NUMBER: _ClassVar[int]
    AVOID_FIELD_NUMBER: _ClassVar[int]
    key: int
    avoid: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, key: _Optional[int] = ..., avoid: _Optional[_Iterable[int]] = ...) -> None: ...

class FindSuccessorReply(_message.Message):
    __slots__ = ("done", "node")
    DONE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    done: bool
    node: NodeInfo
    def __init__(self, done: _Optional[bool] = ..., node: _Optional[_Union[NodeInfo, _Mapping]] = ...) -> None: ...

class NeighborsReply(_message.Message):
    __slots__ = ("predecessor", "successors", "floor", "floor_hops")
    PREDECESSOR_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    FLOOR_HOPS_FIELD_NUMBER: _ClassVar[int]
    predecessor: NodeInfo
    successors: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    floor: int
    floor_hops: int
    def __init__(self, predecessor: _Optional[_Union[NodeInfo, _Mapping]] = ..., successors: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., floor: _Optional[int] = ..., floor_hops: _Optional[int] = ...) -> None: ...

class NotifyRequest(_message.Message):
    __slots__ = ("node", "settled")
    NODE_FIELD_NUMBER: _ClassVar[int]
    SETTLED_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    settled: bool
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., settled: _Optional[bool] = ...) -> None: ...

class NotifyReply(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[KeyItem]
    def __init__(self, items: _Optional[_Iterable[_Union[KeyItem, _Mapping]]] = ...) -> None: ...

class LeaveRequest(_message.Message):
    __slots__ = ("leaving", "predecessor", "successors", "items")
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    PREDECESSOR_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    leaving: NodeInfo
    predecessor: NodeInfo
    successors: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    items: _containers.RepeatedCompositeFieldContainer[KeyItem]
    def __init__(self, leaving: _Optional[_Union[NodeInfo, _Mapping]] = ..., predecessor: _Optional[_Union[NodeInfo, _Mapping]] = ..., successors: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., items: _Optional[_Iterable[_Union[KeyItem, _Mapping]]] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: int
    def __init__(self, key: _Optional[int] = ...) -> None: ...

class LookupReply(_message.Message):
    __slots__ = ("owner", "hops")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    owner: NodeInfo
    hops: int
    def __init__(self, owner: _Optional[_Union[NodeInfo, _Mapping]] = ..., hops: _Optional[int] = ...) -> None: ...

class LedgerEntry(_message.Message):
    __slots__ = ("kind", "messages", "bytes")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    kind: str
    messages: int
    bytes: int
    def __init__(self, kind: _Optional[str] = ..., messages: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class StateReply(_message.Message):
    __slots__ = ("node", "predecessor", "successors", "fingers", "keys", "ledger")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PREDECESSOR_FIELD_NUMBER: _ClassVar[int]
    SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    FINGERS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    predecessor: NodeInfo
    successors: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    fingers: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    keys: int
    ledger: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., predecessor: _Optional[_Union[NodeInfo, _Mapping]] = ..., successors: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., fingers: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., keys: _Optional[int] = ..., ledger: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ("id", "method", "body", "code", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: int
    method: str
    body: bytes
    code: str
    error: str
    def __init__(self, id: _Optional[int] = ..., method: _Optional[str] = ..., body: _Optional[bytes] = ..., code: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...
