"""What every role of an engine node shares: one Context, made by the node (cqengine.core.node).

Where the node stands in the ring (its ChordNode: whether it serves a key, its region, its
replica set), the ring's settings, what its shell lends it (chord.protocol.host.Host: background
work, timers, time, ids), what it holds under ring keys (the inverted index, the
subscriptions homed or replicated here, the record store over both), its counters and the
optional observer and journal. The roles (placement, DN, announcer, QN, home, replication,
gossip) each take the context and the few other roles they call; none reaches into another
through it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import lru_cache

from chord.protocol.host import Host
from chord.protocol.ids import MASK, distance, in_open_closed
from chord.protocol.node import ChordNode
from chord.protocol.routing import NodeRef
from cqengine.core.alerts.mailboxes import Subscriptions
from cqengine.core.basis import limits
from cqengine.core.frame.observer import Observer
from cqengine.core.state.journal import Journal
from cqengine.core.state.merging import merged
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.core.terms.settings import Settings


@lru_cache(maxsize=limits.PEERS)
def peer_at(address: str) -> NodeRef:
    """The node at an address, its id unknown (0): one object per address for every node
    of a process (a simulated ring's thousand send alert batches to the same homes)."""
    return NodeRef(0, address)


class Context:
    __slots__ = (
        "chord", "settings", "host", "observer", "index", "subscriptions", "store", "counters",
        "stopping", "_journal",
    )  # fmt: skip

    def __init__(
        self,
        chord: ChordNode,
        settings: Settings,
        host: Host,
        observer: Observer | None = None,
    ) -> None:
        self.chord, self.settings, self.host, self.observer = chord, settings, host, observer
        df = settings.df
        self.index = InvertedIndex((lambda y, t: df.get(t, 0)) if df is not None else None)
        self.index.merger = merged if settings.merge_queries else None
        self.subscriptions = Subscriptions()
        # inverted lists (and, replicated, home records and held documents) follow key ownership
        self.store = RecordStore(
            self.index,
            self.subscriptions,
            settings.replicas,
            host.now,
            logged=settings.home_log,
            clock=host.clock,
        )
        self.counters: Counter[str] = Counter()
        self.stopping = False  # the node stops: it takes on no new work
        self._journal: Journal | None = None

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n
        if self.observer is not None:
            self.observer.on_count(self, name, n)

    @property
    def journal(self) -> Journal | None:
        return self._journal

    @journal.setter
    def journal(self, journal: Journal | None) -> None:
        """Whatever changes what must outlive the process tells this journal."""
        self._journal = self.index.journal = self.store.journal = journal

    def storage_full(self) -> str:
        """Why my journal can keep nothing now, its disk full, say ("": it can)."""
        journal = self._journal
        return (journal.full() or "") if journal is not None else ""

    @property
    def me(self) -> NodeRef:
        return self.chord.me

    @property
    def replicated(self) -> bool:
        return self.settings.replicas > 1

    def peer(self, address: str) -> NodeRef:
        me = self.me
        return me if address == me.address else peer_at(address)

    def replica_set(self) -> list[NodeRef]:
        """The nodes that hold copies of what I own: my next R-1 successors."""
        return [s for s in self.chord.table.successors if s != self.me][
            : self.settings.replicas - 1
        ]

    def serves(self, key: int) -> bool:
        """Do I serve this home key now: do I own it, knowing my region, and has what the
        ring held for my region while I was away come back to me?"""
        t = self.chord.table
        if t.alone():
            return True
        if not self.chord.settled:
            return False
        if t.predecessor is None:  # my own key is mine whatever came before it
            return key == t.me.id
        return in_open_closed(key, t.predecessor.id, t.me.id)

    def serving(self) -> Callable[[int], bool]:
        """`serves`, its answer for the ring as it is now read once: for a pass over many
        keys (Stats, scraped every few seconds, reads every subscription's)."""
        t = self.chord.table
        if t.alone() or not self.chord.settled or t.predecessor is None:
            return self.serves
        lo, span = t.predecessor.id, distance(t.predecessor.id, t.me.id)
        return lambda key: span == 0 or 0 < (key - lo) & MASK <= span

    def region(self) -> tuple[int, int] | None:
        """(predecessor, me]: where Observation 1 holds; None while my predecessor is unknown
        (unless I am alone: then the whole circle)."""
        pred = self.chord.table.predecessor
        if pred is not None:
            return pred.id, self.me.id
        return (self.me.id, self.me.id) if self.chord.table.alone() else None
