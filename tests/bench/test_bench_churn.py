"""The churn benchmark runs on a small live ring: nodes joining and leaving while documents
are published lose no subscription and no alert, and repeat none."""

import json

from support.repo import load_script


def test_bench_churn_small(tmp_path):
    bench = load_script("experiments/bench_churn.py")
    rc = bench.main(
        [
            *("--nodes", "5", "--subscriptions", "150", "--seconds", "4", "--rate", "15"),
            *("--warmup", "1", "--gap", "1", "--settle", "15", "--call-timeout", "4"),
            *("--scenarios", "churn", "--out", str(tmp_path)),
        ]
    )
    (run,) = json.loads((tmp_path / "bench_churn.json").read_text())["runs"]
    assert run["scenario"] == "churn" and run["subscriptions"] == 150
    assert run["documents_accepted"] == 60 and run["alerts_expected"] > 100
    assert run["subscriptions_lost"] == 0
    assert (run["alerts_lost"], run["alerts_duplicated"], run["alerts_wrong"]) == (0, 0, 0)
    assert run["subscriptions_numbered_with_gaps"] == 0
    assert run["recovery_seconds_max"] is not None and run["repair_bytes"] > 0
    assert rc == 0


def test_the_nodes_killed_at_once_are_within_what_the_ring_promises():
    """No R of them consecutive (the index's copies), and, on the home log of M members,
    fewer than a majority of any M consecutive: a log whose majority is killed stops,
    which the home log's promise does not cover (docs/home-log.md, "Availability")."""
    import random

    bench = load_script("experiments/bench_churn.py")
    ring = bench.defaults()
    assert (ring.replicas, ring.home_log, ring.members) == (3, True, 5)  # what it runs
    order = [f"n{i}" for i in range(16)]
    for seed in range(20):
        victims = bench.survivable(order, 5, 3, 5, random.Random(seed))
        at = {order.index(v) for v in victims}
        assert len(at) == 5 and 0 not in at  # the first node is spared
        for i in range(16):
            assert sum((i + j) % 16 in at for j in range(3)) < 3
            assert sum((i + j) % 16 in at for j in range(5)) < 3
