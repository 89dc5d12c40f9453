"""What a shell lends the protocol code that rides on one of its nodes: a Host.

The protocol core does no I/O and keeps no time of its own. Whatever it needs of the world
it asks its host: to run an operation in the background (`spawn`), to be called back later
(`later`), the time (`now`, for intervals; `clock`, wall time, for stamps shown to people,
never for correctness: a clock may be stepped), ids nobody guesses (`new_id`) and which
life of the node this is (`incarnation`, drawn at each start: what a node made before a
restart is told apart by it, not by a time). A live node lends its event loop and the
system's clocks (chord.live.server); the simulator lends its queue and a virtual clock
(chord.simulation.simulator), so that a seeded simulation repeats exactly, however fast it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chord.protocol.calls import Op


@dataclass(frozen=True)
class Host:
    spawn: Callable[[Op], None]  # run an operation in the background
    later: Callable[[float, Callable[[], None]], None]  # call fn after this many seconds
    now: Callable[[], float]  # seconds on a clock that never goes back (intervals)
    clock: Callable[[], float]  # wall-clock seconds since the epoch (stamps, metrics)
    new_id: Callable[[], int]  # 64 bits: unguessable on a live node, seeded in a simulation
    incarnation: int  # 64 bits, not 0: this life of the node, unlike any of its others
