"""A data directory that can keep nothing more (its disk full, an I/O error): nothing is
lost, nothing changes that is not kept, and the node serves again by itself once space
returns (issue: faults beyond a killed process).

- The storage (cqengine.live.storage): a commit that fails is rolled back, and what it
  held waits in memory for the next one that succeeds; SQLite is made to fail as a full
  disk makes it, with max_page_count ("database or disk is full").
- The node (cqengine.core.node.EngineNode.writable): a call that would change what it
  keeps is refused RESOURCE_EXHAUSTED before it changes anything; a DN holds the alerts
  such a home refused, and delivers them once it takes them again."""

from __future__ import annotations

import pytest
from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_through_every_node, workload

from cqengine.core.alerts.batches import numbered_batch
from cqengine.core.alerts.mailboxes import Subscription, Subscriptions, home_record
from cqengine.core.basis.errors import EngineError
from cqengine.core.homelog.log import Log
from cqengine.core.state.postings import InvertedIndex
from cqengine.core.state.records import RecordStore
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.live import datadir
from cqengine.live.storage import Storage, StorageFull
from cqengine.proto import cqengine_pb2 as pb

SETTINGS = b"settings"
KEY = 1 << 60


def alerts(store: RecordStore, sub: Subscription, start: int, n: int) -> None:
    """n alerts more for the subscription (titles long enough to need new pages)."""
    docs = [(f"D{i}", f"title {i} " + "x" * 400, "") for i in range(start, start + n)]
    numbered = [(sub.id, sub.mailbox.next + i, d) for i, d in enumerate(docs)]
    store.intake.put_alerts(numbered_batch(numbered), lambda key: True)


def test_a_commit_the_full_disk_fails_loses_nothing_and_is_made_once_space_returns(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(datadir, "CHECK_EVERY", 0.0)  # look at every call
    storage = Storage.open(tmp_path, "n", SETTINGS)
    storage.room.reserve = 0  # (this test's disk has room: SQLite is what fails)
    store = RecordStore(InvertedIndex(), Subscriptions(), 3, now=lambda: 100.0)
    store.journal = storage
    store.homes.put_home(home_record(Subscription(1, b"h" * 32, ["a"], 1, "a", key=KEY)))
    alerts(store, store.subscriptions[1], 0, 5)
    storage.commit()
    assert storage.full() is None
    (pages,) = storage.db.execute("PRAGMA page_count").fetchone()
    storage.db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
    sub = store.subscriptions[1]
    alerts(store, sub, 5, 40)
    store.homes.put_home(pb.HomeRecord(key=KEY, subscription_id=1, first=3))
    log = Log(KEY, promised=2, promised_to="127.0.0.1:1")  # and a home key's log
    log.extend([log_entry(n) for n in range(20)])
    storage.log_changed(KEY, log)
    for _ in range(2):  # and again: the changes wait, whole
        with pytest.raises(StorageFull, match="data directory full: database or disk is full"):
            storage.commit()
        assert "database or disk is full" in storage.full()
    storage.db.execute("PRAGMA max_page_count = 1073741823")  # space returns
    assert storage.full() is None  # looked again, and committed what waited
    assert not storage.dirty
    storage.close()
    back = Storage.open(tmp_path, "n", SETTINGS)
    [kept], *_ = back.load()
    assert (kept.mailbox.first, list(kept.mailbox.queue)) == (
        sub.mailbox.first,
        list(sub.mailbox.queue),
    )
    assert kept.mailbox.next == 45
    [kept_log] = back.logs.load()
    assert (kept_log.entries, kept_log.promised) == (log.entries, 2)
    back.close()


def log_entry(n: int):
    batch = pb.AlertBatch(docnos=[f"L{n}" + "y" * 300], subscription_ids=[n])
    return pb.LogEntry(epoch=2, kind=pb.LOG_DELIVER, data=batch.SerializeToString())


def test_a_disk_below_its_reserve_is_full_until_the_reserve_is_free(tmp_path, monkeypatch):
    monkeypatch.setattr(datadir, "CHECK_EVERY", 0.0)
    storage = Storage.open(tmp_path, "n", SETTINGS)
    storage.room.reserve = 1 << 62  # more than any disk has free
    assert "below the reserve" in storage.full()
    storage.room.reserve = 1 << 20
    assert storage.full() is None
    storage.close()


class FullJournal:
    """A node's journal that keeps everything (in no place) but, until `until` on the
    ring's clock, can keep nothing more."""

    def __init__(self, now, until: float) -> None:
        self.now, self.until = now, until
        self.refusals = 0

    def full(self) -> str | None:
        if self.now() < self.until:
            self.refusals += 1
            return "database or disk is full"
        return None

    def __getattr__(self, name):
        return lambda *args: None


@pytest.mark.parametrize("home_log", [False, True])
def test_a_home_whose_disk_fills_refuses_its_alerts_and_takes_them_all_once_it_clears(
    home_log,
):
    """One home's data directory is full for two minutes while every document is
    published: it refuses its Deliver batches (and copies and appends to it) before it
    changes anything; their DNs hold the alerts and deliver them once it takes them
    again. Every alert is the matcher's, once; nothing is counted lost."""
    wl = workload(1)
    settings = make_settings(wl, replicas=3, home_log=home_log, seed=5)
    sim = EngineSimulator(6, settings, seed=5)
    sim.hold(True)
    subs = subscribe_through_every_node(sim, wl)
    vias = sorted(sim.engines)
    full = max(sim.engines, key=lambda a: len(sim.engines[a].subscriptions))
    node = sim.engines[full]
    journal = node.ctx.journal = FullJournal(node.ctx.host.now, node.ctx.host.now() + 120)
    batch = pb.AlertBatch(docnos=["Dnew"], subscription_ids=[next(iter(node.subscriptions))])
    before = node.statistics.state_digest()
    with pytest.raises(EngineError) as refused:  # refused before it changes anything
        node.handle("Deliver", batch)
    assert refused.value.code == "RESOURCE_EXHAUSTED" and "data directory full" in str(
        refused.value
    )
    assert node.statistics.state_digest() == before
    for i, d in enumerate(wl.docs):
        sim.publish(d.docno, d.text, d.title, via=vias[i % len(vias)])
    assert journal.refusals > 1  # its alerts came while it was full, and again after
    assert_exact(sim.alerts(), wl.oracle(subs))
    counters = sum((e.counters for e in sim.engines.values()), start=type(sim.tally)())
    assert not [k for k in counters if k.startswith("dropped:") and counters[k]]
    assert counters["refused:storage_full"] == journal.refusals


def test_a_commit_the_full_disk_fails_refuses_only_calls_that_may_have_changed_state():
    """After each request a node commits what its journal was told (by that request, or by
    another before it). Failing, it refuses the request only if that may have changed what
    the node keeps: a Ping or a lookup answered RESOURCE_EXHAUSTED made its callers take
    a node that only cannot write for failed, and the ring fell apart around it."""
    wl = workload(1)
    sim = EngineSimulator(3, make_settings(wl, replicas=3, seed=5), seed=5)
    node = next(iter(sim.engines.values()))

    class Failing:
        def commit(self):
            raise StorageFull("data directory full: database or disk is full")

        def __getattr__(self, name):
            return lambda *args: None

    node.ctx.journal = Failing()
    for method in ("Ping", "GetNeighbors", "Announce", "TermDialogue", "Stats"):
        node.durable(method)  # answered as usual
    for method in ("Deliver", "LogAppend", "Index", ""):  # ("": an operation run)
        with pytest.raises(StorageFull):
            node.durable(method)
