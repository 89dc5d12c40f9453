"""The suite in parallel (`make test` runs pytest-xdist's workers): what each worker keeps to
itself, which tests share a worker, and in what order the work is handed out.

- Ports: each worker takes them from a range of its own, below the kernel's ephemeral ports
  (Linux gives outgoing connections 32768-60999), so no two tests pick the same port and no
  outgoing connection holds one a test picked.
- Units of work: a module's tests run on one worker, one after another, so a fixture made
  once per module (a ring, a corpus) is made once; the tests of the embedded Spark (the
  `spark` fixture, made once per worker) are one unit, so one JVM serves them all.
- Order: units that start rings, JVMs or whole benchmarks go first, so that no worker is
  left with a long one while the others have finished (longest first, as a scheduler of
  jobs of known length would)."""

from __future__ import annotations

import os

from xdist.scheduler import LoadScopeScheduling

PORTS = range(10_000, 32_000)  # split among the workers
SPARK = "tests/spark"  # one unit: every module that uses the session's Spark is here
# folders in the order their units are handed out: the longest units first
FIRST = ("tests/spark", "tests/live", "tests/bench", "tests/evaluation", "tests/chord")


def worker_port_range() -> str | None:
    """This worker's share of PORTS as LO-HI, or None outside a parallel run."""
    name = os.environ.get("PYTEST_XDIST_WORKER")
    if not name:
        return None
    index, count = int(name.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    size = len(PORTS) // count
    lo = PORTS.start + index * size
    return f"{lo}-{lo + size - 1}"


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the Spark folder."""
    module = nodeid.split("::")[0]
    return SPARK if module.startswith(SPARK + "/") else module


def rank(nodeid: str) -> int:
    """Where the test's unit comes in the order of FIRST (the rest after, as collected)."""
    return next((i for i, f in enumerate(FIRST) if nodeid.startswith(f + "/")), len(FIRST))


class ByUnit(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, with `unit` for scope and the collection's order
    (longest units first, see `rank`) kept rather than units sorted by their test counts."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)
