"""Spark job: a query workload (paper section 7.1) drawn from a corpus's term statistics.

The driver reads the vocabulary and document frequencies that `cqengine prep` wrote
(STATS_DIR/terms.parquet), builds one `cqengine.text.workload.Sampler` and broadcasts it; the
workers draw the queries of `spark.range(queries)`, each in its own partition.

Determinism: `Sampler.query(i)` seeds a fresh generator with (seed, i) and depends on
nothing else, so query i is the same whichever worker draws it, in whatever order, over
however many partitions -- the job's output equals
`cqengine.text.workload.generate_queries(df, queries, kind, mean_size, seed)` run in one
process. queries.jsonl and summary.json are written by the driver in query_id order, so
they are byte-for-byte the same for any partitioning too (except the `partitions` field).

With `boolean` (a share, 0-1), that share of the queries, chosen by seed, is rewritten
into the query language's other forms (OR, NOT, phrases, groups:
`cqengine.text.workload.Sampler.boolean`); `query` holds each query's text, a
conjunction's being its terms. With term statistics alone a phrase is two drawn terms,
which real text seldom holds in a row.

Output, in OUT (replaced if it exists):
  queries.parquet  query_id long, size int, terms array<string> (terms in draw order),
                   query string (the text to subscribe)
  queries.jsonl    {"query_id": i, "terms": [...], "query": "..."} per line, by query_id
  summary.json     kind, queries, seed, requested and measured size statistics, the
                   boolean share asked for and how many queries it rewrote, ...
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path

from cqengine.spark.session import stage
from cqengine.text.workload import KINDS, Sampler

QUERY_SCHEMA = "query_id long, size int, terms array<string>, query string"


class WorkloadError(ValueError):
    """A workload request that cannot be carried out; the message is one plain line."""


def run_workload(
    spark,
    stats_dir: Path,
    kind: str,
    queries: int,
    mean_size: float,
    seed: int,
    out: Path,
    partitions: int | None = None,
    quiet: bool = False,
    boolean: float = 0.0,
) -> dict:
    """Draw `queries` queries of `kind` into OUT (a `boolean` share of them rewritten in
    the query language); returns the summary also written there."""
    stats_dir, out = Path(stats_dir).absolute(), Path(out).absolute()
    _validate(stats_dir, kind, queries, mean_size, out, partitions)
    if not 0.0 <= boolean <= 1.0:
        raise WorkloadError(f"the boolean share must be between 0 and 1, not {boolean}")
    with stage("reading term statistics", quiet):
        df = read_term_df(spark, stats_dir)
    partitions = partitions or spark.sparkContext.defaultParallelism
    out.mkdir(parents=True, exist_ok=True)
    with stage(f"drawing {queries} {kind} queries over {partitions} partitions", quiet):
        _draw(spark, Sampler(df, kind, mean_size, seed), queries, partitions, out, boolean)
    with stage("writing queries.jsonl and summary.json", quiet):
        sizes, rewritten = _write_jsonl(spark, out)
        summary = _summary(kind, queries, seed, mean_size, sizes, len(df), partitions)
        summary.update(boolean=boolean, boolean_queries=rewritten)
        _write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _validate(
    stats_dir: Path, kind: str, queries: int, mean_size: float, out: Path, partitions: int | None
) -> None:
    """Everything checkable before Spark does any work, so a bad request writes nothing."""
    if kind not in KINDS:
        raise WorkloadError(f"unknown workload kind {kind!r}; choose one of {', '.join(KINDS)}")
    if queries < 1:
        raise WorkloadError(f"the number of queries must be at least 1, not {queries}")
    if not (math.isfinite(mean_size) and mean_size > 0):
        raise WorkloadError(f"the mean query size must be a positive number, not {mean_size}")
    if partitions is not None and partitions < 1:
        raise WorkloadError(f"partitions must be at least 1, not {partitions}")
    if not (stats_dir / "terms.parquet").is_dir():
        raise WorkloadError(f"{stats_dir}: no terms.parquet here; run `cqengine prep` first")
    if out.exists() and not out.is_dir():
        raise WorkloadError(f"{out}: exists and is not a directory")


def read_term_df(spark, stats_dir: Path) -> dict[str, int]:
    """term -> document frequency, from STATS_DIR/terms.parquet, in the driver."""
    from pyspark.errors import AnalysisException

    path = stats_dir / "terms.parquet"
    try:
        table = spark.read.parquet(str(path))
    except AnalysisException as e:  # e.g. a directory without parquet files
        raise WorkloadError(
            f"{path}: not readable as term statistics ({str(e).splitlines()[0]})"
        ) from None
    missing = {"term", "df"} - set(table.columns)
    if missing:
        raise WorkloadError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; rerun `cqengine prep`"
        )
    rows = table.where("term IS NOT NULL AND df > 0").select("term", "df").collect()
    if not rows:
        raise WorkloadError(f"{path}: no terms; was the corpus empty?")
    return {row.term: int(row.df) for row in rows}


def _draw(
    spark, sampler: Sampler, queries: int, partitions: int, out: Path, boolean: float
) -> None:
    """Workers draw their share of query ids with the broadcast sampler; parquet out."""
    shared = spark.sparkContext.broadcast(sampler)
    try:
        ids = spark.range(queries, numPartitions=partitions).rdd.map(lambda row: row.id)
        rows = ids.mapPartitions(lambda part: _draw_queries(shared.value, part, boolean))
        table = spark.createDataFrame(rows, QUERY_SCHEMA)
        table.write.mode("overwrite").parquet(str(out / "queries.parquet"))
    finally:
        shared.unpersist()


def _draw_queries(
    sampler: Sampler, ids: Iterable[int], boolean: float
) -> Iterator[tuple[int, int, list[str], str]]:
    for i in ids:
        terms = sampler.query(i)
        yield i, len(terms), terms, sampler.boolean(i, boolean)


def _write_jsonl(spark, out: Path) -> tuple[list[int], int]:
    """queries.jsonl in query_id order, streamed through the driver; returns the sizes and
    how many queries are more than their terms."""
    table = spark.read.parquet(str(out / "queries.parquet")).orderBy("query_id")
    sizes, rewritten = [], 0
    tmp = out / "queries.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in table.toLocalIterator():
            record = {"query_id": row.query_id, "terms": list(row.terms), "query": row.query}
            f.write(json.dumps(record) + "\n")
            sizes.append(row.size)
            rewritten += row.query != " ".join(row.terms)
    os.replace(tmp, out / "queries.jsonl")
    return sizes, rewritten


def _summary(
    kind: str,
    queries: int,
    seed: int,
    mean_size: float,
    sizes: list[int],
    vocabulary: int,
    partitions: int,
) -> dict:
    return {
        "kind": kind,
        "queries": queries,
        "seed": seed,
        "mean_size": mean_size,
        "measured_mean_size": statistics.fmean(sizes),
        "measured_size_stdev": statistics.stdev(sizes) if len(sizes) > 1 else 0.0,
        "vocabulary_size": vocabulary,
        "partitions": partitions,
    }


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
