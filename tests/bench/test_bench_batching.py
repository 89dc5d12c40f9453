"""The batch-size benchmark runs small: every batch's alerts equal the matcher's, and batches
cut the messages per document."""

import json

from support.repo import load_script


def test_bench_batching_small(tmp_path):
    bench = load_script("experiments/bench_batching.py")
    rc = bench.main(
        [
            "--nodes",
            "16",
            "--queries",
            "400",
            "--docs",
            "32",
            "--batches",
            "1,8",
            "--out",
            str(tmp_path),
        ]
    )
    result = json.loads((tmp_path / "bench_batching.json").read_text())
    assert rc == 0 and (tmp_path / "bench_batching.png").stat().st_size > 0
    runs = {(r["resolution"], r["batch"]): r for r in result["runs"]}
    assert set(runs) == {("td", 1), ("td", 8), ("bf", 1), ("bf", 8)}
    for r in runs.values():
        assert r["alerts_wrong"] == 0 and r["documents"] == 32
        assert r["batches_held_out"] == 0  # every batch's reports came back whole
        assert abs(sum(r["bytes_per_doc"].values()) - r["total_bytes_per_doc"]) < 1e-6
    for method in ("td", "bf"):
        one, eight = runs[method, 1], runs[method, 8]
        assert eight["messages_per_doc"]["Announce"] < one["messages_per_doc"]["Announce"]
        assert eight["total_messages_per_doc"] < one["total_messages_per_doc"]
        # a batch's alerts go once per home node, not once per report and home
        assert eight["messages_per_doc"]["Deliver"] < one["messages_per_doc"]["Deliver"]
        # a node with no query under the batch's ids hands its share back in the Announce
        # reply: not every node reached reports
        assert eight["messages_per_doc"]["Matched"] < eight["messages_per_doc"]["Announce"]
        assert (
            eight["candidates_per_doc"] == one["candidates_per_doc"]
        )  # batching prunes nothing differently
    assert (
        "GetBloom" not in runs["td", 1]["messages_per_doc"]
        and "GetBloom" in runs["bf", 1]["messages_per_doc"]
    )
