"""The live benchmark runs end to end on a small ring and its figures hang together."""

import json

from conftest import load_script


def test_bench_live_small(tmp_path):
    bench = load_script("experiments/bench_live.py")
    rc = bench.main(["--nodes", "3", "--queries", "60", "--docs", "20", "--concurrency", "2",
                     "--vocab", "400", "--terms", "30", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "bench_live.json").read_text())
    assert rc == 0 and result["alerts_equal_matcher"]
    assert result["alerts"] == result["alerts_expected"] > 0
    assert result["documents"] == 20 and result["queries"] == 60
    assert 0 < result["latency_p50_ms"] <= result["latency_p99_ms"]
    by_kind = result["bytes_per_document_by_kind"]
    assert abs(sum(by_kind.values()) - result["engine_bytes_per_document"]) < 1e-6
    assert by_kind["Announce"] > 0 and "GetBloom" not in by_kind  # td resolution by default
