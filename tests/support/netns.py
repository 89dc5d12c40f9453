"""Whether this machine lets a test make network namespaces (its own hosts, addresses
and links, never the machine's own interfaces): asked once per run."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess


@functools.cache
def netns_usable() -> str | None:
    """Why network namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "needs root to make network namespaces"
    if shutil.which("ip") is None:
        return "needs `ip` (iproute2)"
    probe = f"cqe{os.getpid()}probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    gone = subprocess.run(["ip", "netns", "delete", probe], capture_output=True, text=True)
    if gone.returncode != 0:
        raise RuntimeError(f"the probe namespace {probe} stays: {gone.stderr.strip()}")
    return None
