"""`make` refuses clearly when Java 17+ (which Spark needs) is missing."""

import shutil
import subprocess

import pytest
from support.repo import ROOT


def make_java(tmp_path, java_script=None):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "sed", "head", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if java_script is not None:
        java = bin_dir / "java"
        java.write_text(f"#!/bin/sh\n{java_script}\n")
        java.chmod(0o755)
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "java"],
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir)},
        timeout=30,
    )


@pytest.mark.parametrize(
    "script,found",
    [
        (None, "no java on PATH"),
        ("echo 'openjdk version \"11.0.2\" 2019-01-15' >&2", "found: 11"),
        ("echo 'java version \"1.8.0_292\"' >&2", "found: 1"),
    ],
)
def test_old_or_missing_java_is_refused(tmp_path, script, found):
    proc = make_java(tmp_path, script)
    assert proc.returncode != 0
    assert "Java 17 or newer is required" in proc.stderr and found in proc.stderr


def test_java_17_passes(tmp_path):
    proc = make_java(tmp_path, "echo 'openjdk version \"17.0.15\" 2025-04-15' >&2")
    assert proc.returncode == 0, proc.stderr
