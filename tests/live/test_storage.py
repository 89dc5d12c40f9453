"""A node's state kept in SQLite (cqengine.live.storage): what the engine journals is what a
restarted node takes back, and a ring restarted from its nodes' storage alerts its old
subscriptions exactly as the matcher says."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import (
    boolean_oracle,
    boolean_queries,
    make_settings,
    subscribe_all,
    workload,
)

from chord.live.server import StartupError
from cqengine.core.alerts.batches import numbered_batch
from cqengine.core.alerts.mailboxes import Subscription, Subscriptions, home_record
from cqengine.core.basis import limits
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.live import storage as storage_module
from cqengine.live.datadir import stored_id, stored_ring_id
from cqengine.live.storage import Storage
from cqengine.proto import cqengine_pb2 as pb

SETTINGS = b"settings"


def stored_ring(wl, root: Path, **kw) -> tuple[EngineSimulator, dict[str, Storage]]:
    """A simulated ring whose every node journals to its own storage under root (restored
    from it, if it holds anything)."""
    sim = EngineSimulator(12, make_settings(wl, seed=2, **kw), seed=2)
    storages = {}
    for address, e in sim.engines.items():
        storage = storages[address] = Storage.open(root / address, address, SETTINGS)
        e.restore(*storage.load())
        e.ctx.journal = storage
    return sim, storages


def close(storages: dict[str, Storage]) -> None:
    for s in storages.values():
        s.close()


@pytest.mark.parametrize("strategy", ["ri", "oi", "mhi"])
def test_a_ring_restarted_from_storage_alerts_its_old_subscriptions_exactly(tmp_path, strategy):
    """Subscribe, unsubscribe some, publish, send some alerts and leave others waiting; stop
    every node; a new ring restored from the storage alerts the remaining subscriptions
    exactly, keeps the alerts that were waiting, and numbers new alerts after them."""
    wl = workload(1)
    sim, storages = stored_ring(wl, tmp_path, strategy=strategy)
    subs = subscribe_all(sim, wl)
    replies = [sim.subscribe(q) for q in wl.queries[:6]]  # these go again
    for reply in replies:
        sim.unsubscribe(reply)
    first, second = wl.docs[:12], wl.docs[12:24]
    for d in first:
        sim.publish(d.docno, d.text, d.title)
    homes = {sid: e for e in sim.engines.values() for sid in e.subscriptions}
    sent = sorted(homes)[::2]  # their streams took their alerts; the others' wait
    for sid in sent:
        e = homes[sid]
        box = e.subscriptions[sid].mailbox
        e.home.acknowledge([(e.subscriptions[sid], box.next)])
    waiting = {
        sid: (e.subscriptions[sid].mailbox.first, list(e.subscriptions[sid].mailbox.queue))
        for sid, e in homes.items()
    }
    close(storages)

    again, storages = stored_ring(wl, tmp_path, strategy=strategy)
    try:
        restored = {sid: e for e in again.engines.values() for sid in e.subscriptions}
        assert set(restored) == set(subs)  # the unsubscribed are gone for good
        assert sum(len(e.index) for e in again.engines.values()) == sum(
            len(e.index) for e in sim.engines.values()
        )
        for sid, (first_seq, queue) in waiting.items():
            box = restored[sid].subscriptions[sid].mailbox
            assert (box.first, list(box.queue)) == (first_seq, queue)
        for d in second:
            again.publish(d.docno, d.text, d.title)
        want = wl.oracle(subs, [d.docno for d in second])
        alerts = []
        for sid, e in restored.items():
            box = e.subscriptions[sid].mailbox
            old = len(waiting[sid][1])
            assert box.next == waiting[sid][0] + len(box.queue)  # numbered on, none reused
            alerts += [(sid, docno) for docno, _, _ in list(box.queue)[old:]]
        assert_exact(alerts, want)
    finally:
        close(storages)


def test_a_replicated_ring_restarted_from_storage_keeps_every_copy_and_tombstone(tmp_path):
    """Every node keeps the records it holds as a replica too: restarted, each subscription
    is on its home and R-1 successors with the same mailbox, the tombstones of those that
    went are still there to beat stale copies, and later alerts are exact."""
    wl = workload(1)
    sim, storages = stored_ring(wl, tmp_path, replicas=3)
    subs = subscribe_all(sim, wl)
    for reply in [sim.subscribe(q) for q in wl.queries[:6]]:
        sim.unsubscribe(reply)
    first, second = wl.docs[:12], wl.docs[12:24]
    for d in first:
        sim.publish(d.docno, d.text, d.title)
    taken = sim.alerts()  # acknowledged at the homes, and so at their replicas
    assert set(taken) == wl.oracle(subs, [d.docno for d in first])
    copies = {
        (a, sid): (s.key, s.mailbox.first, tuple(s.mailbox.queue))
        for a, e in sim.engines.items()
        for sid, s in e.subscriptions.items()
    }
    tombstones = {a: dict(e.store.entries.tombstones) for a, e in sim.engines.items()}
    assert any(tombstones.values()) and sum(len(e.store.homes.gone) for e in sim.engines.values())
    close(storages)

    again, storages = stored_ring(wl, tmp_path, replicas=3)
    try:
        assert {
            (a, sid): (s.key, s.mailbox.first, tuple(s.mailbox.queue))
            for a, e in again.engines.items()
            for sid, s in e.subscriptions.items()
        } == copies
        assert {a: dict(e.store.entries.tombstones) for a, e in again.engines.items()} == tombstones
        for d in first:  # announced again (a DN's batch, after a failure): known seen
            again.publish(d.docno, d.text, d.title)
        assert again.alerts() == []
        for d in second:
            again.publish(d.docno, d.text, d.title)
        assert_exact(again.alerts(), wl.oracle(subs, [d.docno for d in second]))
    finally:
        close(storages)


def test_boolean_subscriptions_merged_at_their_keys_come_back_from_storage(tmp_path):
    """Replicated, boolean queries, each twice (merged at its keys), some unsubscribed:
    restarted from storage, each subscription keeps its query and alternatives' keys,
    its merged entries come back whole, an unsubscribe afterwards removes all of its
    entries, and later alerts are the matcher's, once."""
    wl = workload(1)
    sim, storages = stored_ring(wl, tmp_path, strategy="mhi", replicas=3)
    queries = boolean_queries(wl, 3, 24)[:24]  # (not its repeats: each is subscribed twice)
    replies = {q: [sim.subscribe(q), sim.subscribe(q)] for q in queries}
    for q in queries[:4]:
        sim.unsubscribe(replies[q].pop())
    first, second = wl.docs[:12], wl.docs[12:24]
    for d in first:
        sim.publish(d.docno, d.text, d.title)
    sim.alerts()
    held = {
        (a, sid): (s.query, s.index_ids)
        for a, e in sim.engines.items()
        for sid, s in e.subscriptions.items()
    }
    assert any(query for query, _ in held.values())
    columns = {
        a: sorted(len(e.index.block(k)) for k in e.index.keys()) for a, e in sim.engines.items()
    }
    assert any(
        e.index.block(k).members is not None for e in sim.engines.values() for k in e.index.keys()
    )
    close(storages)

    again, storages = stored_ring(wl, tmp_path, strategy="mhi", replicas=3)
    try:
        assert {
            (a, sid): (s.query, s.index_ids)
            for a, e in again.engines.items()
            for sid, s in e.subscriptions.items()
        } == held
        assert {
            a: sorted(len(e.index.block(k)) for k in e.index.keys())
            for a, e in again.engines.items()
        } == columns
        gone = replies[queries[5]].pop()
        again.unsubscribe(gone)
        assert all(
            e.subscription_id != gone.subscription_id
            for eng in again.engines.values()
            for k in eng.index.keys()
            for e in eng.index.get(k)
        )
        for d in second:
            again.publish(d.docno, d.text, d.title)
        subs = {r.subscription_id: q for q, rs in replies.items() for r in rs}
        assert_exact(again.alerts(), boolean_oracle(wl, subs, {d.docno for d in second}))
    finally:
        close(storages)


def test_a_subscription_token_is_kept_only_as_its_hash(tmp_path):
    wl = workload(1)
    sim, storages = stored_ring(wl, tmp_path)
    reply = sim.subscribe(wl.queries[0])
    close(storages)
    data = (tmp_path / reply.home / "node.sqlite").read_bytes()
    assert reply.token.encode() not in data
    again, storages = stored_ring(wl, tmp_path)
    try:
        home = again.engines[reply.home]
        assert (
            home.placement.authorized(reply.subscription_id, reply.token).id
            == reply.subscription_id
        )
        again.unsubscribe(reply)
        assert reply.subscription_id not in home.subscriptions
    finally:
        close(storages)


def test_a_data_directory_serves_only_its_own_node_and_ring(tmp_path):
    Storage.open(tmp_path, "127.0.0.1:7000", SETTINGS).close()
    with pytest.raises(StartupError, match="holds the state of node 127.0.0.1:7000"):
        Storage.open(tmp_path, "127.0.0.1:7001", SETTINGS)
    with pytest.raises(StartupError, match="other engine settings"):
        Storage.open(tmp_path, "127.0.0.1:7000", b"other")
    Storage.open(tmp_path, "127.0.0.1:7000", SETTINGS).close()  # its own: fine
    # the announcement's techniques leave no state: a ring may restart with them changed
    techniques = Settings(header_terms=64, df={"a": 1}, filter_lease=2.0).to_pb()
    plain = Settings(df={"a": 1}).to_pb()
    (tmp_path / "b").mkdir()
    Storage.open(tmp_path / "b", "127.0.0.1:7000", plain.SerializeToString()).close()
    Storage.open(tmp_path / "b", "127.0.0.1:7000", techniques.SerializeToString()).close()
    with pytest.raises(StartupError, match="other engine settings"):
        other = Settings(df={"a": 1}, strategy="ri").to_pb().SerializeToString()
        Storage.open(tmp_path / "b", "127.0.0.1:7000", other)
    (tmp_path / "file").write_text("")
    with pytest.raises(StartupError, match="cannot use data directory"):
        Storage.open(tmp_path / "file", "127.0.0.1:7000", SETTINGS)


def test_a_data_directory_tells_the_id_its_node_had(tmp_path):
    assert stored_id(tmp_path / "none") is None
    Storage.open(tmp_path / "a", "127.0.0.1:7000 (id 00000000000000ff)", SETTINGS).close()
    assert stored_id(tmp_path / "a") == 255
    Storage.open(tmp_path / "b", "127.0.0.1:7001", SETTINGS).close()  # none recorded
    assert stored_id(tmp_path / "b") is None


def test_a_data_directory_keeps_its_rings_id_and_serves_no_other_ring(tmp_path):
    assert stored_ring_id(tmp_path / "none") == 0
    Storage.open(tmp_path / "a", "n", SETTINGS, ring=0xAB).close()
    assert stored_ring_id(tmp_path / "a") == 0xAB
    Storage.open(tmp_path / "a", "n", SETTINGS, ring=0xAB).close()  # its own ring: fine
    Storage.open(tmp_path / "a", "n", SETTINGS).close()  # a ring of unknown id: fine too
    with pytest.raises(StartupError, match="of ring 00000000000000ab, not of ring 0000000000"):
        Storage.open(tmp_path / "a", "n", SETTINGS, ring=0xCD)
    assert stored_ring_id(tmp_path / "a") == 0xAB
    # written before rings had ids: the first ring it is opened in is its ring from then on
    Storage.open(tmp_path / "b", "n", SETTINGS).close()
    assert stored_ring_id(tmp_path / "b") == 0
    Storage.open(tmp_path / "b", "n", SETTINGS, ring=0xEF).close()
    assert stored_ring_id(tmp_path / "b") == 0xEF


def entry(sub: int, key: int) -> pb.QueryEntry:
    return pb.QueryEntry(subscription_id=sub, term_ids=[key], terms=[f"t{key}"], index_id=key)


KEYS = st.sampled_from([1, 2, 1 << 63, (1 << 64) - 1])  # past 2**63: SQLite's ints are signed
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("replace"), KEYS, st.integers(0, 5)),
        st.tuples(st.just("remove"), KEYS, st.integers(0, 5)),
        st.tuples(st.just("take"), KEYS, KEYS),
        st.tuples(st.just("put_items"), KEYS, st.integers(0, 5)),
    ),
    max_size=30,
)


@hsettings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_the_stored_entries_are_the_index_whatever_changes_it(tmp_path_factory, ops):
    """Any sequence of index changes (indexing, unindexing, ranges handed over and taken
    over) leaves the storage holding exactly the index's entries."""
    path = tmp_path_factory.mktemp("store")
    storage = Storage.open(path, "n", SETTINGS)
    index = InvertedIndex()
    index.journal = storage
    for op, a, b in ops:
        if op == "replace":
            index.replace(a, entry(b, a))
        elif op == "remove":
            index.remove(a, lambda e, b=b: e.subscription_id == b)
        elif op == "take":
            index.take_range(a, b)
        else:
            index.put_items([(a, entry(b, a).SerializeToString())])
    storage.close()
    storage = Storage.open(path, "n", SETTINGS)
    stored = storage.load()[1]
    storage.close()
    held = sorted((k, e.subscription_id) for k in index.keys() for e in index.get(k))
    assert sorted((k, e.subscription_id) for k, e in stored) == held


# ---- alerts, kept as runs ------------------------------------------------------------------

ALERT_OPS = st.lists(
    st.tuples(
        st.sampled_from(["subscribe", "alert", "alert all", "ack", "leave", "sweep", "restart"]),
        st.integers(1, 2),  # a subscription
        st.integers(1, 4),  # how many alerts, or acknowledged
    ),
    max_size=40,
)
COMEBACK = [  # a subscription leaves, its alerts on disk in a run another one keeps
    ("subscribe", 1, 1), ("subscribe", 2, 1), ("alert all", 1, 2), ("leave", 1, 1),
    ("sweep", 1, 1), ("subscribe", 1, 1), ("restart", 1, 1),
]  # fmt: skip
SWEPT_BEFORE_COMEBACK = [  # the sweep takes every run before the subscription comes back:
    ("subscribe", 1, 1), ("alert", 1, 1), ("leave", 1, 1),  # a run id given again after a
    ("subscribe", 1, 1), ("restart", 1, 1), ("alert", 1, 1), ("restart", 1, 1),  # restart
]  # fmt: skip  # would lie below its since_run: its new alerts lost at the next restart


def restored(storage: Storage) -> dict[int, Subscription]:
    return {s.id: s for s in storage.load()[0]}


@hsettings(max_examples=200, deadline=None)
@given(ops=ALERT_OPS, every=st.sampled_from([1, 3, 1000]))
@example(ops=COMEBACK, every=1000)
@example(ops=SWEPT_BEFORE_COMEBACK, every=1)
def test_restored_mailboxes_are_the_journalled_ones_whatever_was_swept(
    tmp_path_factory, ops, every
):
    """Alerts are kept a run per document, and runs go at sweeps once no alert of theirs is
    waiting or among the latest SEEN_KEPT acknowledged. Whatever the sweeps took, a
    restart gives back every mailbox as it was, with its latest acknowledged documents
    known seen; a subscription that left and came back gets none of its earlier alerts."""
    path = tmp_path_factory.mktemp("store")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limits, "SEEN_KEPT", 3)  # sweeps find runs to collect
        mp.setattr(storage_module, "SEEN_KEPT", 3)
        mp.setattr(storage_module, "SWEEP", every)  # commits between sweeps
        storage = Storage.open(path, "n", SETTINGS)
        store = RecordStore(InvertedIndex(), Subscriptions(), 3, now=lambda: 100.0)
        store.journal = storage
        for n, (op, sid, k) in enumerate(ops):
            key = sid << 60
            sub = store.subscriptions.get(sid)
            if op == "subscribe" and sub is None:
                store.homes.put_home(
                    home_record(Subscription(sid, b"h" * 32, ["a"], 1, "a", key=key))
                )
            elif op.startswith("alert") and sub is not None:
                docs = [(f"D{n}-{i}", f"title {n}", "") for i in range(k)]
                alerted = store.subscriptions if op == "alert all" else {sid: sub}
                numbered = [
                    (s, a.mailbox.next + i, d)
                    for s, a in alerted.items()
                    for i, d in enumerate(docs)
                ]
                store.intake.put_alerts(numbered_batch(numbered), lambda key: True)
            elif op == "ack" and sub is not None:
                first = min(sub.mailbox.first + k, sub.mailbox.next)
                store.homes.put_home(pb.HomeRecord(key=key, subscription_id=sid, first=first))
            elif op == "leave" and sub is not None:  # no owner counts on it here any more
                store.drop_outside([(key, key - 1)])
            elif op == "sweep":
                storage.sweep()
            elif op == "restart":
                storage.close()
                storage = Storage.open(path, "n", SETTINGS)
                store.journal = storage
                back = restored(storage)
                assert set(back) == set(store.subscriptions)
                for sid, sub in store.subscriptions.items():
                    box, got = sub.mailbox, back[sid].mailbox
                    assert (got.first, list(got.queue)) == (box.first, list(box.queue))
                    assert set(box.acked) <= got.seen
            storage.commit()
        storage.close()


def test_a_sweep_collects_alerts_acknowledged_long_ago_and_those_of_subscriptions_gone(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(limits, "SEEN_KEPT", 3)
    monkeypatch.setattr(storage_module, "SEEN_KEPT", 3)
    storage = Storage.open(tmp_path, "n", SETTINGS)
    store = RecordStore(InvertedIndex(), Subscriptions(), 3, now=lambda: 100.0)
    store.journal = storage
    store.homes.put_home(home_record(Subscription(1, b"h" * 32, ["a"], 1, "a", key=1 << 60)))
    store.intake.put_alerts(
        numbered_batch([(1, i, (f"D{i}", "", "")) for i in range(5)]), lambda k: True
    )
    store.homes.put_home(pb.HomeRecord(key=1 << 60, subscription_id=1, first=5))
    storage.commit()

    def on_disk() -> list[str]:
        return [
            d
            for (d,) in storage.db.execute(
                "SELECT docno FROM alert_runs JOIN alert_docs ON doc = alert_docs.id"
            )
        ]

    assert len(on_disk()) == 5
    assert storage.sweep() == 2
    assert sorted(on_disk()) == ["D2", "D3", "D4"]  # the latest 3 acknowledged: known seen
    store.drop_outside([])  # no owner counts on this node for it any more
    storage.commit()
    assert storage.sweep() == 3 and on_disk() == []
    storage.close()


def test_a_data_directory_of_schema_2_keeps_its_alerts_as_runs(tmp_path):
    """Schema 2 kept a row per alert: a node started on such a directory restores the same
    mailboxes, and has written them again as runs."""
    db = sqlite3.connect(tmp_path / "node.sqlite")
    db.executescript(
        """
        CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
        CREATE TABLE subscriptions (
            id INTEGER PRIMARY KEY, token_hash BLOB NOT NULL, terms TEXT NOT NULL,
            index_id INTEGER NOT NULL, index_term TEXT NOT NULL,
            first INTEGER NOT NULL DEFAULT 0, key INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE alerts (
            subscription_id INTEGER NOT NULL, seq INTEGER NOT NULL, doc INTEGER NOT NULL,
            PRIMARY KEY (subscription_id, seq)) WITHOUT ROWID;
        CREATE TABLE alert_docs (
            id INTEGER PRIMARY KEY, docno TEXT NOT NULL, title TEXT NOT NULL,
            snippet TEXT NOT NULL);
        """
    )
    db.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("schema", "2"), ("address", "n"), ("settings", SETTINGS)],
    )
    db.execute("INSERT INTO subscriptions VALUES (-5, x'00', '[\"a\"]', 1, 'a', 1, 7)")
    db.executemany(
        "INSERT INTO alert_docs VALUES (?, ?, 't', '')", [(10, "D0"), (11, "D1"), (12, "D2")]
    )
    db.executemany("INSERT INTO alerts VALUES (-5, ?, ?)", [(0, 10), (1, 11), (2, 12)])
    db.commit()
    db.close()
    for _ in range(2):  # migrated, then as it was written again
        storage = Storage.open(tmp_path, "n", SETTINGS)
        (sub,) = storage.load()[0]
        assert sub.id == (1 << 64) - 5 and sub.key == 7
        assert sub.mailbox.first == 1 and [d[0] for d in sub.mailbox.queue] == ["D1", "D2"]
        assert "D0" in sub.mailbox.seen  # acknowledged: known seen
        assert storage.db.execute("SELECT COUNT(*) FROM alerts").fetchone() == (0,)
        assert storage.db.execute("SELECT COUNT(*) FROM alert_runs").fetchone() == (3,)
        storage.close()


def test_acknowledgements_are_a_row_a_commit_until_a_sweep_makes_them_one(tmp_path):
    """An acknowledgement rewrites no subscription's row (a page of the database each): the
    commit's acknowledgements are one row, the latest naming a subscription wins, and a
    sweep writes them all as one. A restart gives each mailbox its latest first."""
    storage = Storage.open(tmp_path, "n", SETTINGS)
    store = RecordStore(InvertedIndex(), Subscriptions(), 3, now=lambda: 100.0)
    store.journal = storage
    for sid in (1, 2, 3):
        store.homes.put_home(
            home_record(Subscription(sid, b"h" * 32, ["a"], 1, "a", key=sid << 60))
        )
    alerts = [(s, i, (f"D{i}", "", "")) for s in (1, 2, 3) for i in range(6)]
    store.intake.put_alerts(numbered_batch(alerts), lambda key: True)
    storage.commit()
    for first in range(1, 6):
        store.intake.put_acknowledged(
            pb.Acknowledged(subscription_ids=[1, 2], firsts=[first, first])
        )
        storage.commit()

    def rows(sql: str) -> list:
        return storage.db.execute(sql).fetchall()

    assert rows("SELECT COUNT(*) FROM ack_runs") == [(6,)]  # the subscriptions', then 5
    assert rows("SELECT DISTINCT first FROM subscriptions") == [(0,)]
    storage.sweep()
    assert rows("SELECT COUNT(*) FROM ack_runs") == [(1,)]
    store.intake.put_acknowledged(pb.Acknowledged(subscription_ids=[3], firsts=[2]))
    storage.close()
    back = restored(Storage.open(tmp_path, "n", SETTINGS))
    assert {s: b.mailbox.first for s, b in back.items()} == {1: 5, 2: 5, 3: 2}
    assert [d[0] for d in back[1].mailbox.queue] == ["D5"]
    assert [d[0] for d in back[3].mailbox.queue] == [f"D{i}" for i in range(2, 6)]


def test_the_home_logs_come_back_as_kept_and_a_damaged_entry_refuses_the_start(tmp_path):
    """A member's logs (cqengine.live.logstore): entries as the leader serialized them, a
    truncation by a later epoch, the promise and the commit position, as last committed;
    an entry whose bytes fail their CRC refuses the start with the remedy."""
    from cqengine.core.homelog.log import Log

    def entry(epoch: int, n: int) -> pb.LogEntry:
        batch = pb.AlertBatch(docnos=[f"D{n}"], subscription_ids=[n])
        return pb.LogEntry(epoch=epoch, kind=pb.LOG_DELIVER, data=batch.SerializeToString())

    key = (1 << 64) - 5  # above 2^63: kept signed
    log = Log(key, promised=3, promised_to="127.0.0.1:1")
    storage = Storage.open(tmp_path, "node", SETTINGS)
    log.extend([entry(1, n) for n in range(5)])
    storage.log_changed(key, log)
    log.changed = log.last + 1
    storage.commit()
    log._truncate(2)  # a later epoch replaced the tail
    log.extend([entry(3, 9)])
    log.committed = 3
    storage.log_changed(key, log)
    storage.close()
    [back] = Storage.open(tmp_path, "node", SETTINGS).logs.load()
    assert (back.key, back.entries, back.promised, back.promised_to, back.committed) == (
        key,
        log.entries,
        3,
        "127.0.0.1:1",
        3,
    )
    db = sqlite3.connect(tmp_path / storage_module.FILE)
    (data,) = db.execute("SELECT entry FROM log_entries WHERE position = 2").fetchone()
    damaged = bytes([data[0] ^ 1]) + data[1:]
    db.execute("UPDATE log_entries SET entry = ? WHERE position = 2", (damaged,))
    db.commit()
    db.close()
    with pytest.raises(StartupError, match="damaged at position 2: move the data directory"):
        Storage.open(tmp_path, "node", SETTINGS).logs.load()


def test_a_log_folded_into_a_checkpoint_comes_back_from_it(tmp_path):
    """Entries folded into a checkpoint go from the disk, the checkpoint is one row with
    its CRC32, and the log comes back beginning after it; a damaged checkpoint refuses the
    start with the remedy."""
    from cqengine.core.homelog.log import EPOCH, Log

    key = 77
    log = Log(key, promised=2, promised_to="127.0.0.1:1")
    log.extend([pb.LogEntry(epoch=1, kind=EPOCH, members=["127.0.0.1:1"])])
    log.extend([pb.LogEntry(epoch=2, kind=pb.LOG_ACKS, data=bytes([n])) for n in range(6)])
    log.committed = 5
    storage = Storage.open(tmp_path, "node", SETTINGS)
    storage.log_changed(key, log)
    log.changed = log.last + 1
    storage.commit()
    home = pb.HomeRecord(key=key, subscription_id=9, first=3, docnos=["D3"])
    log.compact(pb.LogCheckpoint(position=4, homes=[home]))
    storage.log_changed(key, log)
    storage.close()
    [back] = Storage.open(tmp_path, "node", SETTINGS).logs.load()
    assert (back.base, back.last, back.committed) == (4, 7, 5)
    assert back.checkpoint == log.checkpoint and back.checkpoint.epoch == 2
    assert list(back.checkpoint.config.members) == ["127.0.0.1:1"]  # the epoch entry folded
    assert back.entries == log.entries and back.config().members == ["127.0.0.1:1"]
    db = sqlite3.connect(tmp_path / storage_module.FILE)
    assert db.execute("SELECT min(position) FROM log_entries").fetchone() == (5,)
    (data,) = db.execute("SELECT checkpoint FROM log_checkpoints").fetchone()
    db.execute("UPDATE log_checkpoints SET checkpoint = ?", (bytes([data[0] ^ 1]) + data[1:],))
    db.commit()
    db.close()
    with pytest.raises(StartupError, match="damaged at its checkpoint at position 4: move"):
        Storage.open(tmp_path, "node", SETTINGS).logs.load()


def test_a_data_directory_of_a_ring_without_the_home_log_is_refused_on_it(tmp_path):
    """A node's data of a ring that copied its alerts holds mailboxes, not logs: started in a
    ring on the home log, it is refused in one line naming the setting and the remedy."""
    off = Settings(replicas=3).to_pb().SerializeToString(deterministic=True)
    on = Settings(replicas=3, home_log=True).to_pb().SerializeToString(deterministic=True)
    Storage.open(tmp_path, "node", off).close()
    with pytest.raises(StartupError) as refused:
        Storage.open(tmp_path, "node", on)
    message = str(refused.value)
    assert "(home_log: off there, on here)" in message
    assert "start the ring with the options it had, or remove the directory" in message
    assert "\n" not in message


def journalled(path: Path, alerts: int, title: str = "") -> tuple[Storage, RecordStore]:
    """A record store journalling to the storage in path, holding one subscription and
    this many alerts of it."""
    storage = Storage.open(path, "n", SETTINGS)
    store = RecordStore(InvertedIndex(), Subscriptions(), 3, now=lambda: 100.0)
    store.journal = storage
    store.homes.put_home(home_record(Subscription(1, b"h" * 32, ["a"], 1, "a", key=1 << 60)))
    docs = [(1, i, (f"D{i}", title, "")) for i in range(alerts)]
    store.intake.put_alerts(numbered_batch(docs), lambda k: True)
    return storage, store


def stored_alerts(path: Path, n: int) -> None:
    """A data directory holding n alerts of one subscription (many pages of them)."""
    storage, _ = journalled(path, n, "title " + "t" * 200)
    storage.close()


@pytest.mark.parametrize(
    "damage", ["a page overwritten", "an index page no start reads", "no database at all"]
)
def test_a_damaged_data_directory_refuses_the_start_in_one_line_with_the_remedy(tmp_path, damage):
    """A page of node.sqlite overwritten (as a failing disk or a stray write does), even
    one that nothing the start reads would meet (PRAGMA quick_check finds it), or a file
    that is no database: the start is refused in one line naming the directory, what is
    wrong, and the remedy (--rejoin-empty), not a traceback."""
    stored_alerts(tmp_path, 400)
    path = tmp_path / storage_module.FILE
    db = sqlite3.connect(path)
    (index,) = db.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_meta_1'"
    ).fetchone()
    db.close()
    with open(path, "r+b") as f:
        if damage == "no database at all":
            f.write(b"not a database" * 1000)
        else:
            pages = path.stat().st_size // 4096
            assert pages > 8
            f.seek(((pages // 2) if damage == "a page overwritten" else index - 1) * 4096)
            f.write(bytes(range(256)) * 16)  # one 4 KB page of garbage
    with pytest.raises(StartupError) as refused:
        Storage.open(tmp_path, "n", SETTINGS)
    message = str(refused.value)
    assert f"data directory {tmp_path} is damaged" in message
    assert "--rejoin-empty" in message and "\n" not in message
    if damage == "an index page no start reads":
        assert "quick_check" in message


def test_a_directory_set_aside_keeps_its_files_beside_it(tmp_path):
    from cqengine.live.datadir import set_aside

    data = tmp_path / "7001"
    stored_alerts(data, 3)
    first = set_aside(data)
    assert not data.exists() and (first / storage_module.FILE).exists()
    assert first.name.startswith("7001.damaged-")
    stored_alerts(data, 3)
    second = set_aside(data)  # again within the second: another name
    assert second != first and second.exists() and first.exists()


@pytest.mark.parametrize(
    "table,column,what",
    [
        ("alert_runs", "seqs", "alert run"),
        ("ack_runs", "firsts", "acknowledgement run"),
        ("entries", "entry", "index entry"),
    ],
)
def test_a_bit_flipped_in_a_row_of_numbers_is_found_at_load(tmp_path, table, column, what):
    """A bit flipped on the disk inside an alert's number, an acknowledgement floor or an
    index entry would load as a wrong value (and spread to every replica): each such row
    carries a CRC32 of its blobs, and one that fails it stops the load, naming the row (a
    node's start, serve_engine, ends on it with the one-line error and the remedy)."""
    storage, store = journalled(tmp_path, 5)
    store.homes.put_home(pb.HomeRecord(key=1 << 60, subscription_id=1, first=2))
    storage.indexed(7, pb.QueryEntry(subscription_id=1, terms=["a"], home="n"))
    storage.close()
    assert Storage.open(tmp_path, "n", SETTINGS).load()  # whole, it loads
    db = sqlite3.connect(tmp_path / storage_module.FILE)
    (blob,) = db.execute(f"SELECT {column} FROM {table} LIMIT 1").fetchone()
    flipped = bytes([blob[0] ^ 0x04]) + blob[1:]  # a number off by 4
    db.execute(f"UPDATE {table} SET {column} = ?", (flipped,))
    db.commit()
    db.close()
    with pytest.raises(ValueError, match=f"{what} .*fails its CRC32"):
        Storage.open(tmp_path, "n", SETTINGS).load()


def test_rows_written_before_they_had_a_crc_load_unchecked(tmp_path):
    """Rows of a directory written before schema 8 have no CRC (NULL, once the column is
    added: test_a_data_directory_of_schema_2_keeps_its_alerts_as_runs migrates one): they
    load as they are, and rows written from then on carry one."""
    storage, _ = journalled(tmp_path, 3)
    storage.close()
    db = sqlite3.connect(tmp_path / storage_module.FILE)  # as the migration leaves them
    for table in ("alert_runs", "ack_runs", "entries"):
        db.execute(f"UPDATE {table} SET crc = NULL")
    db.commit()
    db.close()
    storage = Storage.open(tmp_path, "n", SETTINGS)
    [sub], *_ = storage.load()
    assert [d[0] for d in sub.mailbox.queue] == ["D0", "D1", "D2"]
    rows = storage.db.execute("SELECT crc FROM alert_runs").fetchall()
    assert rows and all(crc is None for (crc,) in rows)
    storage.alerted([(1, 3, ("D3", "", ""))])
    storage.commit()
    assert storage.db.execute("SELECT crc FROM alert_runs ORDER BY id DESC").fetchone()[0]
    storage.close()


def test_the_crc_columns_are_added_to_tables_of_earlier_schemas_once():
    from cqengine.live.schema import migrate

    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE TABLE alert_runs (id INTEGER PRIMARY KEY, doc INTEGER, subs BLOB, seqs BLOB)"
    )
    for _ in range(2):  # (a table TABLES made has it already: nothing to add)
        migrate(db, "5")
    assert [row[1] for row in db.execute("PRAGMA table_info(alert_runs)")][-1] == "crc"
