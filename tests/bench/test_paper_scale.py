"""Paper scale (make test-slow): one configuration of the paper's evaluation, whole."""

import json

import pytest
from support.repo import load_script


@pytest.mark.slow(reason="paper scale: 1,000 nodes, 100,000 queries, 10,000 documents")
@pytest.mark.timeout(1800)
def test_one_paper_scale_configuration_equals_the_matcher(tmp_path):
    """1,000 nodes, 100,000 Skew queries, 10,000 TREC-AP-like documents, MHI with Term
    Dialogue and Bloom filters: every one of the ~3 million alerts equals the matcher's."""
    bench = load_script("experiments/bench_sim.py")
    assert bench.main(["--out", str(tmp_path / "bench.json")]) == 0
    r = json.loads((tmp_path / "bench.json").read_text())
    assert [run["name"] for run in r["runs"]] == ["mhi/skew/td/k=0", "mhi/skew/bf/k=0"]
    for run in r["runs"]:
        o = run["oracle"]
        assert o["expected"] > 1_000_000 and o["alerted"] == o["expected"]
        assert not o["missing"] and not o["unexpected"] and not o["disagreements"]
        assert run["metrics"]["documents"] == 10_000
    assert r["corpus"]["vocabulary"] > 40_000
