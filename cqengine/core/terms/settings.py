"""Ring-wide engine settings.

A ring's strategy, piggyback depth and resolution method are fixed when the ring starts;
a node joining later asks its bootstrap node for them (Engine.GetConfig), so one ring
never mixes strategies. The term statistics and popular terms the first node was given
(read from files by the command line, never by the engine) travel by value: no path
travels, and a joining node reads no file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np

from chord.protocol.routing import SUCCESSORS
from cqengine.core.basis.limits import MAILBOX_BYTES
from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.presence import MAX_HEADER_TERMS, hot_ids
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id
from cqengine.text.query import MAX_ALTERNATIVES

RESOLUTIONS = ("td", "bf")
REPLICAS = 3  # the command line's default: a record survives two nodes failing at once
# the command line's default member count of a home's log (Settings.home_log): a majority
# of five is left when two fail at once, as three copies survive two failures
LOG_MEMBERS = 5
MAX_REPLICAS = SUCCESSORS  # no more than the successor list's default length
MAX_FILTER_LEASE = 60.0  # s: how long a subscription under a new key may wait, at most


class SettingsError(ValueError):
    """A setting is unusable; the message says which and why."""


@dataclass
class Settings:
    strategy: str = "mhi"
    piggyback: int = 0
    resolution: str = "td"
    bloom_bits: int = 1024
    bloom_hashes: int = 5
    max_document_bytes: int = 1 << 20
    mailbox_bytes: int = MAILBOX_BYTES  # a subscription's alerts waiting, at most
    max_query_bytes: int = 4096  # a query's text, refused before it is analyzed
    max_alternatives: int = MAX_ALTERNATIVES  # a query's, expanded (cqengine.text.query)
    seed: int = 0
    dialogue_batch: int = 1
    synopsis_k: int = 3000
    synopsis_y: int = 32
    synopsis_hashes: int = 1
    gossip_period: float = 1.0
    # term-presence headers: the DN tells QNs which of this many hot terms its document
    # holds (cqengine.core.terms.presence); 0: none, the paper's announcement
    header_terms: int = 0
    # aggregate filters: seconds a node's filter of its region is good for at the nodes it
    # grants it to (cqengine.core.announcement.filters); 0: none, the paper's announcement
    filter_lease: float = 0.0
    # query merging: the queries of a list that ask the same first question are one
    # column, split when it matches (cqengine.core.state.merging); off: each its own
    merge_queries: bool = False
    # a re-indexed entry stays at its old key this long, for documents already on their way
    reindex_grace: float = 5.0
    # copies of every record (cqengine.core.home.replication): 1 is the paper's, a command-line
    # ring has REPLICAS
    replicas: int = 1
    reconcile_period: float = 2.0  # s between a live node's reconciliation rounds
    # each home key a replicated log (cqengine.core.homelog): alerts numbered from its
    # committed entries; off: every numbered alert copied to the replicas
    home_log: bool = False
    # the members of each home key's log (home_log): the home and its next successors; 0:
    # as many as `replicas`. A majority must be left: 5 outlive two failures at once
    log_members: int = 0
    df: dict[str, int] | None = field(default=None, repr=False)
    popular: frozenset[str] | None = field(default=None, repr=False)  # terms; None: gossip them

    WIRE = (
        "strategy",
        "piggyback",
        "resolution",
        "bloom_bits",
        "bloom_hashes",
        "max_document_bytes",
        "mailbox_bytes",
        "max_query_bytes",
        "max_alternatives",
        "seed",
        "dialogue_batch",
        "synopsis_k",
        "synopsis_y",
        "synopsis_hashes",
        "gossip_period",
        "header_terms",
        "filter_lease",
        "merge_queries",
        "reindex_grace",
        "replicas",
        "reconcile_period",
        "home_log",
        "log_members",
    )

    def validate(self) -> Settings:
        if self.strategy not in STRATEGIES:
            raise SettingsError(
                f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}"
            )
        if self.resolution not in RESOLUTIONS:
            raise SettingsError(f"unknown resolution {self.resolution!r}; choose td or bf")
        if not 0 <= self.piggyback <= 64:
            raise SettingsError(f"piggyback depth {self.piggyback} is outside 0-64")
        if self.bloom_bits <= 0 or self.bloom_bits % 8:
            raise SettingsError(
                f"Bloom filter size {self.bloom_bits} must be a positive multiple of 8 bits"
            )
        if not 1 <= self.bloom_hashes <= 32:
            raise SettingsError(f"Bloom hash count {self.bloom_hashes} is outside 1-32")
        if self.max_document_bytes <= 0 or self.dialogue_batch <= 0:
            raise SettingsError("document size limit and dialogue batch must be positive")
        if self.mailbox_bytes <= 0 or self.max_query_bytes <= 0:
            raise SettingsError("a mailbox's and a query's size in bytes must be positive")
        if not 1 <= self.max_alternatives <= 1024:
            raise SettingsError(f"alternatives per query {self.max_alternatives} is outside 1-1024")
        if self.strategy == "oi" and self.df is None:
            raise SettingsError("strategy oi indexes by document frequency: give --stats FILE")
        if (
            not self.synopsis_k >= 1
            or not 1 <= self.synopsis_y <= 64
            or not 1 <= self.synopsis_hashes <= 16
        ):
            raise SettingsError(
                "synopsis size must be positive, coin tosses 1-64 and registers 1-16"
            )
        if not 0 <= self.header_terms <= MAX_HEADER_TERMS:
            raise SettingsError(f"header terms {self.header_terms} is outside 0-{MAX_HEADER_TERMS}")
        if self.header_terms and self.df is None:
            raise SettingsError(
                "term-presence headers choose their terms by document frequency: give --stats FILE"
            )
        if not 0 <= self.filter_lease <= MAX_FILTER_LEASE:
            raise SettingsError(
                f"filter lease {self.filter_lease} s is outside 0-{MAX_FILTER_LEASE:g} s: a "
                "subscription under a new key may wait that long"
            )
        if not 1 <= self.replicas <= MAX_REPLICAS:
            raise SettingsError(f"replicas {self.replicas} is outside 1-{MAX_REPLICAS}")
        if not 0 <= self.log_members <= MAX_REPLICAS:
            raise SettingsError(f"log members {self.log_members} is outside 0-{MAX_REPLICAS}")
        if self.reconcile_period <= 0:
            raise SettingsError("the reconciliation period must be positive")
        if self.gossip_period <= 0 or self.reindex_grace < 0:
            raise SettingsError(
                "the gossip period must be positive and the re-index grace not negative"
            )
        return self

    @cached_property
    def hot_ids(self) -> np.ndarray:
        """The term-presence header's terms' ids, ascending (cqengine.core.terms.presence); none
        when headers are off. Computed once: every node of a simulated ring shares them."""
        if not self.header_terms or self.df is None:
            return np.zeros(0, dtype=np.uint64)
        return hot_ids(self.df, self.header_terms)

    @cached_property
    def popular_ids(self) -> frozenset[int] | None:
        """The popular terms' ids (computed once: every node of a simulated ring shares them)."""
        return frozenset(term_id(t) for t in self.popular) if self.popular is not None else None

    @property
    def members(self) -> int:
        """The members of a home key's log (home_log)."""
        return self.log_members or self.replicas

    @property
    def gossiped(self) -> bool:
        """SAP-MHI without a fixed popular list learns popular terms by gossip."""
        return self.strategy == "sap-mhi" and self.popular is None

    def to_pb(self, values: bool = True) -> pb.EngineConfig:
        """The settings as a joining node takes them: term statistics and popular terms by
        value (with `values` false, without them: a summary)."""
        config = pb.EngineConfig(**{name: getattr(self, name) for name in self.WIRE})
        if values and self.df is not None:
            config.df.update(self.df)
        if values and self.popular is not None:
            config.popular.terms.extend(sorted(self.popular))
        return config

    @classmethod
    def from_pb(cls, msg: pb.EngineConfig) -> Settings:
        wire = {name: getattr(msg, name) for name in cls.WIRE}
        wire["max_alternatives"] = msg.max_alternatives or MAX_ALTERNATIVES  # an older node's
        return cls(
            **wire,
            df=dict(msg.df) if msg.df else None,
            popular=frozenset(msg.popular.terms) if msg.HasField("popular") else None,
        ).validate()


assert set(Settings.WIRE) <= {f.name for f in fields(Settings)}
