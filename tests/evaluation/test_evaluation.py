"""`cqengine experiment`: every experiment runs (--quick), its numbers follow from the ledger,
every run's alerts equal the matcher's, and sharing an indexed ring among runs and workers
changes nothing."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.command_line import assert_one_line_error, cqengine

from cqengine.core.terms.settings import Settings
from cqengine.evaluation import EvaluationError
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.passes.lab import Lab
from cqengine.evaluation.passes.runs import IndexSpec, RunSpec, passes, place
from cqengine.evaluation.reports.experiments import WORKLOADS, Plan, reduction
from cqengine.evaluation.setup.forks import Background
from cqengine.evaluation.setup.inputs import generated, popular_ranking
from cqengine.evaluation.setup.scale import Scale

FILES = {
    "table2": ["table2.png"],
    "piggyback": ["figure3.png"],
    "synopsis": ["figure4.png", "figure5.png"],
    "breakdown": ["figure6.png"],
}
RESOLUTION = ("TermDialogue", "GetBloom")


@pytest.fixture(scope="module")
def quick_all(tmp_path_factory):
    out = tmp_path_factory.mktemp("all")
    proc = cqengine("experiment", "all", "--quick", "--out", out, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def reports(out):
    return {name: json.loads((out / f"{name}.json").read_text()) for name in FILES}


def test_all_quick_writes_every_report_figure_and_json(quick_all):
    out, proc = quick_all
    for name, pngs in FILES.items():
        md = (out / f"{name}.md").read_text()
        assert md.startswith("# ") and "## Differences from the paper" in md and "## Oracle" in md
        for png in pngs:
            assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"{name}.json" in proc.stdout
    assert "publishing" in proc.stderr and "indexing" in proc.stderr  # progress is shown


def kinds_total(ledger, methods):
    picked = [v for k, v in ledger.items() if k.split(".")[0] in methods]
    return sum(v[0] for v in picked), sum(v[1] for v in picked)


def test_every_run_agrees_with_the_ledger_and_the_matcher(quick_all):
    for name, data in reports(quick_all[0]).items():
        assert data["runs"], name
        for run_name, run in data["runs"].items():
            m = run["metrics"]
            d = m["documents"]
            msgs, nbytes = kinds_total(m["ledger"], RESOLUTION)
            assert m["resolution_bytes_per_doc"] * d == pytest.approx(nbytes)
            assert m["resolution_messages_per_doc"] * d == pytest.approx(msgs)
            assert m["announce_bytes_per_doc"] * d == pytest.approx(
                kinds_total(m["ledger"], ("Announce",))[1]
            )
            assert m["bloom_filters_per_doc"] * d == pytest.approx(
                m["ledger"].get("GetBloom", [0, 0])[0]
            )
            assert m["bloom_bytes_per_doc"] * d == pytest.approx(
                kinds_total(m["ledger"], ("GetBloom",))[1]
            )
            if run["spec"]["resolution"] == "td":
                assert "GetBloom" not in m["ledger"]
            o = run["oracle"]
            assert (
                o["missing"] == o["unexpected"] == o["wrong_docno"] == 0
                and o["alerted"] == o["expected"]
            )
            if run["published"] == run["documents"]:
                # the per-document accounts add up to what the ring's ledger counted
                assert m["ledger"] == {k: v for k, v in run["ledger_whole_run"].items()}, run_name
                assert m["alerts_per_doc"] * d == pytest.approx(o["alerted"])


def metric(data, name, key):
    return data["runs"][name]["metrics"][key]


def test_tables_follow_from_the_runs(quick_all):
    r = reports(quick_all[0])
    t2 = r["table2"]
    for w in WORKLOADS:
        rows = t2["results"]["workloads"][w]["rows"]
        for _s, row in rows.items():
            assert (
                row["queries_per_doc"]
                == metric(t2, row["runs"]["td"], "queries_per_doc")
                == metric(t2, row["runs"]["bf"], "queries_per_doc")
            )
            assert row["td_bytes_per_doc"] == metric(
                t2, row["runs"]["td"], "resolution_bytes_per_doc"
            )
            assert row["bf_bytes_per_doc"] == metric(
                t2, row["runs"]["bf"], "resolution_bytes_per_doc"
            )
            assert row["load"] == t2["runs"][row["runs"]["td"]]["load_percentiles"]
        red = t2["results"]["workloads"][w]["reductions"]["MHI over RI"]
        assert red["td"] == pytest.approx(
            reduction(rows["ri"]["td_bytes_per_doc"], rows["mhi"]["td_bytes_per_doc"])
        )
    pig = r["piggyback"]["results"]
    assert [row["k"] for row in pig["rows"]] == list(range(11))
    for row in pig["rows"]:
        assert row["saving_over_ri"]["bf"] == pytest.approx(
            reduction(pig["ri"]["bf_bytes_per_doc"], row["mhi"]["bf_bytes_per_doc"])
        )
    # more piggybacked ids never present more queries (Algorithm 4 only ever prunes)
    presented = [row["mhi"]["queries_per_doc"] for row in pig["rows"]]
    assert presented == sorted(presented, reverse=True)
    syn = r["synopsis"]["results"]["workloads"]
    for w in WORKLOADS:
        for row in syn[w]["rows"]:
            assert row["reduction_over_mhi"]["queries"] == pytest.approx(
                reduction(syn[w]["mhi"]["queries_per_doc"], row["sap_mhi"]["queries_per_doc"])
            )
    for parts in (r["breakdown"]["results"]["workloads"][w]["parts"] for w in WORKLOADS):
        for p in parts.values():
            assert p["mhi"] + p["sampling"] + p["piggybacking"] == pytest.approx(p["total"])


def small_lab(workers):
    corpus = generated(60, 5, 400, 25)
    return Lab(
        corpus,
        Scale(nodes=12, queries=150, docs=60, seed=3, mean_size=3, workers=workers),
        quiet=True,
    )


def test_runs_do_not_depend_on_workers_or_on_sharing_the_indexed_ring():
    specs = [
        RunSpec(IndexSpec("mhi", "skew"), "bf", 2),
        RunSpec(IndexSpec("ri", "skew"), "td", 0, "second"),
    ]
    one, two = small_lab(1).run(specs), small_lab(2).run(specs)
    for s in specs:
        assert np.array_equal(one[s].positions, two[s].positions)
        for k in one[s].per_doc:
            assert np.array_equal(one[s].per_doc[k], two[s].per_doc[k]), k
        assert one[s].oracle == two[s].oracle
    # the shared, forked ring gives what a ring built afresh with the run's settings gives
    lab = small_lab(2)
    s = specs[0]
    shared = lab.run([s])[s]
    settings = Settings(
        strategy="mhi", resolution="bf", piggyback=2, df=lab.corpus.df, seed=3
    ).validate()
    sim = EngineSimulator(12, settings, seed=3)
    addresses = sorted(sim.engines)
    for i, q in enumerate(lab.workload("skew")):
        sim.subscribe_terms(q, via=addresses[place(3, "query", i, 12)])
    for j, docno in enumerate(lab.corpus.docnos):
        rep = sim.publish_terms(
            docno, lab.corpus.terms[j], via=addresses[place(3, "doc", docno, 12)]
        )
        assert rep.candidates == shared.per_doc["candidates"][j]
        assert {k: (c.messages, c.bytes) for k, c in rep.kinds.items()} == {
            k[:-9]: (int(shared.per_doc[k][j]), int(shared.per_doc[k[:-8] + "bytes"][j]))
            for k in shared.per_doc
            if k.endswith(":messages") and shared.per_doc[k][j]
        }


def test_synopsis_rankings_nest_and_k_scales_with_the_vocabulary():
    corpus = generated(80, 2, 500, 30)
    big = popular_ranking(corpus, range(40), 50)
    assert popular_ranking(corpus, range(40), 20) == big[:20]
    assert len(set(big)) == 50
    plan = Plan.scaled(Scale(), 4665)
    assert plan.synopsis_ks == (50, 100, 150, 200, 250, 300) and plan.synopsis_k == 100


def test_bad_requests_fail_in_one_line(tmp_path):
    assert_one_line_error(cqengine("experiment", "table2", "--out", tmp_path), "give --corpus DIR")
    assert_one_line_error(
        cqengine("experiment", "table2", "--corpus", tmp_path, "--out", tmp_path),
        "no documents.parquet here",
    )
    assert_one_line_error(
        cqengine("experiment", "figure9", "--quick", "--out", tmp_path), "invalid choice"
    )
    for flag in ("--nodes", "--workers", "--docs"):
        assert_one_line_error(
            cqengine("experiment", "table2", "--quick", flag, "0", "--out", tmp_path),
            f"argument {flag}: '0' must be positive",
        )


def test_an_out_dir_it_cannot_write_fails_before_any_run(tmp_path):
    (tmp_path / "file").write_text("")
    proc = cqengine("experiment", "table2", "--quick", "--out", tmp_path / "file" / "reports")
    assert_one_line_error(
        proc, "cannot write the reports into"
    )  # one line: no progress of a run before it
    assert not (tmp_path / "file" / "reports").exists()


def test_quick_takes_the_scale_it_is_given(tmp_path):
    proc = cqengine(
        "experiment",
        "table2",
        "--quick",
        "--nodes",
        "16",
        "--queries",
        "300",
        "--docs",
        "40",
        "--mean-size",
        "3",
        "-q",
        "--out",
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "table2.json").read_text())
    scale = data["plan"]["scale"]
    assert (scale["nodes"], scale["queries"], scale["docs"], scale["mean_size"]) == (
        16,
        300,
        40,
        3.0,
    )
    assert data["corpus"]["documents"] == 40  # the generated corpus is as big as asked
    assert all(
        run["metrics"]["documents"] == 40
        for run in data["runs"].values()
        if run["documents"] == "all"
    )


def test_one_pass_measures_every_method_and_depth_as_runs_of_their_own_would(tmp_path, monkeypatch):
    from cqengine.evaluation.measuring.measure import Shadows

    echoed, real = tmp_path / "echoed", Shadows._echo

    def noting(self, node, outcome, tag):  # the workers are forked: they note it in a file
        if outcome.measured:
            with echoed.open("a") as f:
                f.write(f"{tag}\n")
        real(self, node, outcome, tag)

    monkeypatch.setattr(Shadows, "_echo", noting)
    mhi = [RunSpec(IndexSpec("mhi", "skew"), r, k) for k in (0, 2, 5) for r in ("td", "bf")]
    specs = (
        mhi
        + [RunSpec(IndexSpec("mhi", "skew"), "td", 1)]
        + [RunSpec(IndexSpec("ri", "uniform"), r, 0, "second") for r in ("bf", "td")]
    )
    # the skew workload's other indexes ride on the mhi pass as shadow indexes, over all
    # documents or the second half, at depths of their own
    shadows = [
        RunSpec(IndexSpec("ri", "skew"), "td", 0, "second"),
        RunSpec(IndexSpec("oi", "skew"), "bf", 2),
        RunSpec(IndexSpec("sap-mhi", "skew", 20), "td", 5, "second"),
    ]
    specs += shadows
    together = small_lab(2).run(specs)
    for s in specs:
        alone = small_lab(2).run([s])[s]
        both = together[s]
        assert np.array_equal(both.positions, alone.positions)
        assert both.per_doc.keys() == alone.per_doc.keys()
        for k in alone.per_doc:
            assert np.array_equal(both.per_doc[k], alone.per_doc[k]), (s.name, k)
        assert both.ledger == alone.ledger and both.oracle == alone.oracle
        assert both.measure(s.documents) == alone.measure(s.documents)
    # the depths differ (else this proves little), and each ring's runs really were one pass
    assert len({together[s].measure()["announce_bytes_per_doc"] for s in mhi}) == 3
    assert len({together[s].measure()["queries_per_doc"] for s in mhi}) == 3
    assert len({together[s].seconds["publish"] for s in specs[:7] + shadows}) == 1
    # and shadow depths did count some resolutions as echoes (else those went untested),
    # shadow indexes too, each of one depth here: of an index before it holding the same queries
    tags = set(echoed.read_text().split()) if echoed.exists() else set()
    assert tags >= {"k0", "k2"} and any("/" in t for t in tags), tags
    assert together[specs[7]].seconds == together[specs[8]].seconds


def test_a_pass_does_not_depend_on_how_its_shadows_are_stacked(tmp_path, monkeypatch):
    """The simulator settles a document's measured shadows together, in stacks of about
    STACK queries across its QNs (a stack of few queries settles part by part): however
    they are cut, every run reads the same."""
    import cqengine.evaluation.measuring.measure as measure
    import cqengine.evaluation.measuring.meters as meters

    stacked, real = tmp_path / "stacked", meters.ShadowResolver

    class Noting:
        @staticmethod
        def of_candidates(parts, *args):  # the workers are forked: they note it in a file
            with stacked.open("a") as f:
                f.write(f"{len(parts)}\n")
            return real.of_candidates(parts, *args)

    monkeypatch.setattr(meters, "ShadowResolver", Noting)
    specs = [RunSpec(IndexSpec("mhi", "skew"), r, k) for k in (0, 3) for r in ("td", "bf")] + [
        RunSpec(IndexSpec("ri", "skew"), "bf", 0),
        RunSpec(IndexSpec("sap-mhi", "skew", 20), "td", 3, "second"),
    ]
    got, whole = [], measure.STACK
    for stack in (whole, 40, 1):  # the whole document at once, a few QNs, one QN
        monkeypatch.setattr(measure, "STACK", stack)
        got.append(small_lab(2).run(specs))  # the workers are forked: the patches reach them
        if stack == whole:  # the whole document's shadows went into stacks of many parts
            assert stacked.exists() and max(map(int, stacked.read_text().split())) > 8
    for s in specs:
        for other in got[1:]:
            assert other[s].ledger == got[0][s].ledger and other[s].oracle == got[0][s].oracle
            for k in got[0][s].per_doc:
                assert np.array_equal(other[s].per_doc[k], got[0][s].per_doc[k]), (s.name, k)


INDEXES = [
    IndexSpec(s, w, k)
    for w in ("uniform", "skew")
    for s, k in (("ri", 0), ("mhi", 0), ("sap-mhi", 500))
]


@hsettings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(INDEXES), st.sampled_from(("td", "bf")), st.integers(0, 10)),
        st.sampled_from(("all", "second")),
        min_size=1,
    )
)
def test_a_plan_is_one_pass_per_workload_measuring_every_run_wanted(keys):
    plan = passes(keys)
    assert sorted(p.index.workload for p in plan) == sorted({i.workload for i, _, _ in keys})
    made = {}
    for p in plan:
        assert p.piggyback == max(
            d for part in (p, *p.shadows) for d in part.depths
        )  # announced deepest
        assert set(p.depths) == {
            d for part in (p, *p.shadows) for d in part.depths
        }  # saved bytes known
        assert len({part.index for part in (p, *p.shadows)}) == 1 + len(p.shadows)
        assert p.documents == "all" or all(part.documents == "second" for part in p.shadows)
        for run in p.runs:
            assert (
                run.index.workload == p.index.workload
                and p.part(run.index).documents == run.documents
            )
            made[(run.index, run.resolution, run.piggyback)] = run.documents
    for key, documents in keys.items():
        assert made[key] in ("all", documents)
    # nothing made for an index that no run wanted, and no index at a depth it was not wanted
    for run_key in made:
        index, _, depth = run_key
        p = next(p for p in plan if p.index.workload == index.workload)
        assert any(k[0] == index for k in keys)
        assert index == p.index or any(k[0] == index and k[2] == depth for k in keys)


def test_a_pass_whose_two_methods_disagree_stops(monkeypatch):
    """Were the shadow resolution ever to match other queries than the engine's own, the
    pass must fail rather than report either run (workers are forked: the patch reaches
    them). Here the measured filter is empty: it rules every unknown term out, so its side
    matches too little."""
    from cqengine.core.terms.bloom import BloomFilter
    from cqengine.evaluation.measuring.meters import Meter

    monkeypatch.setattr(Meter, "filter", lambda self: BloomFilter(self.bits, self.hashes))
    specs = [RunSpec(IndexSpec("ri", "skew"), r) for r in ("td", "bf")]
    with pytest.raises(EvaluationError, match="methods or depths matched different queries"):
        small_lab(2).run(specs)


def test_a_pass_whose_depths_disagree_stops(monkeypatch):
    """Likewise for a shadow depth: here one that matches nothing."""
    from cqengine.evaluation.measuring.meters import Meter

    real = Meter.measure

    def nothing_at_shadow_depths(self, block, keep, present, methods, tag, outcome):
        found = real(self, block, keep, present, methods, tag, outcome)
        return [] if tag else found

    monkeypatch.setattr(Meter, "measure", nothing_at_shadow_depths)
    specs = [RunSpec(IndexSpec("mhi", "skew"), "td", k) for k in (0, 3)]
    with pytest.raises(EvaluationError, match="methods or depths matched different queries"):
        small_lab(2).run(specs)


def test_work_in_the_background_returns_its_result_or_says_why_it_failed():
    """How the oracle is worked out while a ring is indexed."""
    assert Background(sorted, [3, 1, 2]).result() == [1, 2, 3]
    with pytest.raises(EvaluationError, match="ZeroDivisionError"):
        Background(divmod, 1, 0).result()
