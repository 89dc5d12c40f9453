"""A node's state kept in SQLite (cqengine.live.storage): what the engine journals is what a
restarted node takes back, and a ring restarted from its nodes' storage alerts its old
subscriptions exactly as the matcher says."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.oracle import assert_exact
from support.workloads import make_settings, subscribe_all, workload

from chord.live import StartupError
from cqengine.core.postings import InvertedIndex
from cqengine.evaluation.sim import EngineSimulator
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
    tombstones = {a: dict(e.store.tombstones) for a, e in sim.engines.items()}
    assert any(tombstones.values()) and sum(len(e.store.gone) for e in sim.engines.values())
    close(storages)

    again, storages = stored_ring(wl, tmp_path, replicas=3)
    try:
        assert {
            (a, sid): (s.key, s.mailbox.first, tuple(s.mailbox.queue))
            for a, e in again.engines.items()
            for sid, s in e.subscriptions.items()
        } == copies
        assert {a: dict(e.store.tombstones) for a, e in again.engines.items()} == tombstones
        for d in first:  # announced again (a DN's batch, after a failure): known seen
            again.publish(d.docno, d.text, d.title)
        assert again.alerts() == []
        for d in second:
            again.publish(d.docno, d.text, d.title)
        assert_exact(again.alerts(), wl.oracle(subs, [d.docno for d in second]))
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
    (tmp_path / "file").write_text("")
    with pytest.raises(StartupError, match="cannot use data directory"):
        Storage.open(tmp_path / "file", "127.0.0.1:7000", SETTINGS)


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
