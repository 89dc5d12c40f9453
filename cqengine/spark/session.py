"""Spark sessions for cqengine's jobs: embedded local Spark by default, any cluster by URL.

The jobs run the very `cqengine.text.analysis.analyze` the live engine uses, in Python workers
started with this interpreter (so they see the same packages). Spark's console noise is
kept to warnings; the jobs report their own stages on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources

DEFAULT_MASTER = "local[*]"


def _log_config() -> str:
    return str(resources.files("cqengine") / "data" / "log4j2.properties")


def session(master: str | None = None, app: str = "cqengine"):
    """A SparkSession; `master` None means $CQENGINE_SPARK_MASTER or local[*].

    Under spark-submit the master comes from spark-submit itself and this one is ignored.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    log = f"-Dlog4j2.configurationFile=file:{_log_config()}"
    builder = (
        SparkSession.builder.appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", log)
        .config("spark.executor.extraJavaOptions", log)
        .config("spark.sql.session.timeZone", "UTC")
    )
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # set when spark-submit launched us
        master = master or os.environ.get("CQENGINE_SPARK_MASTER", DEFAULT_MASTER)
        if master.startswith("local"):
            os.environ.setdefault(
                "SPARK_LOCAL_IP", "127.0.0.1"
            )  # an embedded Spark stays on loopback
            # local mode runs the executors inside the driver: give it room for a corpus
            builder = builder.config(
                "spark.driver.memory", os.environ.get("CQENGINE_SPARK_DRIVER_MEMORY", "2g")
            )
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextmanager
def stage(name: str, quiet: bool = False) -> Iterator[None]:
    """Report a job stage and how long it took."""
    start = time.monotonic()
    if not quiet:
        print(f"[{name}] ...", file=sys.stderr, flush=True)
    yield
    if not quiet:
        print(f"[{name}] done in {time.monotonic() - start:.1f}s", file=sys.stderr, flush=True)
