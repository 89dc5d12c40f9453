"""The tables of a node's SQLite file (cqengine.live.storage), how a file of each earlier
schema is brought up to date, and the CRC32 each row of numbers carries: a bit flipped on
the disk in an alert's number or an acknowledgement floor would load as a wrong number
(and spread to every replica), so a row whose blobs fail their CRC refuses the start
instead, naming the remedy (cqengine.live.datadir.damaged)."""

from __future__ import annotations

import sqlite3
import zlib

SCHEMA = "8"
MIGRATIONS = {  # from a schema to the next
    "1": "ALTER TABLE subscriptions ADD COLUMN key INTEGER NOT NULL DEFAULT 0",
    # alert_runs is made with the other tables; an alert kept a row each in `alerts` is
    # read from there and written again as runs the first time the node loads
    "2": "ALTER TABLE subscriptions ADD COLUMN since_run INTEGER NOT NULL DEFAULT 0",
    # ack_runs is made with the other tables; `first` in subscriptions holds on
    "3": "SELECT 1",
    "4": "ALTER TABLE subscriptions ADD COLUMN query TEXT NOT NULL DEFAULT ''",
    # a CRC32 of each row's blobs (NULL in rows written before: not checked)
    "5": lambda db: _add_column(db, "alert_runs", "crc INTEGER"),
    "6": lambda db: _add_column(db, "ack_runs", "crc INTEGER"),
    "7": lambda db: _add_column(db, "entries", "crc INTEGER"),
}

TABLES = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS subscriptions (
    id INTEGER PRIMARY KEY, token_hash BLOB NOT NULL, terms TEXT NOT NULL,
    index_id INTEGER NOT NULL, index_term TEXT NOT NULL,
    first INTEGER NOT NULL DEFAULT 0,  -- the number of its oldest alert not acknowledged
    key INTEGER NOT NULL DEFAULT 0,  -- its home key (0: homed here for good, not replicated)
    -- the first run that may hold its alerts: those before are of an earlier time it was
    -- here (it left, its alerts were left for a sweep to collect, and it came back)
    since_run INTEGER NOT NULL DEFAULT 0,
    -- its query and each alternative's index key, as JSON [text, [keys]]; '': a
    -- conjunction of its terms, indexed under index_id
    query TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS tombstones (  -- entries deleted, kept until every replica has it
    key INTEGER NOT NULL, subscription_id INTEGER NOT NULL, version INTEGER NOT NULL,
    deleted REAL NOT NULL, PRIMARY KEY (key, subscription_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gone (  -- subscriptions ended, likewise
    id INTEGER PRIMARY KEY, key INTEGER NOT NULL, deleted REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    key INTEGER NOT NULL, subscription_id INTEGER NOT NULL, entry BLOB NOT NULL,
    crc INTEGER,  -- of entry
    PRIMARY KEY (key, subscription_id)  -- the entry's slot (cqengine.core.terms.queries)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS alerts (  -- schema 2's alerts, a row each: read once, then runs
    subscription_id INTEGER NOT NULL, seq INTEGER NOT NULL, doc INTEGER NOT NULL,
    PRIMARY KEY (subscription_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS alert_runs (  -- a document's alerts of one commit, as columns:
    id INTEGER PRIMARY KEY, doc INTEGER NOT NULL,  -- the subscriptions (int64) and each
    subs BLOB NOT NULL, seqs BLOB NOT NULL,  -- one's number (int64), little-endian
    crc INTEGER  -- of subs and seqs
);
CREATE TABLE IF NOT EXISTS ack_runs (  -- acknowledgements of one commit, as columns: the
    id INTEGER PRIMARY KEY,  -- subscriptions (int64) and the number of each one's oldest
    subs BLOB NOT NULL, firsts BLOB NOT NULL,  -- alert not acknowledged (int64); the run of
    crc INTEGER  -- the highest id naming a subscription wins over its row's `first`
);
CREATE TABLE IF NOT EXISTS alert_docs (
    id INTEGER PRIMARY KEY, docno TEXT NOT NULL, title TEXT NOT NULL, snippet TEXT NOT NULL
);
"""


def migrate(db: sqlite3.Connection, schema: str) -> None:
    """One step from `schema` to the next (its meta row is the caller's)."""
    step = MIGRATIONS[schema]
    if callable(step):
        step(db)
    else:
        db.execute(step)


def _add_column(db: sqlite3.Connection, table: str, column: str) -> None:
    """(A table made with the others by this schema's TABLES has it already.)"""
    have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    if column.split()[0] not in have:
        db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def crc(*blobs: bytes) -> int:
    """The CRC32 of these blobs, one after the other."""
    value = 0
    for blob in blobs:
        value = zlib.crc32(blob, value)
    return value


def checked(what: str, kept: int | None, *blobs: bytes) -> None:
    """ValueError if blobs read back fail the CRC32 kept with them (None: a row written
    before rows had one)."""
    if kept is not None and crc(*blobs) != kept:
        raise ValueError(f"{what} fails its CRC32")
