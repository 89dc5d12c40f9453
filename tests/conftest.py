"""Fixtures only; what tests share besides fixtures is in tests/support."""

import pytest
from support.live import FAST


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
