"""Watching a ring from outside: every node's view of it, checked against the true ring
(chord.simulation.oracle) until it has converged; and every node's range, until it has
all its copies."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from chord.live.client import fetch_states, table_from_state
from chord.live.tls import Credentials
from chord.protocol.ids import short
from chord.simulation.oracle import ring_problems
from cqengine.live.client import Client, ClientError
from cqengine.live.ringfile import RingError


@dataclass
class RingView:
    states: dict  # address -> StateReply of every node that answered
    down: list[str]
    problems: list[str]
    credentials: Credentials | None = None  # what it was observed with

    @property
    def ok(self) -> bool:
        return bool(self.states) and not self.problems


def observe(
    addresses: list[str], r: int, timeout: float = 1.0, credentials: Credentials | None = None
) -> RingView:
    """Ask every known node, and every node they point at, for its view; check the ring."""
    known, states, down = list(addresses), {}, []
    pending = list(addresses)
    while pending:
        for address, state in fetch_states(pending, timeout, credentials).items():
            if state is None:
                down.append(address)
                continue
            states[address] = state
        pointed = {
            n.address
            for s in states.values()
            for n in [s.predecessor, *s.successors, *s.fingers]
            if n.address
        }
        pending = sorted(pointed - set(known))
        known += pending
    tables = [table_from_state(s, r) for s in states.values()]
    problems = ring_problems(tables, r) if tables else ["no node answers"]
    # a node that answers but points at a dead one is a problem the table check names already
    return RingView(
        states=states, down=sorted(set(down)), problems=problems, credentials=credentials
    )


def wait_converged(
    addresses: list[str],
    r: int,
    timeout: float,
    progress: Callable[[str], None] = lambda s: None,
    credentials: Credentials | None = None,
) -> RingView:
    deadline = time.monotonic() + timeout
    while True:
        view = observe(addresses, r, credentials=credentials)
        if view.ok and not view.down and len(view.states) == len(addresses):
            return view
        progress(
            f"converging: {len(view.states)}/{len(addresses)} nodes answer, "
            f"{len(view.problems)} problems left"
        )
        if time.monotonic() > deadline:
            first = view.problems[0] if view.problems else f"down: {', '.join(view.down)}"
            raise RingError(f"ring did not converge within {timeout:.0f}s ({first})")
        time.sleep(0.3)


def under_replicated(view: RingView, timeout: float = 2.0) -> list[str]:
    """The nodes whose range has fewer copies than the ring keeps (or the ring's size
    allows), as their last reconciliation with their replicas found: one line each."""

    def stats(address: str):
        try:
            with Client(address, timeout, view.credentials) as c:
                return c.stats()
        except ClientError:
            return None

    addresses = sorted(view.states, key=lambda a: view.states[a].node.id)
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(addresses)))) as pool:
        replies = dict(zip(addresses, pool.map(stats, addresses)))
    out = []
    for address, s in replies.items():
        if s is None:
            out.append(f"{address}: its engine does not answer")
            continue
        want = min(s.config.replicas, len(view.states))
        if s.copies < want:
            state = view.states[address]
            lo = short(state.predecessor.id) if state.HasField("predecessor") else "?"
            out.append(
                f"range ({lo}, {short(state.node.id)}] of {address} has {s.copies} of "
                f"{want} copies (its replicas have not all agreed with it yet)"
            )
    return out


def wait_replicated(
    view: RingView, timeout: float, progress: Callable[[str], None] = lambda s: None
) -> None:
    """Until every node's range has all its copies (a restarted ring's replicas reconcile)."""
    deadline = time.monotonic() + timeout
    while missing := under_replicated(view):
        progress(f"replicating: {len(missing)} ranges lack copies")
        if time.monotonic() > deadline:
            raise RingError(
                f"the ring was not fully replicated within {timeout:.0f}s ({missing[0]})"
            )
        time.sleep(0.3)
