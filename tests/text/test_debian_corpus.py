"""A corpus of real text from Debian's documentation: HTML pages as text, cut at paragraph
breaks into documents, with docnos that are the same on every run; a missing package is
one line that says what to install; `prep` reads HTML pages directly."""

from __future__ import annotations

import gzip

from hypothesis import given
from hypothesis import strategies as st
from support.command_line import assert_one_line_error, cqengine

from cqengine.spark.prep import discover, read_file
from cqengine.text.debian import CorpusError, build, chunks, default_packages, source
from cqengine.text.html import html_to_text, page
from cqengine.text.trec import iter_trec

PAGE = """<!DOCTYPE html><html><head><title>Caf&eacute; &amp; Tea</title>
<style>p { color: red }</style><script>var x = "<p>not text</p>";</script></head>
<body><div class="navheader"><a href="x.html">Prev</a> Up <a>Next</a></div>
<h1>The <em>Caf&eacute;</em> chapter</h1>
<p>Na&iuml;ve&nbsp;text &mdash; with <b>nested <i>tags</i></b>,
   spread over lines &#8212; and &#x3bb; calculus.</p>
<ul><li>first item</li><li>second <code>item</code></li></ul>
<pre>SELECT *
FROM weather;</pre>
<noscript>no script here</noscript>
<p>Ünïcödé stays: 日本語.</p></body></html>"""


def test_html_becomes_its_title_and_paragraphs():
    p = page(PAGE)
    assert p.title == "Café & Tea"
    assert p.paragraphs == [
        "The Café chapter",
        "Naïve text — with nested tags, spread over lines — and λ calculus.",  # nbsp a space
        "first item",
        "second item",
        "SELECT * FROM weather;",
        "Ünïcödé stays: 日本語.",
    ]
    text = html_to_text(PAGE)
    for gone in ("color", "not text", "Prev", "Next", "no script", "<", "&"):
        assert gone not in text
    assert "\n\n" in text


def test_unclosed_and_stray_tags_lose_no_text():
    assert page("<p>one<p>two<div>three</span>four</div><br>five").paragraphs == [
        "one",
        "two",
        "threefour",
        "five",
    ]


paragraph = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=1, max_size=80)


@given(
    st.lists(st.one_of(paragraph.map(" ".join), st.just("  ")), max_size=40), st.integers(1, 200)
)
def test_chunks_keep_paragraphs_whole_and_in_order_and_are_never_empty(paragraphs, words):
    out = chunks(paragraphs, words)
    assert all(part for part in out)
    assert [p for part in out for p in part] == [p for p in paragraphs if p.strip()]
    for part in out[:-1]:  # each but the last reached the size (a remainder may join it)
        assert sum(len(p.split()) for p in part) >= words


def fixture_docs(root):
    """A doc root with a PostgreSQL manual and a Handbook of a few pages."""
    pg = root / "postgresql-doc-15" / "html"
    hb = root / "debian-handbook" / "html" / "en-US"
    for d in (pg, hb, root / "debian-handbook" / "html" / "fr-FR"):
        d.mkdir(parents=True)
    long = "".join(f"<p>{'word ' * 100}number {i}</p>" for i in range(12))
    (pg / "sql-select.html").write_text(f"<title>SELECT</title>{long}")
    (pg / "tutorial.html").write_text("<title>Tutorial</title><p>a short page</p>")
    (pg / "empty.html").write_text("<title>Nothing</title><script>only()</script>")
    (hb / "apt.html").write_text("<title>APT</title><p>apt-get installs packages.</p>")
    (root / "debian-handbook" / "html" / "fr-FR" / "apt.html").write_text("<p>en français</p>")
    return root


def test_the_corpus_is_the_same_on_every_run_with_stable_docnos(tmp_path):
    root = fixture_docs(tmp_path / "doc")
    assert default_packages(root) == ["postgresql-doc-15", "debian-handbook"]
    one = build(tmp_path / "one", words=450, doc_root=root)
    two = build(tmp_path / "two", words=450, doc_root=root)
    assert one == two and one["documents"] == 5  # 1,212 words in about 450: three
    for name in ("postgresql-doc-15.trec.gz", "debian-handbook.trec.gz"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    docs = [d for f in sorted((tmp_path / "one").glob("*.trec.gz")) for d in iter_trec(f)]
    assert [d.docno for d in docs] == [
        "DAH-apt-1",
        "PG15-sql-select-1",
        "PG15-sql-select-2",
        "PG15-sql-select-3",
        "PG15-tutorial-1",
    ]
    assert "français" not in " ".join(d.text for d in docs)  # English pages only
    assert docs[1].title == "SELECT" and docs[1].text.count("\n\n") == 4  # 5 paragraphs


def test_at_most_n_documents_evenly_spaced_over_all(tmp_path):
    root = fixture_docs(tmp_path / "doc")
    s = build(tmp_path / "out", docs=2, words=450, doc_root=root)
    assert s["documents"] == 2
    docs = [d.docno for d in iter_trec(tmp_path / "out" / "postgresql-doc-15.trec.gz")]
    assert docs == ["PG15-sql-select-1", "PG15-sql-select-3"]  # the 1st and 3rd of 5


def test_a_missing_package_is_one_line_naming_what_to_install(tmp_path):
    try:
        source("postgresql-doc-15", tmp_path)
        raise AssertionError("no error")
    except CorpusError as e:
        assert "apt-get install postgresql-doc-15" in str(e)
    assert default_packages(tmp_path) == ["postgresql-doc-15", "debian-handbook"]
    proc = cqengine(
        "corpus", "debian", "--out", tmp_path / "out", "--doc-root", tmp_path, timeout=60
    )
    assert_one_line_error(proc, "no HTML documentation of postgresql-doc-15", "apt-get install")


def test_prep_reads_an_html_page_as_one_document(tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "cafe.html").write_text(PAGE)
    with gzip.open(tmp_path / "pages" / "tea.htm.gz", "wt") as f:
        f.write("<title>Tea</title><p>green tea</p>")
    items = discover([tmp_path / "pages"])
    assert [kind for _, kind, _ in items] == ["html", "html"]
    records = [r for item in items for r in read_file(item)]
    assert records[0][:3] == ("doc", "cafe.html", "Café & Tea")
    assert "Naïve" in records[0][3] and "not text" not in records[0][3]
    assert records[1] == ("doc", "tea.htm.gz", "Tea", "green tea")
