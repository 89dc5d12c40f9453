"""`cqengine prep`: corpus preprocessing in Spark (paper section 7.1).

Inputs are files or directories (searched recursively) of four kinds, told apart by name
and content: TREC SGML (plain or gzip, many <DOC> per file), JSON Lines (`docno`, `text`,
optional `title`; `.jsonl`, `.ndjson`, optionally gzipped), HTML pages (`.html`, `.htm`:
one document each, its text as cqengine.text.html makes it, its <title>) and plain-text
files (one document each; docno of these two = path below the directory given). Files
are parsed in the workers (one task per file), documents are spread over the cluster and
analyzed with
`cqengine.text.analysis.analyze` — the function the live engine applies — and written as:

    OUT/documents.parquet   docno, title, terms array<string>, term_ids array<long>
    OUT/terms.parquet       term, term_id long, df long (documents holding the term)
    OUT/stats.tsv           term<TAB>df, most frequent first: the engine's --stats file
    OUT/summary.json        documents, vocabulary, unique terms per document (mean, spread)

Term ids are unsigned 64-bit; Parquet holds them as int64, two's complement (`signed`),
and `unsigned` turns a stored value back into the engine's id. (decimal(20,0) was exact
too, but made the job several times slower: Python Decimals are costly to ship to the JVM.)
A malformed document stops the job naming its file and line, unless `skip_bad` is set:
then it is skipped and counted.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

from chord.protocol.ids import MASK
from cqengine.spark.session import stage
from cqengine.text.analysis import analyze, term_id
from cqengine.text.html import page
from cqengine.text.trec import TrecError, iter_trec

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz")
SNIFF = 4096


def signed(x: int) -> int:
    """An unsigned 64-bit id as Parquet's int64 holds it."""
    return x - (1 << 64) if x >> 63 else x


def unsigned(x: int) -> int:
    """The engine's id of a stored int64."""
    return x & MASK


class PrepError(ValueError):
    """The job cannot go on; the message names the file (and line) at fault."""


# ---- finding and reading inputs (runs in the workers) -------------------------------------


def _open_text(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def classify(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(HTML_SUFFIXES):
        return "html"
    try:
        with _open_text(path) as f:
            head = f.read(SNIFF)
    except (OSError, EOFError):
        return "text"  # reading it properly will report what is wrong
    return "trec" if head.lstrip(b"\xef\xbb\xbf \t\r\n").lower().startswith(b"<doc") else "text"


def discover(inputs: list[Path]) -> list[tuple[str, str, str]]:
    """(file, kind, docno base) for every input file, in a stable order. Paths are absolute:
    executors on a cluster open them from their own working directories."""
    out = []
    for given in (Path(p).absolute() for p in inputs):
        if given.is_file():
            out.append((str(given), classify(given), str(given.parent)))
        elif given.is_dir():
            files = sorted(
                p
                for p in given.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(given).parts)
            )
            out += [(str(p), classify(p), str(given)) for p in files]
        else:
            raise PrepError(f"{given}: no such file or directory")
    return out


def read_file(item: tuple[str, str, str]) -> Iterator[tuple]:
    """Records of one file: ("doc", docno, title, text) or ("bad", file, line, message)."""
    path, kind, base = item
    try:
        if kind == "trec":
            yield from _read_trec(Path(path))
        elif kind == "jsonl":
            yield from _read_jsonl(Path(path))
        elif kind == "html":
            yield from _read_html(Path(path), Path(base))
        else:
            yield from _read_text(Path(path), Path(base))
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        yield ("bad", path, 0, f"{path}: cannot read ({e})")


def _read_trec(path: Path) -> Iterator[tuple]:
    bad: list[TrecError] = []
    for doc in iter_trec(path, skip_bad=bad.append):
        yield from (("bad", str(path), e.line, str(e)) for e in bad)
        bad.clear()
        yield ("doc", doc.docno, doc.title, doc.text)
    yield from (("bad", str(path), e.line, str(e)) for e in bad)


def _read_jsonl(path: Path) -> Iterator[tuple]:
    with _open_text(path) as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
                docno, text = rec["docno"], rec["text"]
                if not isinstance(docno, str) or not docno.strip() or not isinstance(text, str):
                    raise TypeError("docno must be a non-empty string and text a string")
                title = rec.get("title") or ""
            except UnicodeDecodeError:
                yield ("bad", str(path), n, f"{path}:{n}: not UTF-8")
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                what = f"missing field {e}" if isinstance(e, KeyError) else str(e).split(":")[0]
                yield (
                    "bad",
                    str(path),
                    n,
                    f"{path}:{n}: not a JSON object with docno and text ({what})",
                )
            else:
                yield ("doc", docno.strip(), str(title), text)


def _read_html(path: Path, base: Path) -> Iterator[tuple]:
    """An HTML page as one document: its text (cqengine.text.html), its title."""
    with _open_text(path) as f:
        p = page(f.read().decode("utf-8", errors="replace"))
    docno = str(path.relative_to(base)) if path.is_relative_to(base) else path.name
    yield ("doc", docno, p.title, "\n\n".join(p.paragraphs))


def _read_text(path: Path, base: Path) -> Iterator[tuple]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        yield ("bad", str(path), line, f"{path}:{line}: not UTF-8")
        return
    docno = str(path.relative_to(base)) if path.is_relative_to(base) else path.name
    yield ("doc", docno, "", text)


def analyzed(record: tuple) -> tuple:
    """A document record analyzed (kind, docno, title, terms, ids); a "bad" record as it is."""
    if record[0] != "doc":
        return record
    _, docno, title, text = record
    terms = analyze(f"{title}\n{text}")
    return "doc", docno, title, terms, [signed(term_id(t)) for t in terms]


# ---- the job ------------------------------------------------------------------------------

DOC_SCHEMA = "docno string, title string, terms array<string>, term_ids array<long>"
TERM_SCHEMA = "term string, term_id long, df long"


def run_prep(
    spark,
    inputs: list[Path],
    out: Path,
    skip_bad: bool = False,
    partitions: int | None = None,
    quiet: bool = False,
) -> dict:
    from pyspark import StorageLevel

    sc = spark.sparkContext
    files = discover(inputs)
    if not files:
        raise PrepError(f"no input files in {', '.join(map(str, inputs))}")
    parts = partitions or max(2, sc.defaultParallelism * 2)
    with stage(f"reading and analyzing {len(files)} files", quiet):
        parsed = sc.parallelize(files, len(files)).flatMap(read_file)
        if len(files) < parts:  # too few files to keep every core busy: spread the documents
            parsed = parsed.repartition(parts)
        rows = parsed.map(analyzed).persist(StorageLevel.MEMORY_AND_DISK)
        bad = rows.filter(lambda r: r[0] == "bad")
        n_bad = bad.count()
        first_bad = bad.takeOrdered(5, key=lambda r: (r[1], r[2])) if n_bad else []
        if n_bad and not skip_bad:
            rows.unpersist()
            raise PrepError(
                first_bad[0][3]
                + (f" (and {n_bad - 1} more; --skip-bad skips them)" if n_bad > 1 else "")
            )
        docs = spark.createDataFrame(
            rows.filter(lambda r: r[0] == "doc").map(lambda r: r[1:]),
            DOC_SCHEMA,
            verifySchema=False,
        ).persist(StorageLevel.MEMORY_AND_DISK)
        n_docs = docs.count()
        rows.unpersist()
    if n_docs == 0:
        docs.unpersist()
        raise PrepError(f"no documents in {', '.join(map(str, inputs))}")
    if out.exists():
        shutil.rmtree(out)
    with stage("writing documents and term statistics", quiet):
        docs.write.parquet(str(out / "documents.parquet"))
        df = _document_frequencies(docs)
        spark.createDataFrame(
            [(t, signed(term_id(t)), n) for t, n in df], TERM_SCHEMA
        ).write.parquet(str(out / "terms.parquet"))
        _write_stats_tsv(df, out / "stats.tsv")
        summary = _summary(docs, n_docs, len(df), n_bad, files, inputs)
    docs.unpersist()
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if n_bad and not quiet:
        print(f"skipped {n_bad} malformed documents, first: {first_bad[0][3]}", flush=True)
    return summary


def _document_frequencies(docs) -> list[tuple[str, int]]:
    """(term, df), most frequent first; counted in the JVM, collected (a vocabulary fits)."""
    from pyspark.sql import functions as F

    counts = docs.select(F.explode("terms").alias("term")).groupBy("term").count()
    return sorted(
        ((r["term"], r["count"]) for r in counts.toLocalIterator()), key=lambda p: (-p[1], p[0])
    )


def _write_stats_tsv(df: list[tuple[str, int]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("term\tdf\n")
        f.writelines(f"{t}\t{n}\n" for t, n in df)


def _summary(docs, n_docs: int, vocabulary: int, n_bad: int, files, inputs) -> dict:
    from pyspark.sql import functions as F

    row = (
        docs.select(F.size("terms").alias("n"))
        .agg(
            F.mean("n").alias("mean"),
            F.stddev_pop("n").alias("std"),
            F.min("n").alias("min"),
            F.max("n").alias("max"),
            F.sum("n").alias("total"),
        )
        .first()
    )
    duplicates = docs.groupBy("docno").count().filter("count > 1").count()
    return {
        "inputs": [str(p) for p in inputs],
        "files": len(files),
        "documents": n_docs,
        "vocabulary": vocabulary,
        "unique_terms_per_document": {
            "mean": row["mean"],
            "std": row["std"] if not math.isnan(row["std"]) else 0.0,
            "min": row["min"],
            "max": row["max"],
        },
        "term_occurrences": row["total"],
        "skipped_bad_documents": n_bad,
        "duplicate_docnos": duplicates,
    }
