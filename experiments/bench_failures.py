"""Simultaneous failures in the simulator, as in the Chord paper's figure: lookups that fail
and index entries lost when a fraction p of a 1,000-node ring fails at once, for R copies.

For each number of copies R, a ring of N engine nodes (the engine's own code, replicas
placed by its own replication) gets Q subscriptions; then, for each p, a fresh such ring
has round(p * N) random nodes fail at once, and before any maintenance has run:

- lookups: L lookups of random keys from random live nodes (verified: the owner found is
  pinged, and a dead hop is routed around, as live nodes do); one fails when it does not
  find the key's owner among the live nodes;
- entries lost: subscriptions none of whose index entry's copies is on a live node; keys
  lost: inverted lists (one per indexing term) none of whose copies is; the entries of a
  popular term share its fate, so entries lost vary more than keys lost;
- subscriptions lost: subscriptions none of whose home record's copies is on a live node.

The losses of that one failure vary much from one set of failed nodes to the next (the
lists of popular terms are few and long), so each is also given as its mean over --trials
random sets of failed nodes, read off where the copies are; the figure shows the means.

Then the ring's maintenance runs until it is correct again (or 200 rounds: with r = 8
successors, a node whose whole list failed may stay cut off, as the Chord paper warns),
every node reconciles its range once, and the entries still held are counted again
(nothing lost can come back, and nothing that survived may go).

    python experiments/bench_failures.py [--nodes 1000] [--queries 10000] [--lookups 2000]
        [--replicas 1,3,5] [--fractions 0.1,0.2,0.3,0.4,0.5] [--seed 1] [--out DIR]

Writes experiments/results/bench_failures.json and bench_failures.png.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_frequencies
from cqengine.text.analysis import analyze
from cqengine.text.corpus import generate_corpus
from cqengine.text.workload import generate_queries

RESULTS = Path(__file__).resolve().parent / "results"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def subscribed_ring(nodes: int, replicas: int, queries: list[list[str]], seed: int):
    sim = EngineSimulator(nodes, Settings(replicas=replicas, seed=seed), seed=seed)
    vias = sorted(sim.engines)
    rng = random.Random(seed)
    with sim.ring.instant_lookups():  # placing the entries: no lookup is measured here
        subs = [sim.subscribe_terms(q, via=rng.choice(vias)).subscription_id for q in queries]
    return sim, subs


def held(sim: EngineSimulator) -> tuple[set[int], set[int]]:
    """The subscriptions whose entry, and whose home record, some live node holds."""
    entries, homes = set(), set()
    for e in sim.engines.values():
        for key in e.index.keys():
            entries.update(x.subscription_id for x in e.index.get(key))
        homes.update(e.subscriptions)
    return entries, homes


def index_keys(sim: EngineSimulator) -> set[int]:
    """The keys some live node holds entries under."""
    return {key for e in sim.engines.values() for key in e.index.keys()}


def holders(sim: EngineSimulator) -> tuple[dict, dict, dict]:
    """Where each subscription's entry, each key's list and each home record is held."""
    entries, keys, homes = defaultdict(set), defaultdict(set), defaultdict(set)
    for a, e in sim.engines.items():
        for key in e.index.keys():
            keys[key].add(a)
            for x in e.index.get(key):
                entries[x.subscription_id].add(a)
        for sub in e.subscriptions:
            homes[sub].add(a)
    return entries, keys, homes


def expected_losses(sim: EngineSimulator, p: float, trials: int, rng: random.Random) -> dict:
    """Entries, keys and subscriptions lost, averaged over `trials` random sets of failed
    nodes (what is lost follows from where the copies are: no failure needs to run)."""
    places = holders(sim)
    addresses = sorted(sim.engines)
    out = defaultdict(float)
    for _ in range(trials):
        failed = set(rng.sample(addresses, round(p * len(addresses))))
        for name, held_at in zip(("entries", "keys", "subscriptions"), places):
            out[name] += sum(nodes <= failed for nodes in held_at.values()) / len(held_at)
    return {f"{name}_lost_mean": total / trials for name, total in out.items()}


def measure(args, replicas: int, p: float, queries) -> dict:
    t0 = time.perf_counter()
    sim, subs = subscribed_ring(args.nodes, replicas, queries, args.seed)
    all_keys = index_keys(sim)
    rng = random.Random(f"{args.seed}/{replicas}/{p}")
    means = expected_losses(sim, p, args.trials, rng)
    failed = rng.sample(sorted(sim.engines), round(p * args.nodes))
    sim.fail(failed, converge=False)
    oracle = sim.ring.oracle()
    live = sorted(sim.engines)
    wrong = 0
    for _ in range(args.lookups):
        key = rng.getrandbits(64)
        owner, _ = sim.ring.lookup(rng.choice(live), key, verify=True)
        wrong += owner != oracle.owner(key)
    entries, homes = held(sim)
    keys = index_keys(sim)
    try:
        rounds = sim.fail([])  # maintenance until the ring is correct again
        sim.reconcile_round()
        after, _ = held(sim)
    except RuntimeError:  # a node whose whole successor list failed may be cut off for good
        rounds, after = None, None
    row = {
        "replicas": replicas,
        "fraction_failed": p,
        "nodes_failed": len(failed),
        "lookups": args.lookups,
        "lookups_failed": wrong / args.lookups,
        "entries_lost": 1 - len(entries & set(subs)) / len(subs),
        "keys_lost": 1 - len(keys) / len(all_keys),
        "subscriptions_lost": 1 - len(homes & set(subs)) / len(subs),
        "entries_lost_after_repair": None
        if after is None
        else 1 - len(after & set(subs)) / len(subs),
        "rounds_to_converge": rounds,
        "trials": args.trials,
        **means,
        "seconds": time.perf_counter() - t0,
    }
    say(
        f"R={replicas} p={p:.1f}: lookups failed {row['lookups_failed']:.4f}, entries lost "
        f"{row['entries_lost']:.5f}, subscriptions lost {row['subscriptions_lost']:.5f} "
        f"({row['seconds']:.0f}s)"
    )
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in sorted({row["replicas"] for row in rows}):
        mine = [row for row in rows if row["replicas"] == r]
        ps = [row["fraction_failed"] for row in mine]
        left.plot(
            ps, [row["lookups_failed"] for row in mine], marker="o", label=f"in the run of R={r}"
        )
        lost = [max(row["keys_lost_mean"], 1e-6) for row in mine]
        right.plot(ps, lost, marker="o", label=f"inverted lists lost, R={r}")
        color = right.lines[-1].get_color()
        entries = [max(row["entries_lost_mean"], 1e-6) for row in mine]
        right.plot(ps, entries, marker="x", ls=":", color=color, label=f"entries lost, R={r}")
        right.plot(ps, [p**r for p in ps], "--", color=color, alpha=0.4)
    left.set_xlabel("fraction of nodes failed at once")
    left.set_ylabel("fraction of lookups that fail")
    left.set_title("Lookups before maintenance (one failure set each; R plays no part)")
    left.set_ylim(bottom=0)
    right.set_xlabel("fraction of nodes failed at once")
    right.set_ylabel("fraction lost (no live copy; 1e-6: none)")
    right.set_yscale("log")
    right.set_title("Lost, mean of the trials; dashed: p^R")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--queries", type=int, default=10_000)
    p.add_argument("--lookups", type=int, default=2000)
    p.add_argument("--trials", type=int, default=20, help="failure sets averaged for the losses")
    p.add_argument("--replicas", default="1,3,5")
    p.add_argument("--fractions", default="0.1,0.2,0.3,0.4,0.5")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    corpus = list(generate_corpus(300, seed=args.seed))
    df = document_frequencies(corpus)
    queries = [
        analyze(" ".join(q))
        for q in generate_queries(df, args.queries, "skew", mean_size=5.0, seed=args.seed)
    ]
    rows = [
        measure(args, int(r), float(f), queries)
        for r in args.replicas.split(",")
        for f in args.fractions.split(",")
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "bench_failures",
        "command": "python experiments/bench_failures.py " + " ".join(argv or sys.argv[1:]),
        "nodes": args.nodes,
        "queries": args.queries,
        "successor_list": 8,
        "rows": rows,
    }
    (args.out / "bench_failures.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(rows, args.out / "bench_failures.png")
    print(
        f"{'R':>2} {'p':>4} {'lookups failed':>14} {'lists lost':>10} {'entries lost':>12} "
        f"{'subs lost':>10}  (means of the trials)"
    )
    for row in rows:
        print(
            f"{row['replicas']:>2} {row['fraction_failed']:>4.1f} {row['lookups_failed']:>14.4f} "
            f"{row['keys_lost_mean']:>10.5f} {row['entries_lost_mean']:>12.5f} "
            f"{row['subscriptions_lost_mean']:>10.5f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
