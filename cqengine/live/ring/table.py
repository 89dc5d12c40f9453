"""The ring's table, as `ring up` and `ring status` print it: each node's address, id,
predecessor and successor, how many of its fingers the true ring has too, and its keys;
the nodes down after them."""

from __future__ import annotations

from chord.live.client import table_from_state
from chord.protocol.ids import short
from chord.protocol.messages import to_ref
from chord.simulation.oracle import RingOracle
from cqengine.live.ring.convergence import RingView


def format_table(view: RingView, r: int) -> str:
    rows = [("address", "id", "predecessor", "successor", "fingers ok", "keys")]
    oracle_tables = {}
    if view.states:
        oracle = RingOracle(to_ref(s.node) for s in view.states.values())
        oracle_tables = {a: oracle.table(to_ref(s.node), r) for a, s in view.states.items()}
    for address, s in sorted(view.states.items(), key=lambda kv: kv[1].node.id):
        t = table_from_state(s, r)
        good = sum(a == b for a, b in zip(t.fingers, oracle_tables[address].fingers))
        rows.append(
            (
                address,
                short(t.me.id),
                t.predecessor.address if t.predecessor else "-",
                t.successor.address,
                f"{good}/{len(t.fingers)}",
                str(s.keys),
            )
        )
    for address in view.down:
        rows.append((address, "-", "down", "-", "-", "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
