"""The real `cqengine` command line in its own process, and the one-line errors it owes."""

import subprocess
import sys


def cqengine(*args, timeout=120, env=None):
    """Run the real command line; returns the finished process (never raises on exit code)."""
    return subprocess.run(
        [sys.executable, "-m", "cqengine", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cqengine: error: "), lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    for f in fragments:
        assert f in lines[0], lines[0]
