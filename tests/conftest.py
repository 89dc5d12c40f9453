import subprocess
import sys

import pytest

from chord.live import Timing

# Fast maintenance so live rings converge in seconds on a 2-core machine.
FAST = Timing(stabilize=0.15, fix_fingers=0.3, check_predecessor=0.3, rpc_timeout=1.0)


def cqengine(*args, timeout=120, env=None):
    """Run the real command line; returns the finished process (never raises on exit code)."""
    return subprocess.run([sys.executable, "-m", "cqengine", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cqengine: error: "), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture
def fast():
    return FAST
