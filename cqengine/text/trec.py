"""TREC SGML collections: read them document by document, and write them.

A TREC file holds many documents::

    <DOC>
    <DOCNO> AP880212-0001 </DOCNO>
    <HEAD>Reports Former Saigon Officials Released</HEAD>
    <TEXT>
    ...
    </TEXT>
    </DOC>

Only DOC, DOCNO, TEXT and HEAD/HEADLINE matter to the engine; every other tag (FILEID,
BYLINE, DATELINE, NOTE, P, ...) is dropped — its text too, unless it sits inside a TEXT
or HEAD block (LA Times wraps paragraphs in <P>), where only the tag itself goes.

The reader streams: it holds one line and the current document in memory, so a collection
file of any size (plain or gzip, detected by its magic bytes) can be read. Real
collections have damaged documents; every problem is a `TrecError` that names the file and
line, and with `skip_bad` the reader reports a bad document and carries on at the next
<DOC> instead of giving up on the whole collection.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike

__all__ = ["TrecDoc", "TrecError", "iter_trec", "write_trec"]

_GZIP_MAGIC = b"\x1f\x8b"
# A tag: a letter right after "<" (so "a < b" in text is not a tag), attributes allowed.
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9._:-]*)(?:\s[^<>]*)?>")
_ENTITY = re.compile(r"&(#?[A-Za-z0-9]+);")
_BASIC_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
_CAPTURED = frozenset({"DOCNO", "TEXT", "HEAD", "HEADLINE"})


@dataclass(frozen=True)
class TrecDoc:
    """One document: text blocks joined by a blank line, HEAD/HEADLINE blocks by "; "."""

    docno: str
    text: str
    title: str = ""
    source: str = ""  # the file it was read from
    line: int = 0  # 1-based line of its <DOC> tag


class TrecError(ValueError):
    """A malformed collection file; the message starts with "path:line: "."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _unescape(text: str) -> str:
    """Decode the five basic entities; any other entity becomes a space.

    Collections use entities we cannot know (&hyph;, &blank;, &sect;, ...). Each stands
    for one character; a space keeps the words around it apart without inventing a term.
    """
    return _ENTITY.sub(lambda m: _BASIC_ENTITIES.get(m.group(1), " "), text)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass
class _OpenDoc:
    """A document between <DOC> and </DOC>, with the block being captured (if any)."""

    line: int
    docnos: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    heads: list[str] = field(default_factory=list)
    capture: str = ""  # upper-case tag name of the open block, "" when none
    capture_line: int = 0
    parts: list[str] = field(default_factory=list)


class _Parser:
    """The DOC state machine, fed one decoded line at a time.

    On a malformed document it raises, or — with `skip_bad` — reports it and resumes:
    at the next <DOC> (`resync`), or right away when the error closed the document.
    """

    def __init__(self, path: str, skip_bad: Callable[[TrecError], None] | None) -> None:
        self.path = path
        self.skip_bad = skip_bad
        self.doc: _OpenDoc | None = None
        self.skipping = False  # after an error: ignore everything up to the next <DOC>
        self.done: list[TrecDoc] = []
        self.pending: TrecError | None = None  # raised once the line's documents are out

    def feed(self, lineno: int, line: str) -> list[TrecDoc]:
        """Consume one line; return the documents it completed."""
        doc = self.doc
        if "<" not in line:  # the common case: a line of body text
            if doc is not None:
                if doc.capture:
                    doc.parts.append(line)
            elif not self.skipping and line.strip():
                self._outside_text(lineno, line)
            return []
        pos = 0
        try:
            for m in _TAG.finditer(line):
                self._text(lineno, line[pos : m.start()])
                self._tag(lineno, m.group(1) == "/", m.group(2).upper())
                pos = m.end()
            self._text(lineno, line[pos:])
        except TrecError as err:  # documents completed earlier on this line still count
            self.pending = err
        done, self.done = self.done, []
        return done

    def finish(self, lineno: int) -> None:
        """End of file: an open document is an error."""
        if self.doc is not None:
            self._bad(
                self.doc.line,
                "end of file inside the <DOC> opened on this line "
                f"(file has {lineno} lines; missing </DOC>?)",
            )

    def _bad(self, line: int, reason: str, resync: bool = False) -> None:
        err = TrecError(self.path, line, reason)
        if self.skip_bad is None:
            raise err
        self.doc = None
        self.skipping = resync
        self.skip_bad(err)

    def _outside_text(self, lineno: int, text: str) -> None:
        snippet = text.strip()
        snippet = snippet if len(snippet) <= 40 else snippet[:37] + "..."
        self._bad(lineno, f"text outside any <DOC>: {snippet!r}", resync=True)

    def _text(self, lineno: int, text: str) -> None:
        if not text or self.skipping:
            return
        if self.doc is not None:
            if self.doc.capture:
                self.doc.parts.append(text)
        elif text.strip():
            self._outside_text(lineno, text)

    def _tag(self, lineno: int, closing: bool, name: str) -> None:
        if self.skipping:
            if name == "DOC" and not closing:
                self.skipping = False
                self.doc = _OpenDoc(lineno)
            return
        if name == "DOC":
            self._doc_tag(lineno, closing)
        elif self.doc is None:
            slash = "/" if closing else ""
            self._bad(lineno, f"<{slash}{name}> outside any <DOC>", resync=True)
        elif name in _CAPTURED:
            (self._close_block if closing else self._open_block)(lineno, name)
        # any other tag inside a DOC is dropped (its text is kept only inside a block)

    def _doc_tag(self, lineno: int, closing: bool) -> None:
        doc = self.doc
        if not closing:
            if doc is not None:
                self._bad(
                    lineno,
                    f"<DOC> opened inside the <DOC> opened on line {doc.line} (missing </DOC>?)",
                )
            self.doc = _OpenDoc(lineno)
        elif doc is None:
            self._bad(lineno, "</DOC> without a matching <DOC>")
        else:
            self._close_doc(lineno, doc)

    def _open_block(self, lineno: int, name: str) -> None:
        doc = self.doc
        assert doc is not None
        if doc.capture:
            self._bad(
                lineno,
                f"<{name}> opened inside the <{doc.capture}> opened on line "
                f"{doc.capture_line} (missing </{doc.capture}>?)",
                resync=True,
            )
        elif name == "DOCNO" and doc.docnos:
            self._bad(lineno, f"second <DOCNO> in the <DOC> opened on line {doc.line}", resync=True)
        else:
            doc.capture, doc.capture_line, doc.parts = name, lineno, []

    def _close_block(self, lineno: int, name: str) -> None:
        doc = self.doc
        assert doc is not None
        if doc.capture != name:
            self._bad(lineno, f"</{name}> without a matching <{name}>", resync=True)
            return
        content = _unescape("".join(doc.parts)).strip()
        if name == "DOCNO":
            doc.docnos.append(content)
        elif name == "TEXT":
            doc.texts.append(content)
        else:
            doc.heads.append(content)
        doc.capture, doc.parts = "", []

    def _close_doc(self, lineno: int, doc: _OpenDoc) -> None:
        if doc.capture:
            self._bad(
                doc.capture_line,
                f"<{doc.capture}> is not closed before the </DOC> on line {lineno}",
            )
        elif not doc.docnos:
            self._bad(
                doc.line, f"the <DOC> opened on this line (closed on line {lineno}) has no <DOCNO>"
            )
        elif not doc.docnos[0]:
            self._bad(doc.line, "the <DOC> opened on this line has an empty <DOCNO>")
        else:
            self.done.append(
                TrecDoc(
                    docno=doc.docnos[0],
                    text="\n\n".join(t for t in doc.texts if t),
                    title="; ".join(h for h in doc.heads if h),
                    source=self.path,
                    line=doc.line,
                )
            )
            self.doc = None


def _read_lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, decoded line with its newline) of a plain or gzip file.

    Raises TrecError for bytes that are not UTF-8 and for damaged gzip data.
    """
    with open(path, "rb") as raw:
        is_gzip = raw.read(2) == _GZIP_MAGIC
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if is_gzip else raw
        lineno = 0
        try:
            for lineno, data in enumerate(stream, 1):
                yield lineno, _decode(path, lineno, data)
        except EOFError:
            raise TrecError(path, lineno + 1, "gzip data ends early (truncated file?)") from None
        except (gzip.BadGzipFile, zlib.error) as e:
            raise TrecError(path, lineno + 1, f"gzip data is corrupt ({e})") from None


def _decode(path: str, lineno: int, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TrecError(
            path,
            lineno,
            f"byte 0x{data[e.start]:02x} at byte {e.start + 1} of "
            "the line is not UTF-8 (the file must be UTF-8)",
        ) from None
    return text[1:] if lineno == 1 and text.startswith("\ufeff") else text


def iter_trec(
    path: str | PathLike[str], skip_bad: Callable[[TrecError], None] | None = None
) -> Iterator[TrecDoc]:
    """The documents of one TREC file (plain or gzip), in file order.

    Without `skip_bad` the first problem raises TrecError. With it, a malformed document
    is passed to `skip_bad` and skipped; a file that is not UTF-8 or whose gzip data is
    damaged is reported once and reading of that file stops.
    """
    source = str(path)
    parser = _Parser(source, skip_bad)
    lines = _read_lines(source)
    lineno = 0
    while True:
        try:
            lineno, line = next(lines)
        except StopIteration:
            break
        except TrecError as err:  # the file itself is unreadable from here on
            if skip_bad is None:
                raise
            skip_bad(err)
            return
        yield from parser.feed(lineno, line)
        if parser.pending is not None:
            raise parser.pending
    parser.finish(lineno)


def _render(doc: TrecDoc) -> str:
    docno = doc.docno
    if not docno or docno != docno.strip():
        raise ValueError(f"DOCNO {docno!r} must be non-empty without surrounding whitespace")
    head = f"<HEAD>{_escape(doc.title)}</HEAD>\n" if doc.title else ""
    return (
        f"<DOC>\n<DOCNO> {_escape(docno)} </DOCNO>\n{head}"
        f"<TEXT>\n{_escape(doc.text)}\n</TEXT>\n</DOC>\n"
    )


def write_trec(docs: Iterable[TrecDoc], path: str | PathLike[str]) -> int:
    """Write `docs` as a TREC file (gzip when the name ends in .gz); returns the count.

    Gzip output has no timestamp or file name in its header, so the same documents give
    the same bytes. Reading the file back gives the same docno, text and title, as long
    as text and title have no surrounding whitespace (the reader strips blocks).
    """
    target = str(path)
    count = 0
    with open(target, "wb") as raw:
        out = (
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0)
            if target.endswith(".gz")
            else raw
        )
        try:
            for doc in docs:
                out.write(_render(doc).encode("utf-8"))
                count += 1
        finally:
            if out is not raw:
                out.close()
    return count
