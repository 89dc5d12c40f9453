"""The replica intake benchmark takes every copy with no gap and empties every mailbox
again (it refuses to report otherwise), and reports a cost per alert."""

import json

from support.repo import load_script


def test_bench_replica_intake_small(tmp_path):
    bench = load_script("experiments/bench_replica_intake.py")
    args = ["--subscriptions", "300", "--docs", "8", "--per-doc", "40", "--rounds", "3"]
    assert bench.main([*args, "--repeat", "2", "--out", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "bench_replica_intake.json").read_text())
    assert r["alerts"] == 3 * 8 * 40
    assert r["us_per_alert_taken"] > 0 and r["us_per_alert_acknowledged"] > 0
    parts = r["us_per_alert_taken"] + r["us_per_alert_acknowledged"] + r["us_per_alert_folded"]
    assert abs(r["us_per_alert"] - parts) < 1e-9
