"""The Spark workload job (cqengine.spark.workload_job): the paper's query distributions, drawn
deterministically whatever the partitioning, equal to the plain-Python generator."""

import json
import shutil
import statistics
from collections import Counter
from pathlib import Path

import pytest

from chord.protocol.ids import hash_id
from cqengine.core.terms.queries import analyze_query
from cqengine.spark.prep import signed
from cqengine.spark.workload_job import WorkloadError, run_workload
from cqengine.text.workload import BOOLEAN_FORMS, Sampler, generate_queries

VOCAB = 2000
N = 20_000  # queries per distribution workload


def zipf_df() -> dict[str, int]:
    """~2,000 terms with Zipfian document frequencies 5000, 2500, 1667, ... 3, 2, ..."""
    return {f"term{rank:04d}": max(1, round(5000 / rank)) for rank in range(1, VOCAB + 1)}


def write_stats(spark, directory: Path, df: dict[str, int]) -> Path:
    """A statistics directory as `cqengine prep` writes it (only terms.parquet matters)."""
    rows = [(t, signed(hash_id(t)), n) for t, n in df.items()]
    spark.createDataFrame(rows, "term string, term_id long, df long").write.parquet(
        str(directory / "terms.parquet")
    )
    return directory


def read_jsonl(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]


def read_parquet(spark, out: Path) -> list[tuple]:
    table = spark.read.parquet(str(out / "queries.parquet")).orderBy("query_id")
    return [(r.query_id, r.size, list(r.terms)) for r in table.collect()]


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing the average of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            result[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rho: the Pearson correlation of the (tie-averaged) ranks."""
    return statistics.correlation(ranks(xs), ranks(ys))


def test_spearman_helper():
    assert ranks([10, 20, 20, 5]) == [2, 3.5, 3.5, 1]
    assert spearman([1, 2, 3, 4], [10, 30, 40, 90]) == pytest.approx(1)
    assert spearman([1, 2, 3, 4], [9, 7, 7, 1]) == pytest.approx(-0.9486833)


@pytest.fixture(scope="module")
def df():
    return zipf_df()


@pytest.fixture(scope="module")
def stats(spark, df, tmp_path_factory):
    return write_stats(spark, tmp_path_factory.mktemp("stats"), df)


# One 20,000-query workload per kind, each with its own seed (query sizes depend only on
# the seed, so shared seeds would test the same sizes three times) and v = 5 or 10.
PLANS = {"uniform": (5, 11), "skew": (5, 12), "inverskew": (10, 13)}


@pytest.fixture(scope="module")
def workloads(spark, stats, tmp_path_factory):
    """kind -> (summary, jsonl records) of the workload PLANS gives it."""
    result = {}
    for kind, (v, seed) in PLANS.items():
        out = tmp_path_factory.mktemp(kind)
        summary = run_workload(spark, stats, kind, N, v, seed, out, quiet=True)
        result[kind] = summary, read_jsonl(out)
    return result


def term_choice_rho(df, records) -> float:
    chosen = Counter(t for r in records for t in r["terms"])
    terms = sorted(df)
    return spearman([df[t] for t in terms], [chosen[t] for t in terms])


# Measured with seeds 1, 2, 3 and 11 at v = 5 and 10: skew 0.90-0.95, inverskew -0.87 to
# -0.92, uniform within +-0.033 (its standard error is about 1/sqrt(2000) = 0.022).


def test_skew_favours_frequent_terms(df, workloads):
    assert term_choice_rho(df, workloads["skew"][1]) > 0.8


def test_inverskew_favours_rare_terms(df, workloads):
    assert term_choice_rho(df, workloads["inverskew"][1]) < -0.8


def test_uniform_ignores_frequency(df, workloads):
    assert abs(term_choice_rho(df, workloads["uniform"][1])) < 0.1


def test_skew_draws_the_top_term_in_proportion_to_its_df(df, workloads):
    """The most frequent term has 1/8.2 of all df mass: far above uniform's 1/2000."""
    records = workloads["skew"][1]
    share = sum("term0001" in r["terms"] for r in records) / len(records)
    assert 0.4 < share < 0.55  # about 1 - (1 - 0.12)**5 (measured 0.475)
    uniform = workloads["uniform"][1]
    assert sum("term0001" in r["terms"] for r in uniform) / len(uniform) < 0.01


def check_sizes(summary, records, df, v):
    sizes = [len(r["terms"]) for r in records]
    assert [r["query_id"] for r in records] == list(range(len(records)))
    assert all(len(set(r["terms"])) == len(r["terms"]) >= 1 for r in records)
    assert all(t in df for r in records for t in r["terms"])
    mean, sd = statistics.fmean(sizes), statistics.stdev(sizes)
    assert abs(mean - v) <= 0.03 * v, mean
    assert abs(sd - 0.3 * v) <= 0.1 * 0.3 * v, sd
    assert summary["measured_mean_size"] == pytest.approx(mean)
    assert summary["measured_size_stdev"] == pytest.approx(sd)


@pytest.mark.parametrize("kind", PLANS)
def test_query_sizes(df, workloads, kind):
    summary, records = workloads[kind]
    check_sizes(summary, records, df, PLANS[kind][0])


def test_summary(spark, workloads):
    summary, _ = workloads["inverskew"]
    assert summary == {
        "kind": "inverskew",
        "queries": N,
        "seed": 13,
        "mean_size": 10,
        "measured_mean_size": summary["measured_mean_size"],
        "measured_size_stdev": summary["measured_size_stdev"],
        "vocabulary_size": VOCAB,
        "partitions": spark.sparkContext.defaultParallelism,
        "boolean": 0.0,
        "boolean_queries": 0,
    }


@pytest.mark.parametrize("kind", PLANS)
def test_spark_output_equals_plain_python(df, workloads, kind):
    expected = generate_queries(df, N, kind, *PLANS[kind])
    assert [r["terms"] for r in workloads[kind][1]] == expected


@pytest.fixture(scope="module")
def one_and_four(spark, stats, tmp_path_factory):
    """The same 3,000-query workload drawn over 1 and over 4 partitions."""
    one, four = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("four")
    s1 = run_workload(spark, stats, "skew", 3000, 4.5, 5, one, partitions=1, quiet=True)
    s4 = run_workload(spark, stats, "skew", 3000, 4.5, 5, four, partitions=4, quiet=True)
    return (one, s1), (four, s4)


def test_same_seed_same_workload_whatever_the_partitioning(spark, df, one_and_four):
    (one, s1), (four, s4) = one_and_four
    assert (one / "queries.jsonl").read_bytes() == (four / "queries.jsonl").read_bytes()
    expected = generate_queries(df, 3000, "skew", 4.5, 5)
    assert [r["terms"] for r in read_jsonl(four)] == expected
    assert (
        read_parquet(spark, one)
        == read_parquet(spark, four)
        == [(i, len(q), q) for i, q in enumerate(expected)]
    )
    assert [r["query"] for r in read_jsonl(four)] == [" ".join(q) for q in expected]
    schema = spark.read.parquet(str(four / "queries.parquet")).schema.simpleString()
    assert schema == "struct<query_id:bigint,size:int,terms:array<string>,query:string>"
    assert (s1["partitions"], s4["partitions"]) == (1, 4)
    assert {**s1, "partitions": 4} == s4
    assert json.loads((four / "summary.json").read_text()) == s4


def test_different_seed_replaces_the_output_with_a_different_workload(
    spark, stats, one_and_four, tmp_path, capsys
):
    (one, _), _ = one_and_four
    out = tmp_path / "out"
    shutil.copytree(one, out)
    summary = run_workload(spark, stats, "skew", 500, 4.5, 6, out, partitions=2)
    first, second = read_jsonl(one), read_jsonl(out)
    assert len(second) == len(read_parquet(spark, out)) == 500
    assert sum(x["terms"] != y["terms"] for x, y in zip(first, second)) > 450
    assert json.loads((out / "summary.json").read_text()) == summary
    assert not list(out.glob("*.tmp"))
    err = capsys.readouterr().err
    for name in ("reading term statistics", "drawing 500 skew queries", "writing"):
        assert f"[{name}" in err, err


@pytest.mark.parametrize(
    "change, fragments",
    [
        ({"kind": "zipf"}, ["'zipf'", "uniform, skew, inverskew"]),
        ({"queries": 0}, ["at least 1", "not 0"]),
        ({"mean_size": 0}, ["mean query size", "positive"]),
        ({"mean_size": -2.5}, ["mean query size", "positive"]),
        ({"partitions": 0}, ["partitions"]),
        ({"stats_dir": "missing"}, ["no terms.parquet here", "run `cqengine prep` first"]),
    ],
)
def test_bad_requests_fail_clearly_and_write_nothing(spark, stats, tmp_path, change, fragments):
    args = {
        "stats_dir": stats,
        "kind": "skew",
        "queries": 10,
        "mean_size": 5,
        "seed": 1,
        "out": tmp_path / "out",
        "quiet": True,
    }
    if change.get("stats_dir") == "missing":
        change = {"stats_dir": tmp_path / "nowhere"}
    with pytest.raises(WorkloadError) as info:
        run_workload(spark, **{**args, **change})
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    assert not (tmp_path / "out").exists()


def test_stats_dir_without_terms_is_an_error(spark, tmp_path):
    (tmp_path / "stats").mkdir()
    write_stats(spark, tmp_path / "stats", {})  # an empty corpus: a schema, no rows
    with pytest.raises(WorkloadError, match="no terms"):
        run_workload(spark, tmp_path / "stats", "skew", 10, 5, 1, tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()


def test_empty_terms_directory_is_an_error(spark, tmp_path):
    (tmp_path / "stats" / "terms.parquet").mkdir(parents=True)
    with pytest.raises(WorkloadError, match="terms.parquet") as info:
        run_workload(spark, tmp_path / "stats", "skew", 10, 5, 1, tmp_path / "out", quiet=True)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_boolean_share_rewrites_that_share_into_the_query_language(spark, stats, df, tmp_path):
    """--boolean 0.3: about 30% of the queries (chosen by seed, whatever the partitioning)
    use OR, NOT, phrases or groups, each form alike, every one a query the engine takes,
    over the same terms as the conjunctive workload; the rest are their terms."""
    out = tmp_path / "out"
    summary = run_workload(
        spark, stats, "skew", 4000, 3.0, 7, out, partitions=3, quiet=True, boolean=0.3
    )
    records = read_jsonl(out)
    sampler = Sampler(df, "skew", 3.0, 7)
    assert [r["query"] for r in records] == [sampler.boolean(i, 0.3) for i in range(4000)]
    assert [r["terms"] for r in records] == generate_queries(df, 4000, "skew", 3.0, 7)
    rewritten = [r for r in records if r["query"] != " ".join(r["terms"])]
    assert summary["boolean_queries"] == len(rewritten)
    assert 0.27 < len(rewritten) / 4000 < 0.33
    forms = Counter(r["query_id"] % len(BOOLEAN_FORMS) for r in rewritten)
    assert min(forms.values()) > 200
    for r in rewritten[:300]:
        assert set(r["terms"]) <= set(analyze_query(r["query"]).terms)  # it parses, and keeps them
        assert any(mark in r["query"] for mark in (" OR ", " -", '"'))
