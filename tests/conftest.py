"""Fixtures only; what tests share besides fixtures is in tests/support."""

import os

import pytest
from support.live import FAST

# Spark's JVMs (the embedded one, and those of `cqengine prep` run as a command) spend most
# of their CPU compiling code a test's short job barely runs: compile it quickly instead
# (spark-submit passes this to the driver's JVM, unlike JAVA_TOOL_OPTIONS, without a word
# on stderr, where tests read the command's one-line errors)
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture
def fast():
    return FAST


@pytest.fixture(scope="session")
def spark():
    """One embedded Spark for the whole run (a JVM takes seconds to start)."""
    from cqengine.spark.session import session

    s = session("local[2]", app="cqengine-tests")
    try:
        yield s
    finally:
        s.stop()
