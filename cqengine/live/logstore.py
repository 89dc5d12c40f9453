"""The home keys' logs on disk (Settings.home_log; docs/home-log.md), in the node's SQLite
database beside the rest of its state (cqengine.live.storage).

A member keeps, per log, what must outlive its process before it answers a leader: its
entries, the highest epoch it promised (and to whom) and the last position it knows
committed. One row per entry, the entry as the leader serialized it with a CRC32 of
those bytes: a member never parses an entry to keep it, and a damaged row is found when
the log is read back, not when a mailbox is derived from it. Entries folded into a
checkpoint (limits.LOG_KEPT) go; the checkpoint is one row, with its CRC32.
"""

from __future__ import annotations

import sqlite3
import zlib

from chord.live.server import StartupError
from cqengine.core.homelog.log import Log
from cqengine.proto import cqengine_pb2 as pb

TABLES = """
CREATE TABLE IF NOT EXISTS logs (  -- a home key's log: the member's promise and commit
    key INTEGER PRIMARY KEY, promised INTEGER NOT NULL, promised_to TEXT NOT NULL,
    committed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS log_entries (  -- its entries, as serialized, with a CRC32
    key INTEGER NOT NULL, position INTEGER NOT NULL, entry BLOB NOT NULL, crc INTEGER NOT NULL,
    PRIMARY KEY (key, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_checkpoints (  -- what its entries up to a position made
    key INTEGER PRIMARY KEY, position INTEGER NOT NULL, checkpoint BLOB NOT NULL,
    crc INTEGER NOT NULL
);
"""


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


class LogStore:
    """The logs' rows: changes gather until the database's next commit."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.executescript(TABLES)
        # key -> its log, the first position changed, whether its checkpoint changed
        self.pending: dict[int, tuple[Log, int, bool]] = {}

    def changed(self, key: int, log: Log) -> None:
        """The log changed: its entries from `log.changed` on replace those kept, and its
        promise, commit position and checkpoint are as they are now (written at the
        commit)."""
        kept = self.pending.get(key)
        if kept is None:
            self.pending[key] = (log, log.changed, log.compacted)
        else:
            self.pending[key] = (log, min(kept[1], log.changed), kept[2] or log.compacted)

    def write(self) -> None:
        """The changes, into the open transaction (pending until `written`)."""
        db = self.db
        for key, (log, since, compacted) in self.pending.items():
            k = _signed(key)
            db.execute(
                "INSERT OR REPLACE INTO logs VALUES (?, ?, ?, ?)",
                (k, log.promised, log.promised_to, log.committed),
            )
            if compacted:
                data = log.checkpoint.SerializeToString()
                db.execute(
                    "INSERT OR REPLACE INTO log_checkpoints VALUES (?, ?, ?, ?)",
                    (k, log.base, data, zlib.crc32(data)),
                )
                db.execute("DELETE FROM log_entries WHERE key = ? AND position <= ?", (k, log.base))
            since = max(since, log.base + 1)
            db.execute("DELETE FROM log_entries WHERE key = ? AND position >= ?", (k, since))
            rows = []
            for position, entry in enumerate(log.after(since - 1), since):
                data = entry.SerializeToString()
                rows.append((k, position, data, zlib.crc32(data)))
            db.executemany("INSERT INTO log_entries VALUES (?, ?, ?, ?)", rows)

    def written(self) -> None:
        """The transaction `write` wrote into is committed (until then, a commit that
        fails leaves the changes pending, to be written by the next)."""
        self.pending = {}

    def load(self) -> list[Log]:
        """Every log kept, as it was last committed. A row whose bytes fail their CRC
        refuses the start: an entry read wrong would number alerts wrong at every member
        that derived from it."""
        logs: dict[int, Log] = {}
        for key, promised, promised_to, committed in self.db.execute("SELECT * FROM logs"):
            unsigned = key + (1 << 64) if key < 0 else key
            logs[key] = Log(unsigned, promised=promised, promised_to=promised_to)
            logs[key].committed = committed
        for key, position, data, crc in self.db.execute("SELECT * FROM log_checkpoints"):
            log = logs[key]
            if not (isinstance(data, bytes) and zlib.crc32(data) == crc):
                raise _damaged(log, f"its checkpoint at position {position}")
            log.checkpoint = pb.LogCheckpoint.FromString(data)
        rows = self.db.execute("SELECT * FROM log_entries ORDER BY key, position")
        for key, position, data, crc in rows:
            log = logs[key]
            whole = isinstance(data, bytes) and zlib.crc32(data) == crc
            if not whole or position != log.last + 1:
                raise _damaged(log, f"position {position}")
            log.entries.append(pb.LogEntry.FromString(data))
        for log in logs.values():
            log.changed = log.last + 1  # as kept
        return list(logs.values())


def _damaged(log: Log, where: str) -> StartupError:
    return StartupError(
        f"the log of home key {log.key:016x} is damaged at {where}: move the data directory "
        "away and start the node without it (its log's other members hold the entries)"
    )
