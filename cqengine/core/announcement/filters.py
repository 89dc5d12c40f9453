"""Aggregate filters (issue 44, beyond the paper): which keys of its region a hop holds
lists under, so that an announcement that could find no query there is not sent.

A node asked for its filter (Announcement.filter) grants it in its reply: its region
(lo, hi] as it knows it and the keys in it with lists, good for `filter_lease` seconds.
The sender keeps it that long, counted from before it sent (so never longer than the
granter counts), and sends the hop no document whose runs there all lie in the stated
region and meet none of its keys: every id would stop at the hop and find no list, so the
hop would only hand its share back (Announcer._idle). The filter covers one hop's region,
not a finger's range: a hop whose subtree holds lists is rarely without one for any of a
document's ids. At paper scale these spare 0.7-5.6% of the announcement's messages, about
what their grants cost in bytes (experiments/results/README.md, "Beyond the paper").

A filter must never say "no list" where a subscription acknowledged before the document
was published has one: a false "maybe" costs a message, a false "no" loses an alert. So
- a node acknowledges an entry under a key that had no list only once every filter it
  granted without the key has expired (`hold`, `settle`); entries under keys that had lists,
  and every removal, never wait: a filter may list too much, never too little;
- a node whose region changed (a predecessor that joined, failed or came back; keys handed
  over; a start) may face filters its region's former owner granted: for a lease it
  acknowledges no new key (`changed`), the former owner's grants having ended when the
  region moved;
- a sender holds a hop's filter for ids of the hop's stated region only: ids the hop took
  on later are sent as always.
Time is each node's own `host.now`: only durations cross the wire, so clocks need not agree.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

import numpy as np

from chord.protocol.calls import Op, Pause
from chord.protocol.routing import NodeRef
from cqengine.core.frame.context import Context
from cqengine.core.resolution.runs import Run
from cqengine.core.state.postings import member
from cqengine.core.state.summaries import in_range
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.announcement.filters")

MAX_FILTER_KEYS = 4096  # a region with more lists grants no filter (they would rarely skip)
PRUNE = 1024  # filters held, or fresh keys, past which the expired ones are dropped


@dataclass(frozen=True)
class Filter:
    """A hop's filter as its holder keeps it: until when (the holder's clock) it holds."""

    lo: int
    hi: int
    keys: np.ndarray  # uint64, ascending
    until: float

    def spares(self, ids: np.ndarray) -> bool:
        """Would these ids (uint64) all stop at the hop and find no list there?"""
        return bool(in_range(ids, self.lo, self.hi).all()) and not member(ids, self.keys).any()


def lease_problem(lease: float, call_timeout: float) -> str | None:
    """Why a live node cannot use this lease (None: it can): an Index call that waits out
    a lease must not time out first."""
    if lease < call_timeout:
        return None
    return (
        f"the ring's filter lease ({lease:g} s) must be shorter than --call-timeout "
        f"({call_timeout:g} s): a subscription may wait that long"
    )


def filter_of(reply: pb.AnnounceReply, until: float) -> Filter:
    keys = np.array(reply.filter_keys, dtype=np.uint64)
    if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
        raise ValueError("an aggregate filter's keys out of order")
    return Filter(reply.filter_lo, reply.filter_hi, keys, until)


class Filters:
    """A node's filters: those it holds of its hops, and the leases of those it granted."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.lease = ctx.settings.filter_lease
        self.held: dict[str, Filter] = {}  # a hop's address -> its filter
        self.granted_until = 0.0  # every filter I granted has expired by then (my clock)
        self.quiet_until = 0.0  # my region changed: its former owner's have expired by then
        self.fresh: dict[int, float] = {}  # a key new here -> when its entries may be acked
        self._mine: tuple[int, int, int, list[int]] | None = None  # generation, lo, hi, keys
        if self.lease:
            self.changed()  # a start: what this region's owner granted before may hold
            ctx.chord.region_listeners.append(lambda old, new: self.changed())
            ctx.chord.received_listeners.append(self.changed)

    # ---- a sender's side ---------------------------------------------------------------

    def wanted(self, hop: NodeRef) -> bool:
        """Should my announcement ask the hop for its filter (I hold none current)?"""
        f = self.held.get(hop.address)
        return bool(self.lease) and (f is None or f.until <= self.ctx.host.now())

    def keep(self, hop: NodeRef, reply: pb.AnnounceReply, asked_at: float) -> None:
        """The filter a hop granted in its reply to a message sent at `asked_at`."""
        if not reply.filter_lease > 0:  # none granted (or not a number: none either)
            return
        until = asked_at + min(reply.filter_lease, self.lease)
        try:
            self.held[hop.address] = filter_of(reply, until)
        except ValueError as e:  # a filter I cannot read spares nothing
            log.warning("%s granted a filter I ignore: %s", hop.address, e)
            return
        if len(self.held) > PRUNE:
            now = self.ctx.host.now()
            self.held = {a: f for a, f in self.held.items() if f.until > now}

    def forget(self, hop: NodeRef) -> None:
        self.held.pop(hop.address, None)

    def spared(self, hop: NodeRef, parts: dict[int, list[Run]]) -> list[int]:
        """The documents (places in the batch) the hop's filter says to leave out."""
        f = self.held.get(hop.address)
        if f is None or f.until <= self.ctx.host.now():
            return []
        return [
            i
            for i, runs in parts.items()
            if f.spares(np.fromiter(chain.from_iterable(r.ids for r in runs), np.uint64))
        ]

    # ---- a granter's side --------------------------------------------------------------

    def grant(self, reply: pb.AnnounceReply) -> None:
        """My filter into my reply, if I can state my region and it is small enough."""
        ctx = self.ctx
        region = ctx.region()
        if not self.lease or region is None:
            return
        keys = self._keys(*region)
        if len(keys) > MAX_FILTER_KEYS:
            return
        self.granted_until = max(self.granted_until, ctx.host.now() + self.lease)
        reply.filter_lo, reply.filter_hi = region
        reply.filter_keys.extend(keys)
        reply.filter_lease = self.lease

    def _keys(self, lo: int, hi: int) -> list[int]:
        index = self.ctx.index
        got = self._mine
        if got is None or got[:3] != (index.generation, lo, hi):
            got = self._mine = (index.generation, lo, hi, sorted(index.keys_in(lo, hi)))
        return got[3]

    def changed(self) -> None:
        """My region changed (or I start): no new key is acknowledged for a lease."""
        now = self.ctx.host.now()
        self.quiet_until = now + self.lease
        for key, until in self.fresh.items():  # waiting ones wait on
            if until > now:
                self.fresh[key] = max(until, self.quiet_until)

    def hold(self, keys: Iterable[int]) -> bool:
        """Before entries go under these keys (mine): are there keys new here whose
        acknowledgement must wait out filters granted without them? Call `settle` then."""
        if not self.lease:
            return False
        ctx = self.ctx
        now = ctx.host.now()
        gate = max(self.granted_until, self.quiet_until)
        if len(self.fresh) > PRUNE:
            self.fresh = {k: u for k, u in self.fresh.items() if u > now}
        wait = False
        for key in keys:
            if key not in self.fresh and not ctx.index.get(key) and gate > now:
                self.fresh[key] = gate
            wait = wait or self.fresh.get(key, 0.0) > now
        return wait

    def settle(self, keys: Iterable[int]) -> Op:
        """Wait until entries under these keys may be acknowledged."""
        keys = list(keys)
        host = self.ctx.host
        now = host.now()
        self.ctx.count("filter_waits", sum(self.fresh.get(k, 0.0) > now for k in keys))
        while True:
            until = max((self.fresh.get(k, 0.0) for k in keys), default=0.0)
            now = host.now()
            if until <= now:
                return
            yield Pause(until - now)
