"""The subscription benchmark runs end to end on a small ring and its figures hang together."""

import json

from support.repo import load_script


def test_bench_subscribe_small(tmp_path):
    bench = load_script("experiments/bench_subscribe.py")
    rc = bench.main(
        [
            *("--nodes", "2", "--subscriptions", "60", "--per-call", "25"),
            *("--docs", "40", "--vocab", "400", "--terms", "30", "--out", str(tmp_path)),
        ]
    )
    result = json.loads((tmp_path / "bench_subscribe.json").read_text())
    assert rc == 0 and result["placed_right"]
    assert result["placed"]["subscriptions"] == 120  # each phase's 60
    assert result["home_log"]  # the default: each home a log, no home record copied
    assert result["placed"]["replica_homes"] == 0
    single, batch = result["single"], result["batch"]
    for phase in (single, batch):
        assert phase["subscriptions"] == 60 and phase["refused"] == 0
        assert phase["subscriptions_per_second"] > 0
    assert single["cpu_seconds_per_subscription"] > 0  # (a batch's may be under a clock tick)
    # one query a call: an Index message each but for those the home owns; in batches, at
    # most one a call (3 calls of 25, 25 and 10)
    sent, batched = (
        single["messages_per_subscription_by_kind"],
        batch["messages_per_subscription_by_kind"],
    )
    assert batched["Index"] <= 3 / 60 < sent["Index"]
    assert batched["Replicate"] < sent["Replicate"]
    assert result["speedup"] == (
        batch["subscriptions_per_second"] / single["subscriptions_per_second"]
    )
