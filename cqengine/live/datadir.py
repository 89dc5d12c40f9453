"""A node's data directory apart from what it keeps (cqengine.live.storage):

- whose it is: the node (its address and ring id), the ring (its id) and the engine
  settings its state was written under, as its SQLite file's meta table records them. A
  node is refused state that is not its own, in one line naming the remedy; these are
  read without opening the directory for writing (a restarted node takes back its id and
  its ring's before it starts);
- the room left on its disk (Room): below a reserve, the node keeps nothing more, and
  refuses what would change its state, until there is room again."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

from google.protobuf.message import DecodeError

from cqengine.proto import cqengine_pb2 as pb

FILE = "node.sqlite"
RESERVE = 64 << 20  # bytes a data directory's disk keeps free: below, the storage is full
CHECK_EVERY = 1.0  # seconds between two looks at the disk's free space
# settings that shape how documents are announced and resolved, never what a node keeps: a
# ring may be restarted with them changed (its nodes together: a node that joins takes the
# ring's)
NO_STATE = ("header_terms", "filter_lease", "merge_queries")


def damaged(data_dir: Path, why: object) -> str:
    """The one-line start-up error of a data directory found damaged, with the remedy."""
    return (
        f"data directory {data_dir} is damaged ({why}): start the node with --rejoin-empty "
        "to move it aside and refill the node from its replicas, or put back a copy"
    )


def set_aside(data_dir: Path) -> Path:
    """Move a (damaged) data directory aside, beside it, named for when: where it went."""
    aside = data_dir.with_name(f"{data_dir.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while aside.exists():  # (twice in a second)
        aside, n = aside.with_name(f"{aside.name}-{n}"), n + 1
    data_dir.rename(aside)
    return aside


def owner_problem(
    data_dir: Path, meta: dict, address: str, settings: bytes, ring: int
) -> str | None:
    """Why the state data_dir holds (its meta table) is not this node's, in this ring
    with these settings (None: it is). `ring` 0: not known yet; a directory written
    before rings had ids is any ring's."""
    if meta["address"] != address:
        return (
            f"data directory {data_dir} holds the state of node {meta['address']}, not "
            f"{address}: start that node there, or give this one another --data-dir"
        )
    if not same_state(bytes(meta["settings"]), settings):
        return (
            f"data directory {data_dir} was written in a ring with other engine settings"
            f"{differing(bytes(meta['settings']), settings)}: start the ring with the "
            "options it had, or remove the directory"
        )
    kept = int(meta["ring"], 16) if "ring" in meta else 0
    if kept and ring and kept != ring:
        return (
            f"data directory {data_dir} holds the state of a node of ring {kept:016x}, "
            f"not of ring {ring:016x}: start it in its own ring, or give it another "
            "--data-dir (two rings never merge)"
        )
    return None


def same_state(kept: bytes, given: bytes) -> bool:
    """Were these settings (EngineConfig) alike in all that shapes what a node keeps?"""
    try:
        a, b = pb.EngineConfig.FromString(kept), pb.EngineConfig.FromString(given)
    except DecodeError:  # not settings at all: alike only if the very same bytes
        return kept == given
    for config in (a, b):
        for name in NO_STATE:
            config.ClearField(name)
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def differing(kept: bytes, given: bytes) -> str:
    """Which settings differ, as the error names them: " (home_log: off there, on here)"."""
    try:
        a, b = pb.EngineConfig.FromString(kept), pb.EngineConfig.FromString(given)
    except DecodeError:
        return ""
    names = [f.name for f in pb.EngineConfig.DESCRIPTOR.fields if f.name not in NO_STATE]
    shown = {True: "on", False: "off"}
    out = []
    for name in names:
        there, here = getattr(a, name), getattr(b, name)
        if there != here and not hasattr(there, "ListFields"):  # (term files: not named)
            there, here = shown.get(there, there), shown.get(here, here)
            out.append(f"{name}: {there} there, {here} here")
    return f" ({'; '.join(out)})" if out else ""


def stored_ring_id(data_dir: Path) -> int:
    """The id of the ring whose node's state data_dir holds (0: no state, or none recorded:
    it was written before rings had ids)."""
    value = _meta(data_dir, "ring")
    return int(value, 16) if value else 0


def _meta(data_dir: Path, name: str):
    """A value of data_dir's meta table, read only (None: no state, or no such value)."""
    path = data_dir / FILE
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def stored_id(data_dir: Path) -> int | None:
    """The id (its place on the ring) of the node whose state data_dir holds (None: no
    state, or none recorded): a node restarted there must take it again."""
    address = _meta(data_dir, "address")
    found = re.search(r"\(id ([0-9a-f]{16})\)$", str(address)) if address else None
    return int(found.group(1), 16) if found else None


class Room:
    """The free space on a data directory's disk against a reserve, looked at (statvfs)
    at most every CHECK_EVERY seconds: a call per request costs nothing."""

    def __init__(self, path: Path, reserve: int = RESERVE) -> None:
        self.path = path
        self.reserve = reserve  # bytes the disk keeps free (0: as long as writes succeed)
        self.looked = -CHECK_EVERY  # when it last looked
        self.looked_now = False  # whether the last call looked
        self._low: str | None = None

    def low(self) -> str | None:
        """How little room is left, if below the reserve (None: there is room)."""
        now = time.monotonic()
        self.looked_now = now - self.looked >= CHECK_EVERY
        if self.looked_now:
            self.looked = now
            self._low = self._look() if self.reserve else None
        return self._low

    def _look(self) -> str | None:
        try:
            disk = os.statvfs(self.path)
        except OSError as e:
            return f"cannot look at the free space: {e}"
        free = disk.f_bavail * disk.f_frsize
        if free >= self.reserve:
            return None
        return f"{free >> 20} MiB free, below the reserve of {self.reserve >> 20} MiB"
