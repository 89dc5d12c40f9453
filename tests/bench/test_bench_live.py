"""The live benchmark runs end to end on a small ring and its figures hang together."""

import json

from support.repo import load_script


def test_bench_live_small(tmp_path):
    bench = load_script("experiments/bench_live.py")
    rc = bench.main(
        [
            "--nodes",
            "3",
            "--subscriptions",
            "60",
            "--docs",
            "30",
            "--vocab",
            "400",
            "--terms",
            "30",
            "--batch-docs",
            "8",
            "--per-call",
            "10",
            "--settle",
            "20",
            "--data-dirs",
            "on",  # every node keeping its state in SQLite, as `cqengine ring up` has them
            "--workloads",
            "skew,text,boolean",
            "--metrics",
            "on",  # every node serving Prometheus metrics, scraped as the ring works
            "--scrape-every",
            "0.5",
            "--header-terms",
            "64",  # term-presence headers on
            "--out",
            str(tmp_path),
        ]
    )
    result = json.loads((tmp_path / "bench_live.json").read_text())
    assert rc == 0
    assert [(r["workload"], r["subscriptions"], r["data_dirs"]) for r in result["runs"]] == [
        ("skew", 60, True),
        ("text", 60, True),
        ("boolean", 60, True),
    ]
    assert all(r["tls"] for r in result["runs"])  # the secure default, as `ring up` runs
    assert result["tls_cost"] == result["metrics_cost"] == []  # no twin to compare with
    assert result["headers_cost"] == [] and all(r["headers"] == 64 for r in result["runs"])
    assert result["balanced_cost"] == result["filters_cost"] == []
    assert all(r["balanced"] and r["filters"] == 0 for r in result["runs"])  # ring up's
    assert all(r["metrics"] and r["scrapes"] > 0 for r in result["runs"])
    for r in result["runs"]:
        fast = r["throughput"]
        assert fast["alerts_equal_matcher"] and fast["alerts_dropped"] == 0
        assert [s["producer_linger_ms"] for s in r["latency"]] == [20, 100]
        assert fast["alerts"] == r["matches"] and r["documents"] == 30
        assert r["ratio"] == r["ring_docs_per_second"] / r["single_process_docs_per_second"] > 0
        assert (
            abs(
                sum(fast["bytes_per_document_by_kind"].values()) - fast["engine_bytes_per_document"]
            )
            < 1e-6
        )
        assert fast["bytes_per_document_by_kind"]["Announce"] > 0
        assert "GetBloom" not in fast["bytes_per_document_by_kind"]  # td resolution by default
        assert fast["cpu_seconds_per_document"] > 0
        # the cost table: the nodes' metered CPU by stage adds up to what /proc says they
        # spent (the meters' "unmetered" is the rest of each process's CPU time)
        stages, accounts = (
            fast["cpu_ms_per_document_by_stage"],
            fast["cpu_ms_per_document_by_account"],
        )
        assert {"analysis", "announcement", "event loop, outside every account"} <= set(stages)
        spent = 1000 * fast["cpu_seconds_per_document"]
        assert abs(sum(stages.values()) - spent) < 0.5 * spent  # (read a moment apart)
        assert "op Announcer.announce" in accounts
        for slow in r["latency"]:
            assert slow["alerts_equal_matcher"] and slow["alerts_dropped"] == 0
            if r["matches"]:
                assert 0 < slow["p50_ms"] <= slow["p99_ms"] and slow["alerts"] == r["matches"]
    assert result["runs"][1]["matches"] >= 60  # a query from a document's text matches it
    assert result["runs"][2]["matches"] > 0  # the query language's alerts, = the matcher's


def test_bench_live_measures_what_tls_costs_on_twin_rings(tmp_path):
    """--tls off,on: the same documents through a plaintext ring and a mutual-TLS one, both
    exact against the matcher; the cost compares the two rings' documents/s."""
    bench = load_script("experiments/bench_live.py")
    args = ["--nodes", "2", "--subscriptions", "40", "--docs", "20", "--vocab", "300"]
    args += ["--terms", "25", "--workloads", "skew", "--producer-linger-ms", "20"]
    rc = bench.main([*args, "--tls", "off,on", "--settle", "20", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "bench_live.json").read_text())
    assert rc == 0
    assert [r["tls"] for r in result["runs"]] == [False, True]
    plain, tls = result["runs"]
    assert all(r["throughput"]["alerts_equal_matcher"] for r in result["runs"])
    (cost,) = result["tls_cost"]
    assert cost["plaintext_docs_per_second"] == plain["ring_docs_per_second"]
    assert cost["tls_docs_per_second"] == tls["ring_docs_per_second"]
    assert cost["cost"] == 1 - tls["ring_docs_per_second"] / plain["ring_docs_per_second"]
    assert result["goals"]["tls_cost"] == 0.15


def test_side_by_side_pairs_rings_alike_but_for_one_flag():
    bench = load_script("experiments/bench_live.py")

    def run(workload, tls, metrics, docs_per_second):
        flags = {"data_dirs": True, "replicas": 3, "tls": tls, "metrics": metrics}
        flags |= {"headers": 0, "balanced": True, "filters": 0.0, "home_log": False}
        cpu = {"cpu_seconds_per_document": 1 / docs_per_second}
        return {"workload": workload, "subscriptions": 10, **flags, "throughput": cpu} | {
            "ring_docs_per_second": docs_per_second
        }

    runs = [
        run("skew", True, False, 100.0),
        run("skew", True, True, 98.0),
        run("text", True, True, 50.0),  # no twin without metrics: not compared
        run("skew", False, False, 120.0),
    ]
    (cost,) = bench.side_by_side(runs, "metrics", ("without", "with"))
    assert (cost["workload"], cost["tls"], cost["without_docs_per_second"]) == ("skew", True, 100)
    assert cost["with_docs_per_second"] == 98 and abs(cost["cost"] - 0.02) < 1e-12
    # repeated alike, each ring with it pairs with the one without it measured beside it
    again = [*runs[:2], run("skew", True, False, 80.0), run("skew", True, True, 79.0)]
    costs = [c["cost"] for c in bench.side_by_side(again, "metrics", ("without", "with"))]
    assert [round(c, 4) for c in costs] == [0.02, 0.0125]
    (tls,) = bench.side_by_side(runs, "tls", ("plaintext", "tls"))
    assert tls["plaintext_docs_per_second"] == 120 and tls["tls_docs_per_second"] == 100
    assert tls["metrics"] is False
