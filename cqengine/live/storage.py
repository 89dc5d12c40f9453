"""A node's state on disk: an embedded SQLite database, in WAL mode, in its data directory.

The EngineNode tells its journal (this) every change of what must outlive the process
(cqengine.core.state.journal). The changes gather in one open transaction that is committed once
per batch: after each request the node handled and each operation it ran
(cqengine.core.node.EngineNode.durable), and soon after anything else. WAL with
synchronous=NORMAL: a commit survives the process being killed, not the machine losing
power; the replicas on other nodes are what survives that.

Alerts are the many writes (hundreds a document, at the home and each replica): they are
kept as runs, a row per document per commit holding the subscriptions it alerted and each
one's number as columns, not a row per alert. A run stays while any alert of it is
waiting or among its subscription's latest SEEN_KEPT acknowledged (known seen); sweeps
every SWEEP commits find the others as arrays and delete them. Acknowledgements are as
many (each alerted subscription's, at each copy), and an UPDATE of a subscription's row
writes a page of the database a subscription: they are kept as runs too, a row per commit
holding each subscription acknowledged and its oldest alert still wanted; the latest run
naming a subscription wins. Sweeps write every subscription's as one run and delete the
others.

A commit that fails (the disk full, an I/O error) is rolled back and nothing of it is
forgotten: what it held waits in memory and is written with the next commit that succeeds.
Until one does, and while the disk's free space is below a reserve (`room`, checked
with statvfs), the storage is full (`full`): the node refuses every call that would change
what it keeps, before it changes anything (cqengine.core.node.EngineNode.writable), and
looks again every second (`full`), so that it serves again by itself once space returns.

A data directory belongs to one node address (the node's ring id is its address's hash)
and one ring's engine settings: a node started there at another address, or in a ring
with other settings, is refused rather than served with state that is not its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import mmh3
import numpy as np

from chord.live.server import StartupError
from chord.protocol.calls import StatusError
from cqengine.core.alerts.mailboxes import AlertDoc, Mailbox, Subscription
from cqengine.core.basis.errors import FULL
from cqengine.core.basis.limits import MAILBOX, SEEN_KEPT
from cqengine.core.homelog.log import Log
from cqengine.core.terms.queries import entry_slot
from cqengine.live.datadir import FILE, Room, damaged, owner_problem
from cqengine.live.logstore import LogStore
from cqengine.live.schema import MIGRATIONS, SCHEMA, TABLES, checked, crc, migrate
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.storage")

SWEEP = 256  # commits between sweeps of the alerts and documents no longer needed


def signed(x: int) -> int:
    """A 64-bit id as SQLite's signed INTEGER holds it."""
    return x - (1 << 64) if x >= 1 << 63 else x


def unsigned(x: int) -> int:
    return x + (1 << 64) if x < 0 else x


class StorageFull(StatusError):
    """The data directory can keep nothing more now: a call that would change what the
    node keeps is refused (RESOURCE_EXHAUSTED), and changed nothing."""

    code = "RESOURCE_EXHAUSTED"


class Storage:
    """The journal of one node, on SQLite (cqengine.core.state.journal.Journal)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.room = Room(path.parent)  # the free space on its disk (its reserve: the node's)
        self.failed: str | None = None  # why the last commit failed (None: it did not)
        self.db = sqlite3.connect(path, isolation_level="DEFERRED")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(TABLES)
        self.logs = LogStore(self.db)  # the home keys' logs (Settings.home_log)
        self.dirty = False
        self._soon = False
        # alerts not yet written: document id -> the subscriptions it alerted, their numbers
        self._runs: dict[int, tuple[list[int], list[int]]] = {}
        self._docs: dict[AlertDoc, int] = {}  # their documents, by id, not yet written
        self._acked: dict[int, int] = {}  # subscription -> its oldest alert not acknowledged
        # what a sweep needs to know (from load, and as the journal is told): each run on
        # disk (id -> subscriptions, numbers) and each subscription's oldest alert not
        # acknowledged: a run goes once none of its alerts is waiting or among the latest
        # SEEN_KEPT acknowledged
        self._live: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._first: dict[int, int] = {}
        # run ids are never given twice: a subscription that came back counts its alerts
        # from its since_run on, and a sweep may have taken the runs numbered up to it
        (last,) = self.db.execute("SELECT COALESCE(MAX(id), 0) FROM alert_runs").fetchone()
        try:
            (since,) = self.db.execute("SELECT MAX(since_run) FROM subscriptions").fetchone()
        except sqlite3.OperationalError:  # schema 2, opened to be migrated: no since_run
            since = None
        self._next_run = max(last + 1, since or 0)
        self._commits = 0

    @classmethod
    def open(cls, data_dir: Path, address: str, settings: bytes, ring: int = 0) -> Storage:
        """The storage in data_dir, made if new; refused if it is another node's or ring's.
        `ring`: the ring's id, recorded where none is (0: unknown), and the one that was
        must be it."""
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StartupError(f"cannot use data directory {data_dir}: {e}") from None
        try:
            return cls._open(data_dir, address, settings, ring)
        except sqlite3.OperationalError as e:  # cannot open it, locked, ...
            raise StartupError(f"cannot use data directory {data_dir}: {e}") from None
        except sqlite3.DatabaseError as e:  # not a database, a page damaged, ...
            raise StartupError(damaged(data_dir, e)) from None

    @classmethod
    def _open(cls, data_dir: Path, address: str, settings: bytes, ring: int) -> Storage:
        storage = cls(data_dir / FILE)
        meta = dict(storage.db.execute("SELECT name, value FROM meta"))
        if not meta:
            storage.db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("schema", SCHEMA), ("address", address), ("settings", settings)],
            )
            storage._record_ring(ring)
            return storage
        storage.close()
        if meta.get("schema") in MIGRATIONS:
            storage = cls(data_dir / FILE)
            while (schema := dict(storage.db.execute("SELECT * FROM meta"))["schema"]) != SCHEMA:
                migrate(storage.db, schema)
                storage.db.execute(
                    "UPDATE meta SET value = ? WHERE name = 'schema'", (str(int(schema) + 1),)
                )
                storage.db.commit()
            storage.close()
            meta["schema"] = SCHEMA
        if meta.get("schema") != SCHEMA:
            raise StartupError(
                f"data directory {data_dir} has schema {meta.get('schema')}, not {SCHEMA}"
            )
        why = owner_problem(data_dir, meta, address, settings, ring)
        if why is not None:
            raise StartupError(why)
        storage = cls(data_dir / FILE)
        problems = [row for (row,) in storage.db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            storage.db.close()
            first = " ".join(problems[0].split())  # (one line: it may name a page on two)
            raise StartupError(damaged(data_dir, f"quick_check: {first}"))
        if "ring" not in meta:
            storage._record_ring(ring)  # written before rings had ids: this one's from now
        return storage

    def _record_ring(self, ring: int) -> None:
        if ring:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('ring', ?)", (f"{ring:016x}",))
        self.db.commit()

    def load(self) -> tuple[list, list, list, list]:
        """What EngineNode.restore takes back: the subscriptions homed or replicated here
        with their mailboxes, the entries held here, the entries' tombstones and the
        subscriptions' (unsubscribed)."""
        subs = {}
        since = {}
        acked = self._acknowledged()
        for (
            sub_id,
            token_hash,
            terms,
            index_id,
            index_term,
            first,
            key,
            run,
            query,
        ) in self.db.execute(
            "SELECT id, token_hash, terms, index_id, index_term, first, key, since_run, query"
            " FROM subscriptions"
        ):
            since[unsigned(sub_id)] = run
            text, index_ids = json.loads(query) if query else ("", ())
            subs[sub_id] = Subscription(
                unsigned(sub_id),
                bytes(token_hash),
                json.loads(terms),
                unsigned(index_id),
                index_term,
                Mailbox(first=acked.get(unsigned(sub_id), first)),
                unsigned(key),
                query=text,
                index_ids=tuple(index_ids),
            )
        docs = {
            i: (docno, title, snippet)
            for i, docno, title, snippet in self.db.execute("SELECT * FROM alert_docs")
        }
        for sub in subs.values():
            self._first[sub.id] = sub.mailbox.first
        for sub_id, rows in self._alerts_by_subscription(since).items():
            sub = subs.get(signed(sub_id))
            if sub is None:  # alerted while its Subscribe was under way, which then failed
                continue
            box = sub.mailbox
            # the latest acknowledged, kept to know their documents seen
            box.saw(docs[doc][0] for seq, doc in rows if box.first - SEEN_KEPT <= seq < box.first)
            # the oldest past MAILBOX were dropped when the mailbox overflowed
            kept = deque(((seq, doc) for seq, doc in rows if seq >= box.first), maxlen=MAILBOX)
            box.first = kept[0][0] if kept else box.first
            box.extend(docs[doc] for _, doc in kept)
            box.seen.update(doc[0] for doc in box.queue)
        entries = [
            (unsigned(key), pb.QueryEntry.FromString(entry)) for key, entry in self._entries()
        ]
        tombstones = [
            (unsigned(key), unsigned(sub), unsigned(version), deleted)
            for key, sub, version, deleted in self.db.execute("SELECT * FROM tombstones")
        ]
        gone = [
            (unsigned(sub), unsigned(key), deleted)
            for sub, key, deleted in self.db.execute("SELECT * FROM gone")
        ]
        return list(subs.values()), entries, tombstones, gone

    def _alerts_by_subscription(self, since: dict[int, int]) -> dict[int, list[tuple[int, int]]]:
        """Every alert on disk of a subscription here (`since`: the first run of its time
        here): subscription -> (number, document id), by number (of two with one number,
        the later written). Schema 2's rows are written again as runs."""
        alerts: dict[int, dict[int, int]] = {}
        legacy = self.db.execute("SELECT subscription_id, seq, doc FROM alerts").fetchall()
        for sub, seq, doc in legacy:
            alerts.setdefault(unsigned(sub), {})[seq] = doc
        runs = self.db.execute("SELECT id, doc, subs, seqs, crc FROM alert_runs ORDER BY id")
        for run, doc, subs, seqs, kept in runs:
            checked(f"alert run {run}", kept, subs, seqs)
            columns = np.frombuffer(subs, dtype=np.uint64), np.frombuffer(seqs, dtype=np.int64)
            self._live[run] = columns
            for sub, seq in zip(*(c.tolist() for c in columns)):
                if run >= since.get(sub, run + 1):
                    alerts.setdefault(sub, {})[seq] = doc
        if legacy:
            for sub, seq, doc in legacy:
                run = self._run(doc)
                run[0].append(unsigned(sub))
                run[1].append(seq)
            self.db.execute("DELETE FROM alerts")
            self.dirty = True
            self.commit()
        return {sub: sorted(numbered.items()) for sub, numbered in alerts.items()}

    def _entries(self):
        """The index entries' rows, (key, entry), each checked against its CRC32."""
        for key, slot, entry, kept in self.db.execute("SELECT * FROM entries"):
            checked(f"index entry {unsigned(slot):016x} under {unsigned(key):016x}", kept, entry)
            yield key, entry

    def _acknowledged(self) -> dict[int, int]:
        """Each subscription's oldest alert not acknowledged, as the latest ack run naming
        it has it."""
        rows = []
        for run, subs, firsts, kept in self.db.execute(
            "SELECT id, subs, firsts, crc FROM ack_runs ORDER BY id"
        ):
            checked(f"acknowledgement run {run}", kept, subs, firsts)
            rows.append((subs, firsts))
        if not rows:
            return {}
        subs = np.concatenate([np.frombuffer(s, dtype=np.uint64) for s, _ in rows])
        firsts = np.concatenate([np.frombuffer(f, dtype=np.int64) for _, f in rows])
        # by subscription, the newest (the latest written) first
        order = np.lexsort((-np.arange(len(subs)), subs))
        subs, firsts = subs[order], firsts[order]
        first_of_each = np.ones(len(subs), dtype=bool)
        first_of_each[1:] = subs[1:] != subs[:-1]
        return dict(zip(subs[first_of_each].tolist(), firsts[first_of_each].tolist()))

    # ---- the journal ---------------------------------------------------------------------

    def subscribed(self, sub: Subscription) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO subscriptions"
            " (id, token_hash, terms, index_id, index_term, first, key, since_run, query)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                signed(sub.id),
                sub.token_hash,
                json.dumps(sub.terms),
                signed(sub.index_id),
                sub.index_term,
                sub.mailbox.first,
                signed(sub.key),
                self._next_run,  # its alerts from now on, the mailbox's included, go there
                json.dumps([sub.query, list(sub.index_ids)]) if sub.query else "",
            ),
        )
        box = sub.mailbox
        self._first[sub.id] = box.first
        self._acked[sub.id] = box.first  # over any ack run of an earlier time it was here
        if box.queue:
            self.alerted([(sub.id, box.first + i, doc) for i, doc in enumerate(box.queue)])
        self._changed()

    def unsubscribed(self, sub_id: int, key: int, deleted: float) -> None:
        self.commit()  # its alerts gathered so far go with it
        self._acked.pop(sub_id, None)
        self._first.pop(sub_id, None)  # its alerts go at the next sweep
        self.db.execute("DELETE FROM subscriptions WHERE id = ?", (signed(sub_id),))
        if deleted:
            self.db.execute(
                "INSERT OR REPLACE INTO gone VALUES (?, ?, ?)",
                (signed(sub_id), signed(key), deleted),
            )
        else:
            self.db.execute("DELETE FROM gone WHERE id = ?", (signed(sub_id),))
        self._changed()

    def tombstoned(self, key: int, sub_id: int, version: int | None, deleted: float) -> None:
        if version is None:
            self.db.execute(
                "DELETE FROM tombstones WHERE key = ? AND subscription_id = ?",
                (signed(key), signed(sub_id)),
            )
        else:
            self.db.execute(
                "INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?, ?)",
                (signed(key), signed(sub_id), signed(version), deleted),
            )
        self._changed()

    def indexed(self, key: int, entry: pb.QueryEntry) -> None:
        data = entry.SerializeToString()
        self.db.execute(
            "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)",
            (signed(key), signed(entry_slot(entry)), data, crc(data)),
        )
        self._changed()

    def unindexed(self, key: int, sub_ids: Iterable[int] | None) -> None:
        if sub_ids is None:
            self.db.execute("DELETE FROM entries WHERE key = ?", (signed(key),))
        else:
            self.db.executemany(
                "DELETE FROM entries WHERE key = ? AND subscription_id = ?",
                [(signed(key), signed(s)) for s in sub_ids],
            )
        self._changed()

    # Alerts are the many writes (hundreds a document): they are gathered and written at
    # commit in a few statements, each document's docno, title and snippet once.

    def alerted(self, alerts: list[tuple[int, int, AlertDoc]]) -> None:
        for sub, seq, doc in alerts:
            run = self._run(self._doc_id(doc))
            run[0].append(sub)
            run[1].append(seq)
        self._changed()

    def alerted_runs(self, runs: list[tuple[AlertDoc, list[int], list[int]]]) -> None:
        for doc, subs, seqs in runs:
            run = self._run(self._doc_id(doc))
            run[0].extend(subs)
            run[1].extend(seqs)
        self._changed()

    def _doc_id(self, doc: AlertDoc) -> int:
        i = self._docs.get(doc)
        if i is None:
            i = self._docs[doc] = mmh3.hash64("\0".join(doc))[0]  # signed, as SQLite's
        return i

    def _run(self, doc: int) -> tuple[list[int], list[int]]:
        """The subscriptions and numbers of a document's alerts since the last commit."""
        run = self._runs.get(doc)
        if run is None:
            run = self._runs[doc] = ([], [])
        return run

    def acknowledged(self, sub_id: int, first: int) -> None:
        self._acked[sub_id] = first
        self._changed()

    def log_changed(self, key: int, log: Log) -> None:
        self.logs.changed(key, log)
        self._changed()

    def commit(self) -> None:
        """Write every change told since the last commit, in one transaction. StorageFull:
        it failed, and was rolled back; the changes wait for the next commit."""
        if not self.dirty:
            return
        try:
            live = self._write()
            self.db.commit()
        except sqlite3.Error as e:  # the disk full, an I/O error: nothing of it is kept
            self._rolled_back(e)
            raise StorageFull(f"{FULL}: {self.failed}") from None
        self._written(live)
        if self._commits % SWEEP == 0:
            try:
                gone = self._sweep()
                self.db.commit()
            except sqlite3.Error as e:  # (the runs it would delete stay: a later one will)
                self._rolled_back(e)
            else:
                self._swept(gone)

    def _write(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The changes, into the open transaction (the buffers stay as they are until it
        is committed); the alert runs written, by id."""
        db = self.db
        self.logs.write()
        if self._docs:
            db.executemany(
                "INSERT OR IGNORE INTO alert_docs VALUES (?, ?, ?, ?)",
                [(i, *doc) for doc, i in self._docs.items()],
            )
        live, rows = {}, []
        for run, (doc, (subs, seqs)) in enumerate(self._runs.items(), self._next_run):
            columns = np.array(subs, dtype=np.uint64), np.array(seqs, dtype=np.int64)
            live[run] = columns
            blobs = [c.tobytes() for c in columns]
            rows.append((run, doc, *blobs, crc(*blobs)))
        if rows:
            db.executemany("INSERT INTO alert_runs VALUES (?, ?, ?, ?, ?)", rows)
        if self._acked:
            self._write_acks(self._acked)
        return live

    def _written(self, live: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """The transaction is committed: the buffers it held are on disk."""
        self.logs.written()
        self._docs, self._runs = {}, {}
        self._live.update(live)
        self._next_run += len(live)
        self._first.update(self._acked)
        self._acked = {}
        self.dirty = False
        self._commits += 1
        if self.failed is not None:
            log.warning("%s: commits succeed again", self.path.parent)
            self.failed = None

    def _rolled_back(self, error: sqlite3.Error) -> None:
        if self.failed is None:
            log.error(
                "%s: a commit failed, kept in memory until one succeeds: %s",
                self.path.parent,
                error,
            )
        self.failed = str(error)
        try:
            self.db.rollback()
        except sqlite3.Error:
            pass  # (the next commit's transaction begins anew either way)

    def full(self) -> str | None:
        """Why this storage can keep nothing more now (None: it can): its last commit
        failed, or its disk's free space is below the reserve. Once there is room again,
        what a failed commit left is committed: a node whose disk filled serves again by
        itself once space returns."""
        low = self.room.low()
        if self.failed is not None and low is None and self.room.looked_now:
            try:
                self.commit()
            except StorageFull:
                pass  # (still full: failed says why)
        return self.failed if self.failed is not None else low

    def _write_acks(self, acked: dict[int, int]) -> int:
        """An ack run of these subscriptions' oldest alerts not acknowledged; its id."""
        columns = (
            np.fromiter(acked, dtype=np.uint64, count=len(acked)),
            np.fromiter(acked.values(), dtype=np.int64, count=len(acked)),
        )
        blobs = [c.tobytes() for c in columns]
        cursor = self.db.execute(
            "INSERT INTO ack_runs (subs, firsts, crc) VALUES (?, ?, ?)", [*blobs, crc(*blobs)]
        )
        return cursor.lastrowid

    def sweep(self) -> int:
        """Sweep now (as every SWEEP commits do), and commit; how many runs went."""
        gone = self._sweep()
        self.db.commit()
        self._swept(gone)
        return len(gone)

    def _sweep(self) -> list[int]:
        """Delete the runs none of whose alerts is waiting or among its subscription's
        latest SEEN_KEPT acknowledged (or whose subscriptions all went), and the documents
        no run names, in the open transaction; the runs that go (`_swept` once committed).
        Tested as arrays: no Python step per alert. Every subscription's acknowledgements go
        in one run, and the ack runs before it."""
        kept = self._write_acks(self._first)
        self.db.execute("DELETE FROM ack_runs WHERE id < ?", (kept,))
        runs = list(self._live)
        if not runs:
            return []
        subs = np.concatenate([self._live[r][0] for r in runs])
        seqs = np.concatenate([self._live[r][1] for r in runs])
        of_run = np.repeat(np.arange(len(runs)), [len(self._live[r][0]) for r in runs])
        known = np.fromiter(self._first, dtype=np.uint64, count=len(self._first))
        firsts = np.fromiter(self._first.values(), dtype=np.int64, count=len(self._first))
        order = np.argsort(known)
        known, firsts = known[order], firsts[order]
        at = np.minimum(np.searchsorted(known, subs), max(len(known) - 1, 0))
        needed = np.zeros(len(subs), dtype=bool)
        if len(known):
            needed = (known[at] == subs) & (seqs >= firsts[at] - SEEN_KEPT)
        alive = np.bincount(of_run, weights=needed, minlength=len(runs)) > 0
        gone = [runs[i] for i in np.flatnonzero(~alive).tolist()]
        self.db.executemany("DELETE FROM alert_runs WHERE id = ?", [(r,) for r in gone])
        self.db.execute("DELETE FROM alert_docs WHERE id NOT IN (SELECT doc FROM alert_runs)")
        return gone

    def _swept(self, gone: list[int]) -> None:
        """The sweep deleting these runs is committed."""
        for r in gone:
            del self._live[r]

    def _changed(self) -> None:
        """Commit soon, if nothing commits first (a change made outside a request's handling)."""
        self.dirty = True
        if not self._soon:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not in a live node: the caller commits
                return
            self._soon = True
            loop.call_soon(self._commit_soon)

    def _commit_soon(self) -> None:
        self._soon = False
        try:
            self.commit()
        except StorageFull:
            pass  # (logged as it failed; the changes wait for the next commit)

    def close(self) -> None:
        self.commit()
        self.db.close()
