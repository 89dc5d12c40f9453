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
