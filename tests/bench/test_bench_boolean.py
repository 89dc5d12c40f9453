"""The boolean benchmark runs end to end on a small simulated ring, every alert checked
against the matcher (it exits if one differs), and its figures hang together."""

import json

from support.repo import load_script


def test_bench_boolean_small(tmp_path):
    bench = load_script("experiments/bench_boolean.py")
    out = tmp_path / "b.json"
    args = ["--nodes", "32", "--queries", "400", "--docs", "40", "--subscribers", "400"]
    assert bench.main(args + ["--distinct", "40", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = result["workloads"]
    assert set(rows) == {"conjunctive-td", "boolean-td", "conjunctive-bf", "boolean-bf"}
    for name, row in rows.items():
        assert row["alerts"] > 0 and row["per_document"]["Announce"]["messages"] > 0
        assert ("GetBloom" in row["per_document"]) == name.endswith("bf")
        asked = row["asked_negated_per_doc"] + row["asked_phrases_per_doc"]
        assert (asked > 0) == name.startswith("boolean")
    assert rows["boolean-td"]["alternatives"] > rows["conjunctive-td"]["alternatives"] == 400
    on, off = result["merging"]["on"], result["merging"]["off"]
    assert on["index_entries"] == off["index_entries"] == off["block_columns"]
    assert on["block_columns"] < off["block_columns"]  # shared queries, one column each
    assert on["candidates_per_doc"] < off["candidates_per_doc"]
    assert on["alerts"] == off["alerts"] > 0
