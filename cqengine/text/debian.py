"""A corpus of real English text, from the documentation Debian packages install.

The paper's corpus (TREC-1,2-AP) cannot be shipped; real technical English can be built
on any Debian machine: by default the PostgreSQL manual (`postgresql-doc-NN`, 15 on
Debian 12) and the English pages of The Debian Administrator's Handbook
(`debian-handbook`), both HTML under /usr/share/doc. Each page becomes text
(cqengine.text.html), long pages are cut at paragraph breaks into documents of about W
words (news-article sized by default), and the documents go to one TREC file per package
with docnos that are the same on every run. Nothing is installed here: a missing package
is an error that says what to install.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cqengine.text.html import page
from cqengine.text.trec import TrecDoc, write_trec

DOC_ROOT = Path("/usr/share/doc")
WORDS = 450  # words per document, about: a news article's
HANDBOOK = "debian-handbook"
POSTGRESQL = re.compile(r"^postgresql-doc-(\d+)$")
DEBIAN_12_POSTGRESQL = "postgresql-doc-15"  # the release's, when none is installed


class CorpusError(Exception):
    """The corpus cannot be built as asked; the message is one line for the user."""


@dataclass(frozen=True)
class Source:
    package: str
    tag: str  # the docnos' prefix
    pages: Path  # the directory of its HTML pages


def default_packages(doc_root: Path = DOC_ROOT) -> list[str]:
    """The newest PostgreSQL manual installed (else Debian 12's, to be named as missing),
    and the Handbook."""
    installed = sorted(
        (int(m.group(1)), p.name)
        for p in (doc_root.glob("postgresql-doc-*") if doc_root.is_dir() else [])
        if (m := POSTGRESQL.match(p.name))
    )
    return [installed[-1][1] if installed else DEBIAN_12_POSTGRESQL, HANDBOOK]


def source(package: str, doc_root: Path = DOC_ROOT) -> Source:
    """Where a package's HTML pages are: the Handbook's English ones, a PostgreSQL
    manual's html/, or any package's HTML anywhere under its doc directory."""
    if package == HANDBOOK:
        pages, tag = doc_root / package / "html" / "en-US", "DAH"
    elif m := POSTGRESQL.match(package):
        pages, tag = doc_root / package / "html", f"PG{m.group(1)}"
    else:
        pages, tag = doc_root / package, re.sub(r"[^A-Za-z0-9]", "", package).upper()
    if not pages.is_dir() or not html_files(pages):
        raise CorpusError(
            f"no HTML documentation of {package} in {pages}: install it with "
            f"`apt-get install {package}`"
        )
    return Source(package, tag, pages)


def html_files(directory: Path) -> list[Path]:
    """The HTML pages under a directory, symbolic links followed (python3.11-doc's html is
    one), in a stable order."""
    return sorted(
        Path(d) / f
        for d, _, files in os.walk(directory, followlinks=True)
        for f in files
        if f.endswith((".html", ".htm"))
    )


def chunks(paragraphs: list[str], words: int) -> list[list[str]]:
    """Paragraphs gathered, in order and whole, into documents of about `words` words: a
    document ends once it has `words`; a remainder under a quarter of that joins the
    document before it. None is empty."""
    out: list[list[str]] = []
    current: list[str] = []
    n = 0
    for p in paragraphs:
        if not p.strip():
            continue
        current.append(p)
        n += len(p.split())
        if n >= words:
            out.append(current)
            current, n = [], 0
    if current:
        if out and n < words / 4:
            out[-1] += current
        else:
            out.append(current)
    return out


def documents(src: Source, words: int = WORDS) -> Iterator[TrecDoc]:
    """A package's pages as documents, in a stable order with stable docnos
    (TAG-page-k, k counting from 1 within the page)."""
    for path in html_files(src.pages):
        name = re.sub(r"[^A-Za-z0-9._-]", "_", str(path.relative_to(src.pages).with_suffix("")))
        p = page(path.read_text(encoding="utf-8", errors="replace"))
        for k, part in enumerate(chunks(p.paragraphs, words), 1):
            yield TrecDoc(f"{src.tag}-{name}-{k}", "\n\n".join(part), p.title, str(path))


def version(package: str) -> str:
    """The installed package's version ("" where dpkg cannot tell)."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def spread(docs: list[TrecDoc], n: int | None) -> list[TrecDoc]:
    """At most n of the documents, evenly spaced over all of them (all, without n)."""
    if n is None or n >= len(docs):
        return docs
    return [docs[i * len(docs) // n] for i in range(n)]


def build(
    out: Path,
    packages: list[str] | None = None,
    docs: int | None = None,
    words: int = WORDS,
    doc_root: Path = DOC_ROOT,
    progress: Callable[[str], None] = lambda s: None,
) -> dict:
    """Write the corpus to `out`: PACKAGE.trec.gz per package and corpus.json (what it
    holds: packages and their versions, documents, words; not a document: give `prep`
    the .trec.gz files); returns that summary."""
    if words < 1:
        raise CorpusError(f"--words must be positive, not {words}")
    sources = [source(p, doc_root) for p in packages or default_packages(doc_root)]
    by_package = {}
    for src in sources:
        progress(f"reading {src.package}")
        by_package[src.package] = list(documents(src, words))
    every = [d for ds in by_package.values() for d in ds]
    if not every:
        raise CorpusError("the packages' pages hold no text")
    kept = {d.docno for d in spread(every, docs)}
    out.mkdir(parents=True, exist_ok=True)
    summary = {"words_per_document_target": words, "packages": [], "documents": 0, "words": 0}
    for src in sources:
        mine = [d for d in by_package[src.package] if d.docno in kept]
        write_trec(mine, out / f"{src.package}.trec.gz")
        n_words = sum(len(d.text.split()) for d in mine)
        summary["packages"].append(
            {
                "package": src.package,
                "version": version(src.package),
                "pages": str(src.pages),
                "documents": len(mine),
                "words": n_words,
            }
        )
        summary["documents"] += len(mine)
        summary["words"] += n_words
    (out / "corpus.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
