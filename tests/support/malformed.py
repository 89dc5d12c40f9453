"""Malformed messages made from genuine ones: requests of every kind captured from busy
rings, a registry of ways to break them (each test module of a message family registers
its own), the breaks of a query entry that several families carry, and the check that a
broken message is refused, counted and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import pytest
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

from chord.proto import chord_pb2 as chord_pb
from chord.protocol import checks as chord_checks
from chord.protocol.calls import Refused
from chord.protocol.node import ChordNode
from cqengine.core.basis import limits
from cqengine.core.frame import checks
from cqengine.core.node import ENGINE_SERVICE, EngineNode
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id
from support.busy_rings import LOG_MEMBERS, R, analyzed, busy_ring
from support.node_state import digest_of
from support.workloads import workload

LOG_METHODS = ("LogPromise", "LogAppend", "LogFetch", "LogLeave")

# ---- genuine messages, captured ------------------------------------------------------------


def shape(m: Message) -> tuple:
    """Which fields a message sets, repeated ones as none, one or more (of which shapes)."""
    out = []
    for f, v in m.ListFields():
        if isinstance(v, Message):
            out.append((f.name, shape(v)))
        elif isinstance(v, (str, bytes, int, float)):
            out.append((f.name,))
        else:
            kinds = frozenset(shape(x) for x in v if isinstance(x, Message))
            out.append((f.name, min(len(v), 2), kinds))
    return tuple(out)


def lagging_member_takes_over(sim: EngineSimulator) -> None:
    """A home's successor, cut off for a moment while the home appends (too short for the
    ring's maintenance to notice), takes its key over when the home fails: it fetches the
    entries it lacks (LogFetch)."""
    home = next(e for e in sim.engines.values() if e.home.logs.own)
    successor = home.chord.table.successor.address
    sim.ring.cut({successor})
    docs = analyzed(workload(1), sim.settings)
    sim.publish_batch([replace(d, docno=f"CUT-{d.docno}") for d in docs[:6]], via=home.me.address)
    sim.ring.heal()
    sim.fail([home.me.address])


class Captured(NamedTuple):
    sim: EngineSimulator
    samples: dict[str, list[tuple[str, Message]]]  # method -> (receiver, request)
    log_sim: EngineSimulator  # where the home log's messages were captured

    def ring(self, method: str) -> EngineSimulator:
        """The ring whose nodes received the samples of this method."""
        return self.log_sim if method in LOG_METHODS else self.sim

    def __repr__(self) -> str:  # as hypothesis reports a failing example
        return f"<{sum(map(len, self.samples.values()))} requests>"


def capture() -> Captured:
    """Genuine requests of every kind from a busy replicated ring (gossiping, resolving by
    filter), several of each shape, with the node that received each; and that ring."""
    seen: dict[str, dict[tuple, list[tuple[str, bytes]]]] = {}

    def keep(method: str, address: str, request) -> None:
        samples = seen.setdefault(method, {}).setdefault(shape(request), [])
        if len(samples) < 3:
            samples.append((address, request.SerializeToString()))

    engine_handle, chord_handle = EngineNode.handle, ChordNode.handle

    def handle_engine(self, method, request):
        if method in checks.CHECKS:
            keep(method, self.me.address, request)
        return engine_handle(self, method, request)

    def handle_chord(self, method, request):
        if method in chord_checks.CHECKS:
            keep(method, self.me.address, request)
        return chord_handle(self, method, request)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EngineNode, "handle", handle_engine)
        mp.setattr(ChordNode, "handle", handle_chord)
        # the home log's messages, from a ring of its own (its addresses are the same)
        log_sim, _, _ = busy_ring("mhi", "td", LOG_MEMBERS, seed=4, home_log=True)
        lagging_member_takes_over(log_sim)
        # a member leaves for good: the leaders of its logs move them to sets without it
        log_sim.ring.leave(sorted(log_sim.engines)[2])
        log_sim.settle()
        logged = {m: seen.pop(m) for m in LOG_METHODS}
        seen.clear()  # the other kinds, from the ring below
        sim, _, _ = busy_ring("sap-mhi", "bf", R, seed=4)
        docs = [replace(d, docno=f"NEW-{d.docno}") for d in analyzed(workload(1), sim.settings)]
        sim.publish_batch(docs[:12], via=sim.pick())  # alerts wait in mailboxes
        # a replica that lost entries, and a subscription with alerts waiting, is repaired
        victim = max(sim.engines.values(), key=lambda e: len(e.index))
        for key in victim.index.keys()[::2]:
            victim.index.remove(key, lambda x: True)
        held, sub = max(
            ((e, s) for e in sim.engines.values() for s in e.subscriptions.values()),
            key=lambda p: (not p[0].serves(p[1].key), len(p[1].mailbox.queue)),
        )
        del held.subscriptions[sub.id]  # a replica's copy
        sim.reconcile_round()
        # a home fails, and its alerts go to its successor before maintenance noticed
        sim.fail([max(sim.engines, key=lambda a: len(sim.engines[a].subscriptions))], False)
        for i in range(12, len(docs), 4):
            sim.publish_batch(docs[i : i + 4], via=sim.pick())
        # a node cut off publishes, and is found again up all along (Uptime): the DNs on
        # both sides announce their batches of the while again
        apart = sim.pick()
        sim.cut([apart])
        sim.publish_batch([replace(d, docno=f"APART-{d.docno}") for d in docs[:4]], via=apart)
        sim.heal()
    types = {m.name: GetMessageClass(m.input_type) for m in ENGINE_SERVICE.methods}
    types |= {
        "Notify": chord_pb.NotifyRequest,
        "Leave": chord_pb.LeaveRequest,
        "FindSuccessor": chord_pb.FindSuccessorRequest,
    }
    seen |= logged
    return Captured(
        sim,
        {
            method: [
                (a, types[method].FromString(data)) for same in by.values() for a, data in same
            ]
            for method, by in seen.items()
        },
        log_sim,
    )


# ---- ways to break them ---------------------------------------------------------------------

Breaker = Callable[[Any, EngineNode, Any], bool]  # (message, node, draw) -> applied?


class Breaks(dict[tuple[str, str], Breaker]):
    """A test module's ways to break genuine messages, by (method, name); a module
    registers each with `@breaks(method, name)`."""

    def __call__(self, method: str, name: str) -> Callable[[Breaker], Breaker]:
        def register(fn: Breaker) -> Breaker:
            self[(method, name)] = fn
            return fn

        return register

    def part(self, method: str, part: str, find: Callable[..., Any]):
        """Breaks of one part of a message, registered as "PART: NAME": `find(m, draw, **kw)`
        picks the part to break (None: the message has none, the break does not apply)."""

        def named(name: str, **kw):
            def register(fn) -> None:
                def apply(m, node, draw):
                    found = find(m, draw, **kw)
                    if found is None:
                        return False
                    fn(found, node, draw)
                    return True

                self(method, f"{part}: {name}")(apply)

            return register

        return named


def pick(draw, items):
    return items[draw(st.integers(0, len(items) - 1))] if len(items) else None


# query entries, wherever they travel (an Index request, an entry record)


def break_entry(e: pb.QueryEntry, node, draw, how: str) -> bool:
    if how == "no terms":
        del e.term_ids[:], e.terms[:]
    elif how == "terms and ids differ":
        del e.terms[-1]
    elif how == "too many terms":
        terms = sorted((f"t{i}" for i in range(limits.MAX_QUERY_TERMS + 1)), key=term_id)
        del e.term_ids[:], e.terms[:]
        e.terms.extend(terms)
        e.term_ids.extend(term_id(t) for t in terms)
        e.index_id = e.term_ids[0]
    elif how == "a term too long":
        e.terms[draw(st.integers(0, len(e.terms) - 1))] = "x" * (limits.MAX_TERM_BYTES + 1)
    elif how == "a term not its id":
        e.terms[draw(st.integers(0, len(e.terms) - 1))] += "x"
    elif how == "ids out of order":
        if len(set(e.term_ids)) < 2:
            return False
        ids = list(e.term_ids)
        e.term_ids[:] = ids[::-1]
        e.terms[:] = list(e.terms)[::-1]
    elif how == "indexed under no term":
        e.index_id = next(x for x in range(1, 99) if x not in e.term_ids)
    elif how == "bad home":
        e.home = draw(st.sampled_from(["bad home", "x" * 300, "caf\u00e9:1", "a\x00b"]))
    return True


ENTRY_BREAKS = (
    "no terms",
    "terms and ids differ",
    "too many terms",
    "a term too long",
    "a term not its id",
    "ids out of order",
    "indexed under no term",
    "bad home",
)


def counts_for_one_or_none(split: str) -> Breaker:
    """A message in columns whose `counts` split the column `split` by document: counts
    given for one document only, or none given for several."""

    def apply(m, node, draw):
        if m.counts:
            del m.counts[:]
        else:
            m.counts.append(len(getattr(m, split)))
        return True

    return apply


# ---- the check ------------------------------------------------------------------------------


def assert_refused_and_unchanged(captured: Captured, breaker: Breaker, method: str, data):
    """A genuine `method` request, the first of its samples (in an order drawn) that
    `breaker` has something to break in, broken so and handed to the node that received
    it: refused, counted, and the node and the work queued on its ring as they were."""
    sim, samples = captured.ring(method), captured.samples
    live = [(a, m) for a, m in samples[method] if a in sim.engines]
    for i in data.draw(st.permutations(range(len(live))), label="samples in order"):
        address, genuine = live[i]
        node = sim.engines[address]
        message = type(genuine)()
        message.CopyFrom(genuine)
        if breaker(message, node, data.draw):
            break  # else this sample has nothing of the kind to break: the next one
    else:
        pytest.fail(f"no genuine {method} message has anything to break so")
    before, count = digest_of(sim, node), node.counters["messages_refused"]
    with pytest.raises(Refused, match=f"^{method}: "):
        node.handle(method, message)
    assert node.counters["messages_refused"] == count + 1
    assert digest_of(sim, node) == before
