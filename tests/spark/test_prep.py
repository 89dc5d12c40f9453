"""`cqengine prep`: small corpora with hand-known document frequencies, every input kind, bad
input."""

import gzip
import json

import pytest
from support.command_line import assert_one_line_error, cqengine

from chord.protocol.ids import hash_id
from cqengine.spark.prep import PrepError, run_prep, signed, unsigned
from cqengine.text.analysis import analyze
from cqengine.text.termfiles import load_stats


def trec(*docs):
    """docs: (docno, head, text) -> TREC SGML."""
    return "".join(
        f"<DOC>\n<DOCNO> {n} </DOCNO>\n"
        + (f"<HEAD>{h}</HEAD>\n" if h else "")
        + f"<TEXT>\n{t}\n</TEXT>\n</DOC>\n"
        for n, h, t in docs
    )


def term(word):
    [t] = analyze(word)
    return t


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    (root / "a.trec").write_text(
        trec(("A1", "Zebra news", "apple banana apple"), ("A2", "", "banana cherry"))
    )
    with gzip.open(root / "sub" / "b.gz", "wt") as f:  # gzip told by content, not suffix
        f.write(trec(("B1", "", "banana, the BANANA!")))
    (root / "c.jsonl").write_text(
        json.dumps({"docno": "C1", "text": "cherry durian", "title": "Fruit"})
        + "\n\n"
        + json.dumps({"docno": "C2", "text": "apple"})
        + "\n"
    )
    return root


def read(spark, out, name):
    return spark.read.parquet(str(out / name)).collect()


def test_document_frequencies_are_the_hand_counted_ones(spark, corpus, tmp_path):
    out = tmp_path / "out"
    summary = run_prep(spark, [corpus], out, quiet=True)
    df = {r.term: r.df for r in read(spark, out, "terms.parquet")}
    assert df == {
        term("apple"): 2,
        term("banana"): 3,
        term("cherry"): 2,
        term("durian"): 1,
        term("zebra"): 1,
        term("news"): 1,
        term("fruit"): 1,
    }
    # term ids are the engine's, exact beyond 2**63
    for r in read(spark, out, "terms.parquet"):
        assert unsigned(r.term_id) == hash_id(r.term) and signed(hash_id(r.term)) == r.term_id
    assert any(hash_id(t) >= 2**63 for t in df)  # the two's complement case is exercised
    docs = {r.docno: r for r in read(spark, out, "documents.parquet")}
    assert set(docs) == {"A1", "A2", "B1", "C1", "C2"}
    assert docs["A1"].title == "Zebra news" and docs["A1"].terms == analyze(
        "Zebra news\napple banana apple"
    )
    assert docs["B1"].terms == [term("banana")]
    assert [unsigned(x) for x in docs["C1"].term_ids] == [hash_id(t) for t in docs["C1"].terms]
    assert summary["documents"] == 5 and summary["vocabulary"] == 7 and summary["files"] == 3
    sizes = [len(d.terms) for d in docs.values()]
    mean = sum(sizes) / 5
    assert summary["unique_terms_per_document"]["mean"] == pytest.approx(mean)
    assert summary["unique_terms_per_document"]["std"] == pytest.approx(
        (sum((x - mean) ** 2 for x in sizes) / 5) ** 0.5
    )
    assert json.loads((out / "summary.json").read_text()) == summary
    assert load_stats(out / "stats.tsv") == df  # what `ring up --stats` reads


def test_plain_text_directories_use_relative_paths_as_docnos(spark, tmp_path):
    root = tmp_path / "texts"
    (root / "2024").mkdir(parents=True)
    (root / "one.txt").write_text("Hurricane over the levee")
    (root / "2024" / "two").write_text("levee repairs")
    (root / ".hidden").write_text("ignored")
    out = tmp_path / "out"
    run_prep(spark, [root], out, quiet=True)
    docs = {r.docno: r.terms for r in read(spark, out, "documents.parquet")}
    assert docs == {
        "one.txt": analyze("\nHurricane over the levee"),
        "2024/two": analyze("levee repairs"),
    }


def test_malformed_document_names_file_and_line(spark, tmp_path):
    bad = tmp_path / "bad.trec"
    bad.write_text(
        trec(("OK1", "", "fine words"))
        + "<DOC>\n<TEXT>\nno docno\n</TEXT>\n</DOC>\n"
        + trec(("OK2", "", "more words"))
    )
    with pytest.raises(PrepError, match=rf"^{bad}:7: "):
        run_prep(spark, [bad], tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()
    jl = tmp_path / "bad.jsonl"
    jl.write_text('{"docno": "J1", "text": "ok"}\n{"docno": "J2"}\nnot json\n')
    with pytest.raises(PrepError, match=rf"^{jl}:2: .*missing field 'text'.*and 1 more"):
        run_prep(spark, [jl], tmp_path / "out", quiet=True)


def test_skip_bad_skips_and_counts(spark, tmp_path):
    bad = tmp_path / "bad.trec"
    bad.write_text(
        trec(("OK1", "", "fine words"))
        + "<DOC>\n<TEXT>\nno docno\n</TEXT>\n</DOC>\n"
        + trec(("OK2", "", "more words"))
    )
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    summary = run_prep(
        spark, [bad, tmp_path / "latin1.txt"], tmp_path / "out", skip_bad=True, quiet=True
    )
    assert summary["documents"] == 2 and summary["skipped_bad_documents"] == 2


def test_empty_inputs_are_errors(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PrepError, match="no input files"):
        run_prep(spark, [tmp_path / "empty"], tmp_path / "out", quiet=True)
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(PrepError, match="no documents"):
        run_prep(spark, [tmp_path / "blank.jsonl"], tmp_path / "out", quiet=True)
    with pytest.raises(PrepError, match="no such file"):
        run_prep(spark, [tmp_path / "missing"], tmp_path / "out", quiet=True)


def test_prep_command_end_to_end(tmp_path, corpus):
    out = tmp_path / "out"
    proc = cqengine("prep", "--input", corpus, "--out", out, "--master", "local[1]", timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["documents"] == 5 and summary["vocabulary"] == 7
    assert "[reading and analyzing 3 files] done" in proc.stderr
    assert "INFO" not in proc.stderr  # Spark's console noise is kept to warnings
    assert_one_line_error(
        cqengine("prep", "--input", tmp_path / "nope", "--out", out), "no such file"
    )
