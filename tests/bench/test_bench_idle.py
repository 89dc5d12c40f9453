"""The idle benchmark on a small ring: its stages and accounts add up to what the meters
counted, and the meters agree with the kernel's count of the nodes' CPU."""

import json

import pytest
from support.repo import load_script


def test_bench_idle_small(tmp_path):
    bench = load_script("experiments/bench_idle.py")
    args = ["--nodes", "3", "--subscriptions", "60", "--settle", "1", "--seconds", "3"]
    assert bench.main([*args, "--out", str(tmp_path)]) == 0
    got = json.loads((tmp_path / "bench_idle.json").read_text())
    total = got["cpu_seconds_a_second"]
    assert total > 0 and got["seconds"] >= 3
    assert sum(got["by_stage"].values()) == pytest.approx(total, abs=0.002)
    assert sum(got["by_account"].values()) == pytest.approx(total, abs=0.002)
    # the kernel counts in 10 ms ticks a process: over 3 s, 3 processes, a few percent
    assert got["process_cpu_seconds_a_second"] == pytest.approx(total, abs=0.03)
