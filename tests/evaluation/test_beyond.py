"""`cqengine experiment beyond`: every configuration with and without the techniques
beyond the paper, every run's alerts the matcher's (a run that differs stops the
experiment), its report, JSON and figure written, and the goals judged from the runs."""

from __future__ import annotations

import json

import pytest

from cqengine.evaluation import EvaluationError
from cqengine.evaluation.reports import beyond
from cqengine.evaluation.setup.inputs import generated
from cqengine.evaluation.setup.scale import Scale


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("beyond")
    corpus = generated(80, 4, 500, 30)
    scale = Scale(nodes=16, queries=400, docs=80, seed=4, mean_size=3, workers=2)
    files = beyond.beyond(corpus, scale, out, "test", quiet=True, headers=64)
    return files, json.loads((out / "beyond.json").read_text())


def test_every_configuration_runs_with_each_technique_and_is_reported(report):
    files, data = report
    assert all(f.exists() and f.stat().st_size for f in files)
    techniques = ("paper", "headers", "balanced", "filters", "merged", "all")
    assert set(data["runs"]) == {f"{c}/{t}" for c in beyond.CONFIGURATIONS for t in techniques}
    md = files[0].read_text()
    assert all(name in md for name in data["runs"])


def test_merging_changes_no_byte(report):
    _, data = report
    for c in beyond.CONFIGURATIONS:
        paper, merged = data["runs"][f"{c}/paper"], data["runs"][f"{c}/merged"]
        assert merged["bytes_per_doc_by_kind"] == paper["bytes_per_doc_by_kind"]
        assert merged["alerts"] == paper["alerts"]


def test_headers_prune_without_changing_matches(report):
    _, data = report
    runs = data["runs"]
    for c in beyond.CONFIGURATIONS:
        paper, headers = runs[f"{c}/paper"], runs[f"{c}/headers"]
        assert headers["alerts"] == paper["alerts"] > 0  # each checked against the matcher
        assert headers["candidates_per_doc"] < paper["candidates_per_doc"]
        assert headers["header_bytes_per_doc"] > 0 == paper["header_bytes_per_doc"]
        # the header is the only thing added to the announcement
        extra = headers["announcement_bytes_per_doc"] - paper["announcement_bytes_per_doc"]
        assert extra == pytest.approx(headers["header_bytes_per_doc"])


def test_filters_spare_announcements_without_changing_alerts(report):
    _, data = report
    runs = data["runs"]
    for c in beyond.CONFIGURATIONS:
        paper, filters = runs[f"{c}/paper"], runs[f"{c}/filters"]
        assert filters["alerts"] == paper["alerts"]
        assert (
            filters["announcements_filtered_per_doc"] > 0 == paper["announcements_filtered_per_doc"]
        )
        assert filters["announcement_messages_per_doc"] < paper["announcement_messages_per_doc"]


def test_techniques_can_be_chosen_and_the_paper_always_runs():
    assert list(beyond.chosen_techniques(("filters",))) == ["paper", "filters"]
    with pytest.raises(EvaluationError, match="unknown technique bogus"):
        beyond.chosen_techniques(("bogus", "headers"))


def test_balanced_ids_even_out_the_regions_without_changing_alerts(report):
    """OI's lists are short: its load follows the regions, which balanced ids even out."""
    _, data = report
    runs = data["runs"]
    for c in beyond.CONFIGURATIONS:
        assert runs[f"{c}/balanced"]["alerts"] == runs[f"{c}/paper"]["alerts"]
        both = runs[f"{c}/all"]
        assert both["load_p1_p50_p99"] == runs[f"{c}/balanced"]["load_p1_p50_p99"]
        assert both["header_bytes_per_doc"] > 0
    ratio = {
        t: data["verdicts"][f"oi/td/{t}"]["load_p99_over_median"] for t in ("paper", "balanced")
    }
    assert ratio["balanced"] < ratio["paper"]


def test_goals_follow_from_the_runs(report):
    _, data = report
    runs, verdicts = data["runs"], data["verdicts"]
    base = runs["ri/td/paper"]
    for name, m in runs.items():
        v = verdicts[name]
        assert v["engine_share"] == pytest.approx(
            100 * m["engine_bytes_per_doc"] / base["engine_bytes_per_doc"]
        )
        assert v["candidates_over_matches"] == pytest.approx(
            m["candidates_per_doc"] / m["matches_per_doc"]
        )
    assert verdicts["ri/td/paper"]["engine_share"] == pytest.approx(100)


def test_a_run_whose_alerts_differ_from_the_matchers_stops_the_experiment(monkeypatch):
    corpus = generated(40, 5, 300, 20)
    inputs = beyond.Inputs(corpus, Scale(nodes=8, queries=100, docs=40, seed=5), quiet=True)
    real = inputs.oracle("skew")
    monkeypatch.setattr(inputs, "oracle", lambda kind: [hits[1:] for hits in real])
    with pytest.raises(EvaluationError, match="differ from the matcher"):
        beyond.measure(inputs, beyond.settings_for(inputs, "oi/td", {"header_terms": 16}))
