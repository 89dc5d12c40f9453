"""The Spark commands end to end, as a user runs them: gen-corpus -> prep -> workload, and
the experiment command on prep's output."""

import json

from support.command_line import assert_one_line_error, cqengine


def test_gen_corpus_prep_workload(tmp_path):
    corpus = tmp_path / "corpus"
    gen = cqengine(
        "gen-corpus",
        "--docs",
        200,
        "--out",
        corpus,
        "--files",
        3,
        "--vocab",
        3000,
        "--mean-terms",
        40,
    )
    assert gen.returncode == 0, gen.stderr
    assert sorted(p.name for p in corpus.iterdir()) == [f"part-0000{k}.trec.gz" for k in range(3)]
    prep = cqengine(
        "prep", "--input", corpus, "--out", tmp_path / "prep", "--master", "local[2]", timeout=300
    )
    assert prep.returncode == 0, prep.stderr
    summary = json.loads(prep.stdout)
    assert summary["documents"] == 200 and summary["files"] == 3
    assert 30 < summary["unique_terms_per_document"]["mean"] < 50
    wl = cqengine(
        "workload",
        "--stats",
        tmp_path / "prep",
        "--kind",
        "skew",
        "--queries",
        500,
        "--mean-size",
        3,
        "--seed",
        4,
        "--out",
        tmp_path / "wl",
        "--master",
        "local[2]",
        timeout=300,
    )
    assert wl.returncode == 0, wl.stderr
    assert json.loads(wl.stdout)["queries"] == 500
    lines = (tmp_path / "wl" / "queries.jsonl").read_text().splitlines()
    vocab = {
        line.split("\t")[0]
        for line in (tmp_path / "prep" / "stats.tsv").read_text().splitlines()[1:]
    }
    queries = [json.loads(line) for line in lines]
    assert [q["query_id"] for q in queries] == list(range(500))
    assert all(q["terms"] and set(q["terms"]) <= vocab for q in queries)
    exp = cqengine(
        "experiment",
        "table2",
        "--quick",
        "--corpus",
        tmp_path / "prep",
        "--out",
        tmp_path / "t2",
        timeout=300,
    )
    assert exp.returncode == 0, exp.stderr[-2000:]
    report = json.loads((tmp_path / "t2" / "table2.json").read_text())
    assert report["corpus"]["documents"] == 200 and report["corpus"]["source"] == str(
        tmp_path / "prep"
    )
    assert all(
        r["oracle"]["missing"] == r["oracle"]["unexpected"] == 0 for r in report["runs"].values()
    )


def test_spark_commands_refuse_bad_input_before_starting_spark(tmp_path):
    assert_one_line_error(
        cqengine(
            "workload",
            "--stats",
            tmp_path,
            "--kind",
            "skew",
            "--queries",
            5,
            "--out",
            tmp_path / "o",
        ),
        "no terms.parquet here",
    )
    assert_one_line_error(
        cqengine(
            "workload",
            "--stats",
            tmp_path,
            "--kind",
            "zipf",
            "--queries",
            5,
            "--out",
            tmp_path / "o",
        ),
        "invalid choice: 'zipf'",
    )
    assert_one_line_error(
        cqengine("gen-corpus", "--docs", 0, "--out", tmp_path / "c"), "must be positive"
    )
