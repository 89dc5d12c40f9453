"""Reading and writing TREC SGML: structure, gzip, every error with its line, round trips."""

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqengine.text.trec import TrecDoc, TrecError, iter_trec, write_trec

AP_STYLE = """\
<DOC>
<DOCNO> AP880212-0001 </DOCNO>
<FILEID>AP-NR-02-12-88 2344EST</FILEID>
<FIRST>u i AM-Vietnam Amnesty 02-12 0398</FIRST>
<HEAD>Reports Former Saigon Officials Released</HEAD>
<BYLINE>By EILEEN PUTMAN</BYLINE>
<TEXT>
   Hundreds of people were released.
   More &amp; more &lt;soon&gt;.
</TEXT>
<TEXT>
   Second block.
</TEXT>
</DOC>

<doc id="2">
<docno>AP880212-0002</docno>
<HEADLINE> One </HEADLINE><headline>Two</headline>
<TEXT type="body">inline text &hyph; &quot;q&quot; &apos;a&apos; AT&T</TEXT>
<NOTE>ignored note</NOTE>
</doc >
<DOC><DOCNO>LA-3</DOCNO><TEXT><P>para one</P>
<P>para two</P></TEXT></DOC>
"""


def write(tmp_path: Path, content: str, name: str = "f.trec") -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


def test_reads_documents_blocks_and_entities(tmp_path):
    path = write(tmp_path, AP_STYLE)
    docs = list(iter_trec(path))
    assert [d.docno for d in docs] == ["AP880212-0001", "AP880212-0002", "LA-3"]
    assert [d.line for d in docs] == [1, 16, 22]
    assert all(d.source == str(path) for d in docs)
    first, second, third = docs
    assert first.title == "Reports Former Saigon Officials Released"
    assert first.text == (
        "Hundreds of people were released.\n   More & more <soon>.\n\nSecond block."
    )
    assert second.title == "One; Two"
    assert second.text == "inline text   \"q\" 'a' AT&T"
    assert third.title == ""
    assert third.text == "para one\npara two"


def test_gzip_by_magic_bytes_not_suffix(tmp_path):
    plain = list(iter_trec(write(tmp_path, AP_STYLE)))
    for name in ("f.trec.gz", "no-suffix"):
        path = tmp_path / name
        path.write_bytes(gzip.compress(AP_STYLE.encode()))
        docs = list(iter_trec(path))
        assert [(d.docno, d.title, d.text, d.line) for d in docs] == [
            (d.docno, d.title, d.text, d.line) for d in plain
        ]


def test_empty_and_whitespace_only_files(tmp_path):
    assert list(iter_trec(write(tmp_path, ""))) == []
    assert list(iter_trec(write(tmp_path, "\n  \n\t\n"))) == []


def test_doc_without_text_has_empty_text(tmp_path):
    (doc,) = iter_trec(write(tmp_path, "<DOC>\n<DOCNO>X</DOCNO>\n</DOC>\n"))
    assert (doc.docno, doc.text, doc.title) == ("X", "", "")


GOOD = "<DOC>\n<DOCNO> OK-1 </DOCNO>\n<TEXT>\nfine\n</TEXT>\n</DOC>\n"  # 6 lines

ERRORS = [
    # (content, line of the error, words the message must contain)
    ("<DOC>\n<DOCNO>A</DOCNO>\n<DOC>\n<DOCNO>B</DOCNO>\n</DOC>\n", 3, "<DOC> opened inside"),
    ("\n</DOC>\n", 2, "</DOC> without"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n<TEXT>\nabc\n", 1, "end of file inside"),
    ("<DOC>\n<TEXT>x</TEXT>\n</DOC>\n", 1, "has no <DOCNO>"),
    ("<DOC>\n<DOCNO>  </DOCNO>\n</DOC>\n", 1, "empty <DOCNO>"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n<DOCNO>B</DOCNO>\n</DOC>\n", 3, "second <DOCNO>"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n<TEXT>\nabc\n</DOC>\n", 3, "<TEXT> is not closed"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n<HEAD>abc\n\n</DOC>\n", 3, "<HEAD> is not closed"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n<TEXT>\n<TEXT>\n</TEXT>\n</DOC>\n", 4, "<TEXT> opened inside"),
    ("<DOC>\n<DOCNO>A</DOCNO>\n</TEXT>\n</DOC>\n", 3, "</TEXT> without"),
    ("\n\nstray words\n", 3, "text outside"),
    ("<TEXT>x</TEXT>\n", 1, "<TEXT> outside"),
]


@pytest.mark.parametrize("content,line,words", ERRORS)
def test_errors_name_file_and_line(tmp_path, content, line, words):
    path = write(tmp_path, GOOD + content)
    line += 6
    with pytest.raises(TrecError) as info:
        list(iter_trec(path))
    err = info.value
    assert str(err).startswith(f"{path}:{line}: ")
    assert words in str(err)
    assert (err.path, err.line) == (str(path), line)


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.trec"
    path.write_bytes(GOOD.encode() + b"<DOC>\n<DOCNO>A</DOCNO>\n<TEXT>caf\xe9</TEXT>\n</DOC>\n")
    with pytest.raises(TrecError, match=r"^.*latin1\.trec:9: byte 0xe9 .*not UTF-8"):
        list(iter_trec(path))


def test_truncated_gzip_is_an_error(tmp_path):
    data = gzip.compress((GOOD * 2000).encode())
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TrecError, match="truncated"):
        list(iter_trec(path))
    seen = []
    docs = list(iter_trec(path, skip_bad=seen.append))
    assert len(seen) == 1 and "truncated" in str(seen[0])
    assert 0 < len(docs) < 2000


def test_skip_bad_skips_each_bad_document_and_resumes(tmp_path):
    content = (
        GOOD  # 1-6
        + "<DOC>\n<DOCNO>A</DOCNO>\n<DOCNO>A2</DOCNO>\n<TEXT>lost</TEXT>\n</DOC>\n"  # 7-11
        + "<DOC>\n<DOCNO>B</DOCNO>\n<TEXT>unclosed\n</DOC>\n"  # 12-15
        + "</DOC>\n"  # 16
        + "<DOC>\n<DOCNO>C</DOCNO>\n<DOC>\n<DOCNO>D</DOCNO>\n</DOC>\n"  # 17-21
        + "<DOC>\n<TEXT>no docno</TEXT>\n</DOC>\n"  # 22-24
        + "junk\nmore junk\n"  # 25-26: one report for the run
        + GOOD.replace("OK-1", "OK-2")  # 27-32
        + "<DOC>\n<DOCNO>E</DOCNO>\n"  # 33-34: end of file inside
    )
    path = write(tmp_path, content)
    seen: list[TrecError] = []
    docs = list(iter_trec(path, skip_bad=seen.append))
    assert [d.docno for d in docs] == ["OK-1", "D", "OK-2"]
    assert [d.line for d in docs] == [1, 19, 27]
    assert [e.line for e in seen] == [9, 14, 16, 19, 22, 25, 33]


def test_skip_bad_stops_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_bytes(GOOD.encode() + b"<DOC>\xff\n" + GOOD.encode())
    seen = []
    docs = list(iter_trec(path, skip_bad=seen.append))
    assert [d.docno for d in docs] == ["OK-1"]
    assert len(seen) == 1 and seen[0].line == 7


def test_documents_before_an_error_on_the_same_line_are_returned(tmp_path):
    path = write(tmp_path, "<DOC><DOCNO>A</DOCNO></DOC></DOC>\n")
    got = []
    with pytest.raises(TrecError, match=":1: </DOC> without"):
        for doc in iter_trec(path):
            got.append(doc.docno)
    assert got == ["A"]


def test_utf8_bom_is_ignored(tmp_path):
    path = tmp_path / "bom.trec"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert [d.docno for d in iter_trec(path)] == ["OK-1"]


def test_write_format_and_reproducible_gzip(tmp_path):
    docs = [TrecDoc("D-1", "a & b < c > d", "T & <t>"), TrecDoc("D-2", "two\nlines")]
    plain = tmp_path / "out.trec"
    assert write_trec(docs, plain) == 2
    assert plain.read_text().startswith(
        "<DOC>\n<DOCNO> D-1 </DOCNO>\n<HEAD>T &amp; &lt;t&gt;</HEAD>\n<TEXT>\n"
        "a &amp; b &lt; c &gt; d\n</TEXT>\n</DOC>\n<DOC>\n"
    )
    a, b = tmp_path / "a.gz", tmp_path / "b.gz"
    write_trec(docs, a)
    write_trec(iter(docs), b)
    assert a.read_bytes() == b.read_bytes()
    assert gzip.decompress(a.read_bytes()) == plain.read_bytes()


def test_write_rejects_a_docno_that_cannot_round_trip(tmp_path):
    with pytest.raises(ValueError):
        write_trec([TrecDoc(" X", "t")], tmp_path / "x.trec")


_chars = st.characters(codec="utf-8", exclude_characters="\ufeff")
_field = st.text(_chars, max_size=60).map(str.strip)


@st.composite
def _docs(draw):
    n = draw(st.integers(0, 5))
    docnos = draw(
        st.lists(
            st.text(_chars, min_size=1, max_size=12).map(str.strip).filter(bool),
            min_size=n,
            max_size=n,
            unique=True,
        )
    )
    return [TrecDoc(docno, draw(_field), draw(_field)) for docno in docnos]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_docs(), st.sampled_from(["rt.trec", "rt.trec.gz"]))
def test_round_trip(tmp_path, docs, name):
    path = tmp_path / name
    assert write_trec(docs, path) == len(docs)
    back = list(iter_trec(path))
    assert [(d.docno, d.text, d.title) for d in back] == [(d.docno, d.text, d.title) for d in docs]
