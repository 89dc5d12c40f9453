"""The routing benchmark runs, checks every lookup, and shows Chord's ½·log2 N path length."""

import json
import math

import pytest
from support.repo import load_script


def bench():
    return load_script("experiments/bench_routing.py")


def run(tmp_path, sizes, lookups):
    assert (
        bench().main(
            [
                "--sizes",
                ",".join(map(str, sizes)),
                "--lookups",
                str(lookups),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert (tmp_path / "bench_routing.png").stat().st_size > 0
    return json.loads((tmp_path / "bench_routing.json").read_text())["rows"]


def check(rows, sizes):
    assert {(row["nodes"], row["successors"]) for row in rows} == {
        (n, r) for n in sizes for r in (1, 8)
    }
    for row in rows:
        assert row["p1"] <= row["p50"] <= row["p99"] <= row["max"]
        assert row["p1"] <= row["mean"] <= row["max"]
        # iterative lookups: each hop is one request and one reply
        assert row["messages_per_lookup"] == pytest.approx(2 * row["mean"])
    by = {(row["nodes"], row["successors"]): row for row in rows}
    for n in sizes:
        # fingers alone: Chord's ½·log2 N; a longer successor list can only shorten paths
        assert abs(by[n, 1]["mean"] - 0.5 * math.log2(n)) < 0.4
        assert by[n, 8]["mean"] < by[n, 1]["mean"]


def test_benchmark_small(tmp_path):
    sizes = [16, 256, 1024]
    check(run(tmp_path, sizes, 1500), sizes)


@pytest.mark.slow(reason="paper scale: lookups on rings of up to 4,096 nodes")
def test_benchmark_full_scale(tmp_path):
    sizes = bench().DEFAULT_SIZES
    check(run(tmp_path, sizes, 4000), sizes)
