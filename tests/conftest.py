"""Fixtures, and how the suite's parallel workers keep apart; what tests share besides
fixtures is in tests/support."""

import os
import tempfile

import pytest
from support.live import FAST
from support.parallel import ByUnit, rank, worker_port_range

# Spark's JVMs (the embedded one, and those of `cqengine prep` run as a command) spend most
# of their CPU compiling code a test's short job barely runs: compile it quickly instead
# (spark-submit passes this to the driver's JVM, unlike JAVA_TOOL_OPTIONS, without a word
# on stderr, where tests read the command's one-line errors)
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config):
    # each worker of `pytest -n` takes free ports from a range of its own, it and every
    # process it starts (`ring up`, nodes), so two tests never pick the same port
    ports = worker_port_range()
    if ports is not None:
        os.environ["CQENGINE_PORT_RANGE"] = ports


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker sorts alike: one collection
        items.sort(key=lambda item: rank(item.nodeid))


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own choice
def pytest_xdist_make_scheduler(config, log):
    return ByUnit(config, log)


@pytest.fixture(scope="session", autouse=True)
def own_temporary_folder(tmp_path_factory):
    """Temporary files of this worker, and of the processes it starts, go under its own
    base folder (pytest's, which keeps the last few runs) rather than the machine's /tmp."""
    folder = tmp_path_factory.getbasetemp() / "tmp"
    folder.mkdir(exist_ok=True)
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # tempfile looks at TMPDIR again
    yield folder
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    tempfile.tempdir = None


@pytest.fixture
def fast():
    return FAST


@pytest.fixture(scope="session")
def spark():
    """One embedded Spark for the whole run (a JVM takes seconds to start); the tests that
    use it run on one worker (support.parallel)."""
    from cqengine.spark.session import session

    s = session("local[2]", app="cqengine-tests")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def captured():
    """Genuine requests of every kind from busy simulated rings, and those rings
    (support.malformed), for the tests that break them: made once, since a broken message
    is refused and changes nothing of what they hold."""
    from support.malformed import capture

    return capture()


@pytest.fixture(scope="module")
def small_ring():
    """Five nodes with a subscription and a document, to hand bad queries and documents to
    (support.ring_contents.ring_state says what they must leave as it was); the ring and
    its workload."""
    from support.workloads import make_settings, workload

    from cqengine.evaluation.measuring.sim import EngineSimulator

    wl = workload(1)
    sim = EngineSimulator(
        5, make_settings(wl, strategy="mhi", max_document_bytes=200, seed=2), seed=2
    )
    sim.subscribe(wl.queries[0])
    sim.publish("GOOD-1", "a perfectly good document", "")
    return sim, wl
