"""What a document costs a ring, by stage: the nodes' metered CPU time (chord.live.meter)
gathered into the stages of a document's path.

A node charges its CPU time to accounts: a request it handled (by method; a client's call
each step of its handler, chord.live.gate), a step of an operation (by the generator that
runs it, "op Class.method"), parsing and serializing messages, the ledger, commits to
storage, its alert streams, the analyzer's thread, and the steps of gRPC's calls and of the
links' streams as they run in Python (chord.live.meter.stepped), and what none of these
holds, by thread (chord.live.meter): gRPC's own threads, and the event loop's thread outside
every account (asyncio, the server's side of gRPC's calls, the code between an operation's
steps). STAGES names where each account goes; an account no rule names is "other", so
nothing is lost.

An operation's steps are charged to the generator that runs it, and a QN's matching and its
Term Dialogue rounds run inside the announcement's operation that reached it (QN.heard is
yielded from Announcer.announce): "announcement" holds them, and "resolution" is the DN's
side, answering the QNs' rounds. Splitting them needs an account inside the core's
operation, which the core (free of clocks) does not keep.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from chord.live.meter import UNMETERED, UNMETERED_GRPC, UNMETERED_WORKERS

# stage: the accounts it holds (names, or "op " prefixes of operations), in a document's order
STAGES: dict[str, tuple[str, ...]] = {
    "publishing (clients' calls)": ("Publish", "PublishBatch"),
    "analysis": ("analysis", UNMETERED_WORKERS),  # the analyzer's thread, whole
    "announcement": (
        *("op DN.publish_batch", "op DN.send_out", "Announce", "op Announcer.", "Uptime"),
    ),
    "resolution": ("GetBloom", "TermDialogue"),
    "reports": ("Matched", "op DN."),
    "delivery": ("op Delivery.",),
    "home and mailbox": ("Deliver", "op Home."),
    "replication": ("Replicate", "Reconcile", "Repair", "Release", "op Replication."),
    "storage": ("storage",),
    "streaming to clients": ("stream", "StreamAlerts", "AckAlerts"),
    "protobuf (parse, serialize)": ("parse", "serialize"),
    "gRPC's Python side (calls, links)": ("grpc calls", "links"),
    "gRPC's own threads (sockets, TLS, timers)": (UNMETERED_GRPC,),
    "event loop, outside every account": (UNMETERED,),
    "metrics": ("metrics", "Stats"),  # not a document's: scrapes (cqengine.live.metrics)
    "subscribing": ("Subscribe", "SubscribeBatch", "Unsubscribe"),  # nor these
}


def stage_of(account: str) -> str:
    """The stage an account belongs to: the first rule naming it exactly, else the longest
    prefix among the operations' rules, else "other"."""
    best, length = "other", 0
    for stage, rules in STAGES.items():
        for rule in rules:
            if account == rule:
                return stage
            prefix = rule.startswith("op ") and rule.endswith(".") and account.startswith(rule)
            if prefix and len(rule) > length:
                best, length = stage, len(rule)
    return best


def cost_by_stage(accounts: Mapping[str, float]) -> dict[str, float]:
    """Accounts' costs summed by stage, in STAGES' order (then "other")."""
    out: Counter = Counter()
    for account, cost in accounts.items():
        out[stage_of(account)] += cost
    return {stage: out[stage] for stage in [*STAGES, "other"] if stage in out}
