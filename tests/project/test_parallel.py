"""The suite's parallel run (support.parallel): workers' port ranges never overlap, and
the units of work keep a module's tests, and the tests of the one Spark, together."""

import pytest
from support import parallel

EPHEMERAL = 32_768  # Linux's first port for outgoing connections


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_each_worker_has_ports_of_its_own_below_the_ephemeral_ones(monkeypatch, count):
    spans = []
    for i in range(count):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{i}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))
        lo, hi = map(int, parallel.worker_port_range().split("-"))
        spans.append(range(lo, hi + 1))
    taken = [p for span in spans for p in span]
    assert len(taken) == len(set(taken))  # no port in two workers' ranges
    assert all(1024 < p < EPHEMERAL for p in taken)
    assert min(len(s) for s in spans) >= 3000  # room for many rings each


def test_outside_a_parallel_run_there_is_no_range(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert parallel.worker_port_range() is None


def test_units_are_modules_but_spark_is_one():
    assert parallel.unit("tests/core/test_merging.py::test_x[a-b]") == "tests/core/test_merging.py"
    assert parallel.unit("tests/live/test_live.py::test_y") == "tests/live/test_live.py"
    spark = {
        parallel.unit("tests/spark/test_prep.py::test_a"),
        parallel.unit("tests/spark/test_workload.py::test_b[skew]"),
        parallel.unit("tests/spark/test_spark_cluster.py::test_c"),
    }
    assert spark == {"tests/spark"}


def test_the_long_units_come_first_the_rest_as_collected():
    collected = [
        "tests/core/test_checks.py::t",
        "tests/text/test_query.py::t",
        "tests/bench/test_bench_live.py::t",
        "tests/live/test_live.py::t",
        "tests/spark/test_prep.py::t",
    ]
    assert sorted(collected, key=parallel.rank) == [
        "tests/spark/test_prep.py::t",
        "tests/live/test_live.py::t",
        "tests/bench/test_bench_live.py::t",
        "tests/core/test_checks.py::t",
        "tests/text/test_query.py::t",
    ]
