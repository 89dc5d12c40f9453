"""The failure benchmark runs on a small simulated ring and its figures hang together:
replicas lose fewer entries, and nothing that survived the failure is lost afterwards."""

import json

from support.repo import load_script


def test_bench_failures_small(tmp_path):
    bench = load_script("experiments/bench_failures.py")
    args = ["--nodes", "120", "--queries", "600", "--lookups", "200", "--replicas", "1,3"]
    assert bench.main(args + ["--fractions", "0.2,0.5", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "bench_failures.json").read_text())["rows"]
    assert (tmp_path / "bench_failures.png").stat().st_size > 0
    mean = {(r["replicas"], r["fraction_failed"]): r["entries_lost_mean"] for r in rows}
    for p in (0.2, 0.5):  # each entry is lost when all its R holders are: about p^R
        assert abs(mean[(1, p)] - p) < 0.1
        assert abs(mean[(3, p)] - p**3) < 0.05 and mean[(3, p)] < mean[(1, p)]
    for r in rows:
        assert r["nodes_failed"] == round(r["fraction_failed"] * 120)
        if r["rounds_to_converge"] is not None:  # what survived stays
            assert r["entries_lost_after_repair"] == r["entries_lost"]
        assert 0 <= r["keys_lost"] <= 1
        assert r["lookups_failed"] < 0.05  # the successor list routes around the dead
