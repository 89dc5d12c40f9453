"""The per-configuration benchmark runs every configuration asked for, alone, and says which
meet the goal."""

import json

from support.repo import load_script


def test_bench_configurations_small(tmp_path, capsys):
    bench = load_script("experiments/bench_configurations.py")
    out = tmp_path / "configurations.json"
    assert (
        bench.main(
            [
                "--strategies",
                "mhi,oi",
                "--workloads",
                "skew",
                "--resolutions",
                "td,bf",
                "--goal",
                "1e9",
                "--out",
                str(out),
                "--",
                "--docs",
                "40",
                "--queries",
                "400",
                "--nodes",
                "16",
            ]
        )
        == 0
    )
    r = json.loads(out.read_text())
    names = [c["configuration"] for c in r["configurations"]]
    assert names == ["mhi/skew/td/k=0", "mhi/skew/bf/k=0", "oi/skew/td/k=0", "oi/skew/bf/k=0"]
    for c in r["configurations"]:
        assert c["alerts_equal_matcher"] and c["under_goal"]
        assert 0 < c["index_seconds"] + c["publish_seconds"] <= c["seconds"]
        assert c["peak_memory_mib"]["main_mib"] > 0
    assert r["under_goal"] == 4
    # the two methods of a configuration present the same candidates and alert the same queries
    by = {c["configuration"]: c for c in r["configurations"]}
    for s in ("mhi", "oi"):
        td, bf = by[f"{s}/skew/td/k=0"], by[f"{s}/skew/bf/k=0"]
        assert (td["queries_per_doc"], td["alerts_per_doc"]) == (
            bf["queries_per_doc"],
            bf["alerts_per_doc"],
        )
    assert "4 of 4 configurations under" in capsys.readouterr().out


def test_bench_configurations_goal_and_failures(tmp_path, capsys):
    bench = load_script("experiments/bench_configurations.py")
    out = tmp_path / "c.json"
    assert (
        bench.main(
            [
                "--strategies",
                "mhi",
                "--workloads",
                "inverskew",
                "--goal",
                "0",
                "--out",
                str(out),
                "--",
                "--docs",
                "20",
                "--queries",
                "100",
                "--nodes",
                "8",
            ]
        )
        == 0
    )
    (c,) = json.loads(out.read_text())["configurations"]
    assert not c["under_goal"]  # nothing takes under 0 s
    assert (
        bench.main(
            ["--strategies", "mhi", "--workloads", "skew", "--out", str(out), "--", "--docs", "1"]
        )
        == 1
    )
    assert "mhi/skew/td failed" in capsys.readouterr().err
