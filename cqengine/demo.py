"""`cqengine demo`: a small live ring, lookups from every node, checked against the truth."""

from __future__ import annotations

import io
import random
import sys
import tempfile
from pathlib import Path

from chord.client import lookup
from chord.node import to_ref
from chord.oracle import RingOracle
from cqengine.ring import observe, ring_down, ring_up


def run_demo(nodes: int = 8, lookups: int = 20, seed: int = 1) -> bool:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="cqengine-demo-") as tmp:
        ring_path = Path(tmp) / "ring.json"
        print(f"starting a {nodes}-node ring on loopback ...", flush=True)
        ring = ring_up(nodes, ring_path)
        try:
            view = observe(ring.addresses(), ring.r)
            oracle = RingOracle(to_ref(s.node) for s in view.states.values())
            print(f"\n{lookups} random-key lookups from each node, compared with the true owner:")
            wrong = 0
            for address in ring.addresses():
                hops = []
                for _ in range(lookups):
                    key = rng.getrandbits(64)
                    owner, h = lookup(address, key)
                    wrong += owner != oracle.owner(key)
                    hops.append(h)
                print(f"  from {address}: mean {sum(hops) / len(hops):.2f} hops, max {max(hops)}")
            total = nodes * lookups
            print(f"{total - wrong} of {total} lookups found the true owner")
        finally:
            ring_down(ring_path, out=io.StringIO())
            print("ring stopped")
    return wrong == 0
