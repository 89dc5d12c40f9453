"""The state a refused message must leave as it was: a fingerprint of everything an engine
node holds, and of the work queued on its simulated ring."""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np
from google.protobuf.message import Message

from cqengine.core.node import EngineNode
from cqengine.evaluation.measuring.sim import EngineSimulator


def plain(x: Any) -> Any:
    """A value as plain data, for comparing: messages by their bytes, sets sorted."""
    if isinstance(x, Message):
        return x.SerializeToString(deterministic=True)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return sorted((plain(v) for v in x), key=repr)
    if isinstance(x, dict):
        return [(plain(k), plain(v)) for k, v in x.items()]  # their order is state too
    if isinstance(x, (list, tuple, deque)):
        return [plain(v) for v in x]
    if is_dataclass(x) and not isinstance(x, type):
        return [(f.name, plain(getattr(x, f.name))) for f in fields(x)]
    return x


def work(d) -> tuple:
    """A DN's deliveries in progress (cqengine.core.delivery.delivery.Delivery)."""
    return d.retrying, d.unsent, d.homes_at


def peers(r) -> tuple:
    """What replication knows of its replicas (cqengine.core.home.replication.Replication)."""
    return r.confirmed, r.in_sync, r.replicas_were


def logs_state(e: EngineNode) -> list:
    """Each home key's log copy at the node (the home log), as its members' rules see it."""
    logs = e.home.logs
    if logs is None:
        return []
    return [
        (k, log.entries, log.promised, log.promised_to, log.committed)
        for k, log in sorted(logs.logs.items())
    ]


def state_digest(e: EngineNode) -> str:
    """A fingerprint of everything a node holds: its inverted lists, subscriptions with
    their mailboxes, record store (tombstones, unsubscriptions, held batches), documents
    held as DN, synopsis, batches in progress, counters, ring table and key store."""
    t, store, syn = e.chord.table, e.store, e.synopsis
    state = {
        "table": (t.predecessor, t.successors, t.fingers, e.chord.settled, e.chord.leaver_keys),
        "index": [(k, e.index.get(k)) for k in e.index.keys()],
        "subscriptions": e.subscriptions,
        "store": (
            store.entries.tombstones,
            store.homes.gone,
            store.batches.held,
            store.batches.held_since,
        ),
        "held": store.held_documents,
        "docs": [(k, d.docno, d.title, d.snippet, d.ids) for k, d in e.documents.docs.items()],
        "synopsis": (syn.entries, syn.changed_at, syn.clock),
        "work": (e.reports.gathering, e.dn.own, e.gossip.retiring) + work(e.reports.delivery),
        "peers": peers(e.replication) + (e.gossip.gossiped_to, e.gossip.indexed_with),
        "counters": {k: v for k, v in e.counters.items() if k != "messages_refused"},
        "logs": logs_state(e),
    }
    return hashlib.sha256(repr(plain(state)).encode()).hexdigest()


def digest_of(sim: EngineSimulator, node: EngineNode) -> tuple:
    """The receiver's state, and the work queued on the ring (a spawned operation)."""
    return state_digest(node), len(sim.ring.queue), len(sim.ring.clock.timers), len(sim.heard)
