from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOG_EPOCH: _ClassVar[LogKind]
    LOG_DELIVER: _ClassVar[LogKind]
    LOG_ACKS: _ClassVar[LogKind]
    LOG_SUBSCRIBE: _ClassVar[LogKind]
    LOG_UNSUBSCRIBE: _ClassVar[LogKind]
    LOG_ROWS: _ClassVar[LogKind]
LOG_EPOCH: LogKind
LOG_DELIVER: LogKind
LOG_ACKS: LogKind
LOG_SUBSCRIBE: LogKind
LOG_UNSUBSCRIBE: LogKind
LOG_ROWS: LogKind

class SubscribeRequest(_message.Message):
    __slots__ = ("query",)
    QUERY_FIELD_NUMBER: _ClassVar[int]
    query: str
    def __init__(self, query: _Optional[str] = ...) -> None: ...

class SubscribeReply(_message.Message):
    __slots__ = ("subscription_id", "token", "terms", "index_term", "home", "home_id", "contacts", "code", "error", "query", "alternatives", "dropped")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    INDEX_TERM_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    HOME_ID_FIELD_NUMBER: _ClassVar[int]
    CONTACTS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    token: str
    terms: _containers.RepeatedScalarFieldContainer[str]
    index_term: str
    home: str
    home_id: int
    contacts: _containers.RepeatedScalarFieldContainer[str]
    code: str
    error: str
    query: str
    alternatives: _containers.RepeatedCompositeFieldContainer[QueryAlternative]
    dropped: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, subscription_id: _Optional[int] = ..., token: _Optional[str] = ..., terms: _Optional[_Iterable[str]] = ..., index_term: _Optional[str] = ..., home: _Optional[str] = ..., home_id: _Optional[int] = ..., contacts: _Optional[_Iterable[str]] = ..., code: _Optional[str] = ..., error: _Optional[str] = ..., query: _Optional[str] = ..., alternatives: _Optional[_Iterable[_Union[QueryAlternative, _Mapping]]] = ..., dropped: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryAlternative(_message.Message):
    __slots__ = ("query", "index_term")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    INDEX_TERM_FIELD_NUMBER: _ClassVar[int]
    query: str
    index_term: str
    def __init__(self, query: _Optional[str] = ..., index_term: _Optional[str] = ...) -> None: ...

class SubscribeBatchRequest(_message.Message):
    __slots__ = ("queries",)
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    queries: _containers.RepeatedCompositeFieldContainer[SubscribeRequest]
    def __init__(self, queries: _Optional[_Iterable[_Union[SubscribeRequest, _Mapping]]] = ...) -> None: ...

class SubscribeBatchReply(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubscribeReply]
    def __init__(self, results: _Optional[_Iterable[_Union[SubscribeReply, _Mapping]]] = ...) -> None: ...

class UnsubscribeRequest(_message.Message):
    __slots__ = ("subscription_id", "token")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    token: str
    def __init__(self, subscription_id: _Optional[int] = ..., token: _Optional[str] = ...) -> None: ...

class UnsubscribeReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("docno", "text", "title")
    DOCNO_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    docno: str
    text: bytes
    title: str
    def __init__(self, docno: _Optional[str] = ..., text: _Optional[bytes] = ..., title: _Optional[str] = ...) -> None: ...

class PublishReply(_message.Message):
    __slots__ = ("accepted", "terms", "doc_key", "code", "error")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    DOC_KEY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    terms: int
    doc_key: int
    code: str
    error: str
    def __init__(self, accepted: _Optional[bool] = ..., terms: _Optional[int] = ..., doc_key: _Optional[int] = ..., code: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class PublishBatchRequest(_message.Message):
    __slots__ = ("documents",)
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[PublishRequest]
    def __init__(self, documents: _Optional[_Iterable[_Union[PublishRequest, _Mapping]]] = ...) -> None: ...

class PublishBatchReply(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[PublishReply]
    def __init__(self, results: _Optional[_Iterable[_Union[PublishReply, _Mapping]]] = ...) -> None: ...

class StreamRequest(_message.Message):
    __slots__ = ("subscription_id", "token", "subscriptions", "next", "home_id", "watermark")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    HOME_ID_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    token: str
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionKey]
    next: int
    home_id: int
    watermark: bool
    def __init__(self, subscription_id: _Optional[int] = ..., token: _Optional[str] = ..., subscriptions: _Optional[_Iterable[_Union[SubscriptionKey, _Mapping]]] = ..., next: _Optional[int] = ..., home_id: _Optional[int] = ..., watermark: _Optional[bool] = ...) -> None: ...

class SubscriptionKey(_message.Message):
    __slots__ = ("subscription_id", "token", "next")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    token: str
    next: int
    def __init__(self, subscription_id: _Optional[int] = ..., token: _Optional[str] = ..., next: _Optional[int] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("subscriptions", "home_id", "stream", "through")
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    HOME_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    THROUGH_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionKey]
    home_id: int
    stream: bytes
    through: int
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[SubscriptionKey, _Mapping]]] = ..., home_id: _Optional[int] = ..., stream: _Optional[bytes] = ..., through: _Optional[int] = ...) -> None: ...

class AckReply(_message.Message):
    __slots__ = ("unknown",)
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    unknown: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, unknown: _Optional[_Iterable[int]] = ...) -> None: ...

class Alert(_message.Message):
    __slots__ = ("subscription_id", "docno", "title", "snippet", "seq")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    DOCNO_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    docno: str
    title: str
    snippet: str
    seq: int
    def __init__(self, subscription_id: _Optional[int] = ..., docno: _Optional[str] = ..., title: _Optional[str] = ..., snippet: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("no_digests",)
    NO_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    no_digests: bool
    def __init__(self, no_digests: _Optional[bool] = ...) -> None: ...

class Count(_message.Message):
    __slots__ = ("kind", "messages", "bytes")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    kind: str
    messages: int
    bytes: int
    def __init__(self, kind: _Optional[str] = ..., messages: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class StatsReply(_message.Message):
    __slots__ = ("node", "node_id", "ledger", "index_entries", "subscriptions", "documents_published", "candidates", "matches", "alerts_delivered", "alerts_dropped", "config", "synopsis_size", "synopsis_digest", "reindexed", "dropped_by", "alerts_retried", "primary_entries", "replica_entries", "repairs", "copies", "replica_homes", "held_documents", "alerts_waiting", "messages_refused", "state_digest", "batches_in_flight", "background", "cpu_seconds", "alerts_repeated", "alert_latency", "calls_refused", "held_batches", "header_bytes", "announcements_filtered", "filter_waits", "alerts_held", "logs_led", "logs_in_minority", "log_entries", "documents_sent_again", "documents_unkept", "storage_full", "software", "protocol", "oldest_protocol", "ring_floor")
    class DroppedByEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class CpuSecondsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CallsRefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    INDEX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    ALERTS_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    ALERTS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SYNOPSIS_SIZE_FIELD_NUMBER: _ClassVar[int]
    SYNOPSIS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    REINDEXED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_BY_FIELD_NUMBER: _ClassVar[int]
    ALERTS_RETRIED_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    REPAIRS_FIELD_NUMBER: _ClassVar[int]
    COPIES_FIELD_NUMBER: _ClassVar[int]
    REPLICA_HOMES_FIELD_NUMBER: _ClassVar[int]
    HELD_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    ALERTS_WAITING_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_REFUSED_FIELD_NUMBER: _ClassVar[int]
    STATE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    BATCHES_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ALERTS_REPEATED_FIELD_NUMBER: _ClassVar[int]
    ALERT_LATENCY_FIELD_NUMBER: _ClassVar[int]
    CALLS_REFUSED_FIELD_NUMBER: _ClassVar[int]
    HELD_BATCHES_FIELD_NUMBER: _ClassVar[int]
    HEADER_BYTES_FIELD_NUMBER: _ClassVar[int]
    ANNOUNCEMENTS_FILTERED_FIELD_NUMBER: _ClassVar[int]
    FILTER_WAITS_FIELD_NUMBER: _ClassVar[int]
    ALERTS_HELD_FIELD_NUMBER: _ClassVar[int]
    LOGS_LED_FIELD_NUMBER: _ClassVar[int]
    LOGS_IN_MINORITY_FIELD_NUMBER: _ClassVar[int]
    LOG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_SENT_AGAIN_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_UNKEPT_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FULL_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    RING_FLOOR_FIELD_NUMBER: _ClassVar[int]
    node: str
    node_id: int
    ledger: _containers.RepeatedCompositeFieldContainer[Count]
    index_entries: int
    subscriptions: int
    documents_published: int
    candidates: int
    matches: int
    alerts_delivered: int
    alerts_dropped: int
    config: EngineConfig
    synopsis_size: int
    synopsis_digest: int
    reindexed: int
    dropped_by: _containers.ScalarMap[str, int]
    alerts_retried: int
    primary_entries: int
    replica_entries: int
    repairs: int
    copies: int
    replica_homes: int
    held_documents: int
    alerts_waiting: int
    messages_refused: int
    state_digest: int
    batches_in_flight: int
    background: int
    cpu_seconds: _containers.ScalarMap[str, float]
    alerts_repeated: int
    alert_latency: Histogram
    calls_refused: _containers.ScalarMap[str, int]
    held_batches: int
    header_bytes: int
    announcements_filtered: int
    filter_waits: int
    alerts_held: int
    logs_led: int
    logs_in_minority: int
    log_entries: int
    documents_sent_again: int
    documents_unkept: int
    storage_full: str
    software: str
    protocol: int
    oldest_protocol: int
    ring_floor: int
    def __init__(self, node: _Optional[str] = ..., node_id: _Optional[int] = ..., ledger: _Optional[_Iterable[_Union[Count, _Mapping]]] = ..., index_entries: _Optional[int] = ..., subscriptions: _Optional[int] = ..., documents_published: _Optional[int] = ..., candidates: _Optional[int] = ..., matches: _Optional[int] = ..., alerts_delivered: _Optional[int] = ..., alerts_dropped: _Optional[int] = ..., config: _Optional[_Union[EngineConfig, _Mapping]] = ..., synopsis_size: _Optional[int] = ..., synopsis_digest: _Optional[int] = ..., reindexed: _Optional[int] = ..., dropped_by: _Optional[_Mapping[str, int]] = ..., alerts_retried: _Optional[int] = ..., primary_entries: _Optional[int] = ..., replica_entries: _Optional[int] = ..., repairs: _Optional[int] = ..., copies: _Optional[int] = ..., replica_homes: _Optional[int] = ..., held_documents: _Optional[int] = ..., alerts_waiting: _Optional[int] = ..., messages_refused: _Optional[int] = ..., state_digest: _Optional[int] = ..., batches_in_flight: _Optional[int] = ..., background: _Optional[int] = ..., cpu_seconds: _Optional[_Mapping[str, float]] = ..., alerts_repeated: _Optional[int] = ..., alert_latency: _Optional[_Union[Histogram, _Mapping]] = ..., calls_refused: _Optional[_Mapping[str, int]] = ..., held_batches: _Optional[int] = ..., header_bytes: _Optional[int] = ..., announcements_filtered: _Optional[int] = ..., filter_waits: _Optional[int] = ..., alerts_held: _Optional[int] = ..., logs_led: _Optional[int] = ..., logs_in_minority: _Optional[int] = ..., log_entries: _Optional[int] = ..., documents_sent_again: _Optional[int] = ..., documents_unkept: _Optional[int] = ..., storage_full: _Optional[str] = ..., software: _Optional[str] = ..., protocol: _Optional[int] = ..., oldest_protocol: _Optional[int] = ..., ring_floor: _Optional[int] = ...) -> None: ...

class Histogram(_message.Message):
    __slots__ = ("bounds", "counts", "sum")
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    bounds: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[int]
    sum: float
    def __init__(self, bounds: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[int]] = ..., sum: _Optional[float] = ...) -> None: ...

class EngineConfig(_message.Message):
    __slots__ = ("strategy", "piggyback", "resolution", "bloom_bits", "bloom_hashes", "max_document_bytes", "seed", "dialogue_batch", "synopsis_k", "synopsis_y", "synopsis_hashes", "gossip_period", "reindex_grace", "replicas", "reconcile_period", "df", "popular", "mailbox_bytes", "max_query_bytes", "max_alternatives", "header_terms", "filter_lease", "merge_queries", "ring", "home_log", "log_members", "protocol", "oldest_protocol", "software")
    class DfEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PIGGYBACK_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    BLOOM_BITS_FIELD_NUMBER: _ClassVar[int]
    BLOOM_HASHES_FIELD_NUMBER: _ClassVar[int]
    MAX_DOCUMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    DIALOGUE_BATCH_FIELD_NUMBER: _ClassVar[int]
    SYNOPSIS_K_FIELD_NUMBER: _ClassVar[int]
    SYNOPSIS_Y_FIELD_NUMBER: _ClassVar[int]
    SYNOPSIS_HASHES_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_PERIOD_FIELD_NUMBER: _ClassVar[int]
    REINDEX_GRACE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    DF_FIELD_NUMBER: _ClassVar[int]
    POPULAR_FIELD_NUMBER: _ClassVar[int]
    MAILBOX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_QUERY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    HEADER_TERMS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LEASE_FIELD_NUMBER: _ClassVar[int]
    MERGE_QUERIES_FIELD_NUMBER: _ClassVar[int]
    RING_FIELD_NUMBER: _ClassVar[int]
    HOME_LOG_FIELD_NUMBER: _ClassVar[int]
    LOG_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    strategy: str
    piggyback: int
    resolution: str
    bloom_bits: int
    bloom_hashes: int
    max_document_bytes: int
    seed: int
    dialogue_batch: int
    synopsis_k: int
    synopsis_y: int
    synopsis_hashes: int
    gossip_period: float
    reindex_grace: float
    replicas: int
    reconcile_period: float
    df: _containers.ScalarMap[str, int]
    popular: TermList
    mailbox_bytes: int
    max_query_bytes: int
    max_alternatives: int
    header_terms: int
    filter_lease: float
    merge_queries: bool
    ring: int
    home_log: bool
    log_members: int
    protocol: int
    oldest_protocol: int
    software: str
    def __init__(self, strategy: _Optional[str] = ..., piggyback: _Optional[int] = ..., resolution: _Optional[str] = ..., bloom_bits: _Optional[int] = ..., bloom_hashes: _Optional[int] = ..., max_document_bytes: _Optional[int] = ..., seed: _Optional[int] = ..., dialogue_batch: _Optional[int] = ..., synopsis_k: _Optional[int] = ..., synopsis_y: _Optional[int] = ..., synopsis_hashes: _Optional[int] = ..., gossip_period: _Optional[float] = ..., reindex_grace: _Optional[float] = ..., replicas: _Optional[int] = ..., reconcile_period: _Optional[float] = ..., df: _Optional[_Mapping[str, int]] = ..., popular: _Optional[_Union[TermList, _Mapping]] = ..., mailbox_bytes: _Optional[int] = ..., max_query_bytes: _Optional[int] = ..., max_alternatives: _Optional[int] = ..., header_terms: _Optional[int] = ..., filter_lease: _Optional[float] = ..., merge_queries: _Optional[bool] = ..., ring: _Optional[int] = ..., home_log: _Optional[bool] = ..., log_members: _Optional[int] = ..., protocol: _Optional[int] = ..., oldest_protocol: _Optional[int] = ..., software: _Optional[str] = ...) -> None: ...

class TermList(_message.Message):
    __slots__ = ("terms",)
    TERMS_FIELD_NUMBER: _ClassVar[int]
    terms: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, terms: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GossipRequest(_message.Message):
    __slots__ = ("term_ids", "values", "hashes")
    TERM_IDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    term_ids: _containers.RepeatedScalarFieldContainer[int]
    values: bytes
    hashes: int
    def __init__(self, term_ids: _Optional[_Iterable[int]] = ..., values: _Optional[bytes] = ..., hashes: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AnnounceReply(_message.Message):
    __slots__ = ("share", "filter_lo", "filter_hi", "filter_keys", "filter_lease")
    SHARE_FIELD_NUMBER: _ClassVar[int]
    FILTER_LO_FIELD_NUMBER: _ClassVar[int]
    FILTER_HI_FIELD_NUMBER: _ClassVar[int]
    FILTER_KEYS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LEASE_FIELD_NUMBER: _ClassVar[int]
    share: int
    filter_lo: int
    filter_hi: int
    filter_keys: _containers.RepeatedScalarFieldContainer[int]
    filter_lease: float
    def __init__(self, share: _Optional[int] = ..., filter_lo: _Optional[int] = ..., filter_hi: _Optional[int] = ..., filter_keys: _Optional[_Iterable[int]] = ..., filter_lease: _Optional[float] = ...) -> None: ...

class QueryEntry(_message.Message):
    __slots__ = ("subscription_id", "term_ids", "terms", "index_id", "home", "version", "home_id", "alternative", "not_ids", "not_terms", "phrases")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_IDS_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HOME_ID_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVE_FIELD_NUMBER: _ClassVar[int]
    NOT_IDS_FIELD_NUMBER: _ClassVar[int]
    NOT_TERMS_FIELD_NUMBER: _ClassVar[int]
    PHRASES_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    term_ids: _containers.RepeatedScalarFieldContainer[int]
    terms: _containers.RepeatedScalarFieldContainer[str]
    index_id: int
    home: str
    version: int
    home_id: int
    alternative: int
    not_ids: _containers.RepeatedScalarFieldContainer[int]
    not_terms: _containers.RepeatedScalarFieldContainer[str]
    phrases: _containers.RepeatedCompositeFieldContainer[Phrase]
    def __init__(self, subscription_id: _Optional[int] = ..., term_ids: _Optional[_Iterable[int]] = ..., terms: _Optional[_Iterable[str]] = ..., index_id: _Optional[int] = ..., home: _Optional[str] = ..., version: _Optional[int] = ..., home_id: _Optional[int] = ..., alternative: _Optional[int] = ..., not_ids: _Optional[_Iterable[int]] = ..., not_terms: _Optional[_Iterable[str]] = ..., phrases: _Optional[_Iterable[_Union[Phrase, _Mapping]]] = ...) -> None: ...

class Phrase(_message.Message):
    __slots__ = ("ids", "terms", "negated")
    IDS_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    NEGATED_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    terms: _containers.RepeatedScalarFieldContainer[str]
    negated: bool
    def __init__(self, ids: _Optional[_Iterable[int]] = ..., terms: _Optional[_Iterable[str]] = ..., negated: _Optional[bool] = ...) -> None: ...

class IndexRequest(_message.Message):
    __slots__ = ("entry", "entries")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entry: QueryEntry
    entries: _containers.RepeatedCompositeFieldContainer[QueryEntry]
    def __init__(self, entry: _Optional[_Union[QueryEntry, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[QueryEntry, _Mapping]]] = ...) -> None: ...

class UnindexRequest(_message.Message):
    __slots__ = ("index_id", "subscription_id", "alternatives")
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    index_id: int
    subscription_id: int
    alternatives: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, index_id: _Optional[int] = ..., subscription_id: _Optional[int] = ..., alternatives: _Optional[_Iterable[int]] = ...) -> None: ...

class IndexReply(_message.Message):
    __slots__ = ("owner", "replicas", "moved")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    owner: bool
    replicas: _containers.RepeatedScalarFieldContainer[str]
    moved: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, owner: _Optional[bool] = ..., replicas: _Optional[_Iterable[str]] = ..., moved: _Optional[_Iterable[int]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("ids", "prev", "next", "succ", "doc")
    IDS_FIELD_NUMBER: _ClassVar[int]
    PREV_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    SUCC_FIELD_NUMBER: _ClassVar[int]
    DOC_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    prev: int
    next: int
    succ: _containers.RepeatedScalarFieldContainer[int]
    doc: int
    def __init__(self, ids: _Optional[_Iterable[int]] = ..., prev: _Optional[int] = ..., next: _Optional[int] = ..., succ: _Optional[_Iterable[int]] = ..., doc: _Optional[int] = ...) -> None: ...

class Announcement(_message.Message):
    __slots__ = ("doc_keys", "dn", "max_ids", "runs", "hops", "batch", "share", "dn_id", "owner", "presence", "filter")
    DOC_KEYS_FIELD_NUMBER: _ClassVar[int]
    DN_FIELD_NUMBER: _ClassVar[int]
    MAX_IDS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    DN_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    doc_keys: _containers.RepeatedScalarFieldContainer[int]
    dn: str
    max_ids: _containers.RepeatedScalarFieldContainer[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    hops: int
    batch: int
    share: int
    dn_id: int
    owner: bool
    presence: _containers.RepeatedScalarFieldContainer[int]
    filter: bool
    def __init__(self, doc_keys: _Optional[_Iterable[int]] = ..., dn: _Optional[str] = ..., max_ids: _Optional[_Iterable[int]] = ..., runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., hops: _Optional[int] = ..., batch: _Optional[int] = ..., share: _Optional[int] = ..., dn_id: _Optional[int] = ..., owner: _Optional[bool] = ..., presence: _Optional[_Iterable[int]] = ..., filter: _Optional[bool] = ...) -> None: ...

class BloomRequest(_message.Message):
    __slots__ = ("doc_keys",)
    DOC_KEYS_FIELD_NUMBER: _ClassVar[int]
    doc_keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, doc_keys: _Optional[_Iterable[int]] = ...) -> None: ...

class BloomReply(_message.Message):
    __slots__ = ("found", "bits")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    BITS_FIELD_NUMBER: _ClassVar[int]
    found: _containers.RepeatedScalarFieldContainer[bool]
    bits: bytes
    def __init__(self, found: _Optional[_Iterable[bool]] = ..., bits: _Optional[bytes] = ...) -> None: ...

class DialogueRequest(_message.Message):
    __slots__ = ("doc_keys", "ids", "counts", "phrase_lengths", "phrase_docs")
    DOC_KEYS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    PHRASE_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    PHRASE_DOCS_FIELD_NUMBER: _ClassVar[int]
    doc_keys: _containers.RepeatedScalarFieldContainer[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    counts: _containers.RepeatedScalarFieldContainer[int]
    phrase_lengths: _containers.RepeatedScalarFieldContainer[int]
    phrase_docs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, doc_keys: _Optional[_Iterable[int]] = ..., ids: _Optional[_Iterable[int]] = ..., counts: _Optional[_Iterable[int]] = ..., phrase_lengths: _Optional[_Iterable[int]] = ..., phrase_docs: _Optional[_Iterable[int]] = ...) -> None: ...

class DialogueReply(_message.Message):
    __slots__ = ("found", "present", "phrases")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    PRESENT_FIELD_NUMBER: _ClassVar[int]
    PHRASES_FIELD_NUMBER: _ClassVar[int]
    found: _containers.RepeatedScalarFieldContainer[bool]
    present: bytes
    phrases: bytes
    def __init__(self, found: _Optional[_Iterable[bool]] = ..., present: _Optional[bytes] = ..., phrases: _Optional[bytes] = ...) -> None: ...

class Match(_message.Message):
    __slots__ = ("subscription_id", "home", "doc", "home_id")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    DOC_FIELD_NUMBER: _ClassVar[int]
    HOME_ID_FIELD_NUMBER: _ClassVar[int]
    subscription_id: int
    home: str
    doc: int
    home_id: int
    def __init__(self, subscription_id: _Optional[int] = ..., home: _Optional[str] = ..., doc: _Optional[int] = ..., home_id: _Optional[int] = ...) -> None: ...

class MatchedRequest(_message.Message):
    __slots__ = ("doc_keys", "matches", "batch", "share", "subscriptions", "counts", "docs", "home_of", "homes", "home_ids")
    DOC_KEYS_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DOCS_FIELD_NUMBER: _ClassVar[int]
    HOME_OF_FIELD_NUMBER: _ClassVar[int]
    HOMES_FIELD_NUMBER: _ClassVar[int]
    HOME_IDS_FIELD_NUMBER: _ClassVar[int]
    doc_keys: _containers.RepeatedScalarFieldContainer[int]
    matches: _containers.RepeatedCompositeFieldContainer[Match]
    batch: int
    share: int
    subscriptions: _containers.RepeatedScalarFieldContainer[int]
    counts: _containers.RepeatedScalarFieldContainer[int]
    docs: _containers.RepeatedScalarFieldContainer[int]
    home_of: _containers.RepeatedScalarFieldContainer[int]
    homes: _containers.RepeatedScalarFieldContainer[str]
    home_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, doc_keys: _Optional[_Iterable[int]] = ..., matches: _Optional[_Iterable[_Union[Match, _Mapping]]] = ..., batch: _Optional[int] = ..., share: _Optional[int] = ..., subscriptions: _Optional[_Iterable[int]] = ..., counts: _Optional[_Iterable[int]] = ..., docs: _Optional[_Iterable[int]] = ..., home_of: _Optional[_Iterable[int]] = ..., homes: _Optional[_Iterable[str]] = ..., home_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class AlertBatch(_message.Message):
    __slots__ = ("docnos", "titles", "snippets", "subscription_ids", "counts", "seqs", "home_id", "owner", "home", "accepted", "stream", "rows")
    DOCNOS_FIELD_NUMBER: _ClassVar[int]
    TITLES_FIELD_NUMBER: _ClassVar[int]
    SNIPPETS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    SEQS_FIELD_NUMBER: _ClassVar[int]
    HOME_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    docnos: _containers.RepeatedScalarFieldContainer[str]
    titles: _containers.RepeatedScalarFieldContainer[str]
    snippets: _containers.RepeatedScalarFieldContainer[str]
    subscription_ids: _containers.RepeatedScalarFieldContainer[int]
    counts: _containers.RepeatedScalarFieldContainer[int]
    seqs: _containers.RepeatedScalarFieldContainer[int]
    home_id: int
    owner: bool
    home: str
    accepted: float
    stream: bytes
    rows: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, docnos: _Optional[_Iterable[str]] = ..., titles: _Optional[_Iterable[str]] = ..., snippets: _Optional[_Iterable[str]] = ..., subscription_ids: _Optional[_Iterable[int]] = ..., counts: _Optional[_Iterable[int]] = ..., seqs: _Optional[_Iterable[int]] = ..., home_id: _Optional[int] = ..., owner: _Optional[bool] = ..., home: _Optional[str] = ..., accepted: _Optional[float] = ..., stream: _Optional[bytes] = ..., rows: _Optional[_Iterable[int]] = ...) -> None: ...

class DeliverReply(_message.Message):
    __slots__ = ("moved", "held")
    MOVED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    moved: bool
    held: bool
    def __init__(self, moved: _Optional[bool] = ..., held: _Optional[bool] = ...) -> None: ...

class EntryRecord(_message.Message):
    __slots__ = ("key", "entry", "deleted", "age")
    KEY_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    AGE_FIELD_NUMBER: _ClassVar[int]
    key: int
    entry: QueryEntry
    deleted: float
    age: float
    def __init__(self, key: _Optional[int] = ..., entry: _Optional[_Union[QueryEntry, _Mapping]] = ..., deleted: _Optional[float] = ..., age: _Optional[float] = ...) -> None: ...

class HomeRecord(_message.Message):
    __slots__ = ("key", "subscription_id", "deleted", "token_hash", "terms", "index_id", "index_term", "first", "start", "docnos", "titles", "snippets", "seen", "query", "index_ids", "age", "row")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_HASH_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_TERM_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    DOCNOS_FIELD_NUMBER: _ClassVar[int]
    TITLES_FIELD_NUMBER: _ClassVar[int]
    SNIPPETS_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    INDEX_IDS_FIELD_NUMBER: _ClassVar[int]
    AGE_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    key: int
    subscription_id: int
    deleted: float
    token_hash: bytes
    terms: _containers.RepeatedScalarFieldContainer[str]
    index_id: int
    index_term: str
    first: int
    start: int
    docnos: _containers.RepeatedScalarFieldContainer[str]
    titles: _containers.RepeatedScalarFieldContainer[str]
    snippets: _containers.RepeatedScalarFieldContainer[str]
    seen: _containers.RepeatedScalarFieldContainer[str]
    query: str
    index_ids: _containers.RepeatedScalarFieldContainer[int]
    age: float
    row: int
    def __init__(self, key: _Optional[int] = ..., subscription_id: _Optional[int] = ..., deleted: _Optional[float] = ..., token_hash: _Optional[bytes] = ..., terms: _Optional[_Iterable[str]] = ..., index_id: _Optional[int] = ..., index_term: _Optional[str] = ..., first: _Optional[int] = ..., start: _Optional[int] = ..., docnos: _Optional[_Iterable[str]] = ..., titles: _Optional[_Iterable[str]] = ..., snippets: _Optional[_Iterable[str]] = ..., seen: _Optional[_Iterable[str]] = ..., query: _Optional[str] = ..., index_ids: _Optional[_Iterable[int]] = ..., age: _Optional[float] = ..., row: _Optional[int] = ...) -> None: ...

class HeldDocument(_message.Message):
    __slots__ = ("key", "docno", "title", "snippet", "ids", "sequence")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DOCNO_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    key: int
    docno: str
    title: str
    snippet: str
    ids: _containers.RepeatedScalarFieldContainer[int]
    sequence: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, key: _Optional[int] = ..., docno: _Optional[str] = ..., title: _Optional[str] = ..., snippet: _Optional[str] = ..., ids: _Optional[_Iterable[int]] = ..., sequence: _Optional[_Iterable[int]] = ...) -> None: ...

class HeldBatch(_message.Message):
    __slots__ = ("key", "batch", "dn", "documents", "age", "incarnation")
    KEY_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    DN_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    AGE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    key: int
    batch: int
    dn: str
    documents: _containers.RepeatedCompositeFieldContainer[HeldDocument]
    age: float
    incarnation: int
    def __init__(self, key: _Optional[int] = ..., batch: _Optional[int] = ..., dn: _Optional[str] = ..., documents: _Optional[_Iterable[_Union[HeldDocument, _Mapping]]] = ..., age: _Optional[float] = ..., incarnation: _Optional[int] = ...) -> None: ...

class Records(_message.Message):
    __slots__ = ("entries", "homes", "batches", "alerts", "acknowledged")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HOMES_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[EntryRecord]
    homes: _containers.RepeatedCompositeFieldContainer[HomeRecord]
    batches: _containers.RepeatedCompositeFieldContainer[HeldBatch]
    alerts: _containers.RepeatedCompositeFieldContainer[AlertBatch]
    acknowledged: Acknowledged
    def __init__(self, entries: _Optional[_Iterable[_Union[EntryRecord, _Mapping]]] = ..., homes: _Optional[_Iterable[_Union[HomeRecord, _Mapping]]] = ..., batches: _Optional[_Iterable[_Union[HeldBatch, _Mapping]]] = ..., alerts: _Optional[_Iterable[_Union[AlertBatch, _Mapping]]] = ..., acknowledged: _Optional[_Union[Acknowledged, _Mapping]] = ...) -> None: ...

class Acknowledged(_message.Message):
    __slots__ = ("subscription_ids", "firsts", "rows")
    SUBSCRIPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    FIRSTS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    subscription_ids: _containers.RepeatedScalarFieldContainer[int]
    firsts: _containers.RepeatedScalarFieldContainer[int]
    rows: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, subscription_ids: _Optional[_Iterable[int]] = ..., firsts: _Optional[_Iterable[int]] = ..., rows: _Optional[_Iterable[int]] = ...) -> None: ...

class ReplicateReply(_message.Message):
    __slots__ = ("behind", "since")
    BEHIND_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    behind: _containers.RepeatedScalarFieldContainer[int]
    since: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, behind: _Optional[_Iterable[int]] = ..., since: _Optional[_Iterable[int]] = ...) -> None: ...

class ReconcileRequest(_message.Message):
    __slots__ = ("lo", "hi", "entries", "homes", "batches", "want_entry_keys", "want_entry_subs", "want_homes")
    LO_FIELD_NUMBER: _ClassVar[int]
    HI_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HOMES_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    WANT_ENTRY_KEYS_FIELD_NUMBER: _ClassVar[int]
    WANT_ENTRY_SUBS_FIELD_NUMBER: _ClassVar[int]
    WANT_HOMES_FIELD_NUMBER: _ClassVar[int]
    lo: int
    hi: int
    entries: _containers.RepeatedScalarFieldContainer[int]
    homes: _containers.RepeatedScalarFieldContainer[int]
    batches: _containers.RepeatedScalarFieldContainer[int]
    want_entry_keys: _containers.RepeatedScalarFieldContainer[int]
    want_entry_subs: _containers.RepeatedScalarFieldContainer[int]
    want_homes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, lo: _Optional[int] = ..., hi: _Optional[int] = ..., entries: _Optional[_Iterable[int]] = ..., homes: _Optional[_Iterable[int]] = ..., batches: _Optional[_Iterable[int]] = ..., want_entry_keys: _Optional[_Iterable[int]] = ..., want_entry_subs: _Optional[_Iterable[int]] = ..., want_homes: _Optional[_Iterable[int]] = ...) -> None: ...

class ReconcileReply(_message.Message):
    __slots__ = ("entry_buckets", "home_buckets", "records", "summaries")
    ENTRY_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    HOME_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    entry_buckets: _containers.RepeatedScalarFieldContainer[int]
    home_buckets: _containers.RepeatedScalarFieldContainer[int]
    records: Records
    summaries: Summaries
    def __init__(self, entry_buckets: _Optional[_Iterable[int]] = ..., home_buckets: _Optional[_Iterable[int]] = ..., records: _Optional[_Union[Records, _Mapping]] = ..., summaries: _Optional[_Union[Summaries, _Mapping]] = ...) -> None: ...

class Summaries(_message.Message):
    __slots__ = ("entry_keys", "entry_subs", "entry_versions", "entry_deleted", "home_keys", "home_subs", "home_deleted", "home_firsts", "home_nexts", "home_blind")
    ENTRY_KEYS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_SUBS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_DELETED_FIELD_NUMBER: _ClassVar[int]
    HOME_KEYS_FIELD_NUMBER: _ClassVar[int]
    HOME_SUBS_FIELD_NUMBER: _ClassVar[int]
    HOME_DELETED_FIELD_NUMBER: _ClassVar[int]
    HOME_FIRSTS_FIELD_NUMBER: _ClassVar[int]
    HOME_NEXTS_FIELD_NUMBER: _ClassVar[int]
    HOME_BLIND_FIELD_NUMBER: _ClassVar[int]
    entry_keys: _containers.RepeatedScalarFieldContainer[int]
    entry_subs: _containers.RepeatedScalarFieldContainer[int]
    entry_versions: _containers.RepeatedScalarFieldContainer[int]
    entry_deleted: _containers.RepeatedScalarFieldContainer[bool]
    home_keys: _containers.RepeatedScalarFieldContainer[int]
    home_subs: _containers.RepeatedScalarFieldContainer[int]
    home_deleted: _containers.RepeatedScalarFieldContainer[bool]
    home_firsts: _containers.RepeatedScalarFieldContainer[int]
    home_nexts: _containers.RepeatedScalarFieldContainer[int]
    home_blind: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, entry_keys: _Optional[_Iterable[int]] = ..., entry_subs: _Optional[_Iterable[int]] = ..., entry_versions: _Optional[_Iterable[int]] = ..., entry_deleted: _Optional[_Iterable[bool]] = ..., home_keys: _Optional[_Iterable[int]] = ..., home_subs: _Optional[_Iterable[int]] = ..., home_deleted: _Optional[_Iterable[bool]] = ..., home_firsts: _Optional[_Iterable[int]] = ..., home_nexts: _Optional[_Iterable[int]] = ..., home_blind: _Optional[_Iterable[bool]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: int
    def __init__(self, batch: _Optional[int] = ...) -> None: ...

class LogEntry(_message.Message):
    __slots__ = ("epoch", "kind", "data", "members", "previous")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    kind: LogKind
    data: bytes
    members: _containers.RepeatedScalarFieldContainer[str]
    previous: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., kind: _Optional[_Union[LogKind, str]] = ..., data: _Optional[bytes] = ..., members: _Optional[_Iterable[str]] = ..., previous: _Optional[_Iterable[str]] = ...) -> None: ...

class LogPromise(_message.Message):
    __slots__ = ("key", "epoch", "members", "candidate", "probe")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    key: int
    epoch: int
    members: _containers.RepeatedScalarFieldContainer[str]
    candidate: str
    probe: bool
    def __init__(self, key: _Optional[int] = ..., epoch: _Optional[int] = ..., members: _Optional[_Iterable[str]] = ..., candidate: _Optional[str] = ..., probe: _Optional[bool] = ...) -> None: ...

class LogPromiseReply(_message.Message):
    __slots__ = ("promised", "epoch", "last_epoch", "last", "committed", "config_epoch", "config", "config_previous", "config_committed")
    PROMISED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    CONFIG_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CONFIG_PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    promised: bool
    epoch: int
    last_epoch: int
    last: int
    committed: int
    config_epoch: int
    config: _containers.RepeatedScalarFieldContainer[str]
    config_previous: _containers.RepeatedScalarFieldContainer[str]
    config_committed: bool
    def __init__(self, promised: _Optional[bool] = ..., epoch: _Optional[int] = ..., last_epoch: _Optional[int] = ..., last: _Optional[int] = ..., committed: _Optional[int] = ..., config_epoch: _Optional[int] = ..., config: _Optional[_Iterable[str]] = ..., config_previous: _Optional[_Iterable[str]] = ..., config_committed: _Optional[bool] = ...) -> None: ...

class LogAppend(_message.Message):
    __slots__ = ("key", "epoch", "prev_epoch", "prev", "entries", "commit", "checkpoint")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREV_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREV_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    key: int
    epoch: int
    prev_epoch: int
    prev: int
    entries: _containers.RepeatedCompositeFieldContainer[LogEntry]
    commit: int
    checkpoint: LogCheckpoint
    def __init__(self, key: _Optional[int] = ..., epoch: _Optional[int] = ..., prev_epoch: _Optional[int] = ..., prev: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[LogEntry, _Mapping]]] = ..., commit: _Optional[int] = ..., checkpoint: _Optional[_Union[LogCheckpoint, _Mapping]] = ...) -> None: ...

class LogAppendReply(_message.Message):
    __slots__ = ("taken", "epoch", "last")
    TAKEN_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    taken: bool
    epoch: int
    last: int
    def __init__(self, taken: _Optional[bool] = ..., epoch: _Optional[int] = ..., last: _Optional[int] = ...) -> None: ...

class LogFetch(_message.Message):
    __slots__ = ("key", "after", "epoch")
    KEY_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    key: int
    after: int
    epoch: int
    def __init__(self, key: _Optional[int] = ..., after: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class LogFetchReply(_message.Message):
    __slots__ = ("entries", "after", "after_epoch", "promised", "checkpoint")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    AFTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROMISED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LogEntry]
    after: int
    after_epoch: int
    promised: int
    checkpoint: LogCheckpoint
    def __init__(self, entries: _Optional[_Iterable[_Union[LogEntry, _Mapping]]] = ..., after: _Optional[int] = ..., after_epoch: _Optional[int] = ..., promised: _Optional[int] = ..., checkpoint: _Optional[_Union[LogCheckpoint, _Mapping]] = ...) -> None: ...

class LogLeaveRequest(_message.Message):
    __slots__ = ("member", "keys")
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    member: str
    keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, member: _Optional[str] = ..., keys: _Optional[_Iterable[int]] = ...) -> None: ...

class LogLeaveReply(_message.Message):
    __slots__ = ("moved",)
    MOVED_FIELD_NUMBER: _ClassVar[int]
    moved: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, moved: _Optional[_Iterable[int]] = ...) -> None: ...

class UptimeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UptimeReply(_message.Message):
    __slots__ = ("seconds",)
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    seconds: float
    def __init__(self, seconds: _Optional[float] = ...) -> None: ...

class LogCheckpoint(_message.Message):
    __slots__ = ("position", "homes", "epoch", "config", "next_row")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    HOMES_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    NEXT_ROW_FIELD_NUMBER: _ClassVar[int]
    position: int
    homes: _containers.RepeatedCompositeFieldContainer[HomeRecord]
    epoch: int
    config: LogEntry
    next_row: int
    def __init__(self, position: _Optional[int] = ..., homes: _Optional[_Iterable[_Union[HomeRecord, _Mapping]]] = ..., epoch: _Optional[int] = ..., config: _Optional[_Union[LogEntry, _Mapping]] = ..., next_row: _Optional[int] = ...) -> None: ...
