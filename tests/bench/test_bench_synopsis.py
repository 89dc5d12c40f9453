"""The synopsis benchmark runs and its figures hang together."""

import json

from support.repo import load_script


def test_bench_synopsis_small(tmp_path):
    bench = load_script("experiments/bench_synopsis.py")
    bench.KS = (50, 100)
    assert (
        bench.main(
            [
                "--docs",
                "300",
                "--nodes",
                "16",
                "--gossip-k",
                "100",
                "--registers",
                "1,3",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    r = json.loads((tmp_path / "bench_synopsis.json").read_text())
    assert {(x["k"], x["hashes"]) for x in r["recall"]} == {(50, 1), (100, 1), (50, 3), (100, 3)}
    assert all(0 <= x["recall"] <= x["recall_ties_forgiven"] <= 1 for x in r["recall"])
    g = r["gossip"]
    assert g["rounds_to_converge"] == len(g["rounds"]) >= 1
    assert g["rounds"][-1]["nodes_converged"] == 16
    assert g["total_bytes_per_node"] > 0
