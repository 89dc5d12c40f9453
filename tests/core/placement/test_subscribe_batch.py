"""Subscriptions in batches (Placement.subscribe_many) on the simulator: each query
checked on its own, the entries placed one Index message per owner, every entry and home
record on its owner and R-1 successors, and alerts the brute-force matcher's."""

from __future__ import annotations

from collections import defaultdict

import pytest
from support.oracle import assert_exact
from support.workloads import make_settings, workload

from chord.protocol.calls import Refused
from cqengine.core.basis import limits
from cqengine.core.basis.errors import EngineError
from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import analyze, term_id

R = 3
STRATEGIES = ("ri", "oi", "mhi", "sap-mhi")
# bad queries mixed into a batch, each with what its refusal says
BAD = [
    ("", "no terms left"),
    ("the and of", "no terms left"),
    (" ".join(f"w{i}x" for i in range(limits.MAX_QUERY_TERMS + 1)), "at most 64"),
    ("levee " * 1000, "the limit is 4096"),
]


def mixed(queries: list[str]) -> list[str]:
    """The queries with a bad one after every seventh."""
    out = []
    for i, q in enumerate(queries):
        out.append(q)
        if i % 7 == 6:
            out.append(BAD[(i // 7) % len(BAD)][0])
    return out


def holders(sim: EngineSimulator, key: int, replicas: int) -> set[str]:
    """The key's owner and its next replicas-1 successors, as the true ring has them."""
    oracle = sim.ring.oracle()
    at = oracle.ids.index(oracle.owner(key).id)
    return {oracle.nodes[(at + i) % len(oracle.ids)].address for i in range(replicas)}


def assert_placed(sim: EngineSimulator, replies: list[pb.SubscribeReply], replicas: int) -> None:
    """Each subscription's entry is held under its index term by its owner and its
    replicas, and its record by its home key's, and nothing else is held."""
    entries, homes = defaultdict(set), defaultdict(set)
    for a, e in sim.engines.items():
        for key in e.index.keys():
            for entry in e.index.get(key):
                entries[(key, entry.subscription_id)].add(a)
        for sub in e.subscriptions.values():
            homes[sub.id].add(a)
    want = {(r.subscription_id, term_id(r.index_term)) for r in replies}
    assert {(sub, key) for key, sub in entries} == want
    for (key, _), held in entries.items():
        assert held == holders(sim, key, replicas)
    for r in replies:
        assert homes[r.subscription_id] == (
            holders(sim, r.home_id, replicas) if replicas > 1 else {r.home}
        )


@pytest.mark.parametrize(
    "strategy,replicas", [(s, R) for s in STRATEGIES] + [("mhi", 1)], ids=lambda x: str(x)
)
def test_a_batch_places_each_good_query_refuses_each_bad_one_and_alerts_as_the_matcher(
    strategy, replicas
):
    wl = workload(1)
    sim = EngineSimulator(12, make_settings(wl, strategy=strategy, replicas=replicas, seed=4))
    vias = sorted(sim.engines)[:3]
    texts = mixed(list(wl.queries))
    before = sim.ring.ledger.snapshot()
    results = []
    for i, via in enumerate(vias):  # a batch through each of three homes
        results += sim.subscribe_many(texts[i :: len(vias)], via=via)
    texts = [q for i in range(len(vias)) for q in texts[i :: len(vias)]]  # as results are
    good = []
    for text, r in zip(texts, results, strict=True):
        bad = dict(BAD).get(text)
        if bad is not None:
            assert isinstance(r, EngineError) and r.code == "INVALID_ARGUMENT", (text, r)
            assert bad in str(r)
        else:
            assert isinstance(r, pb.SubscribeReply), (text, r)
            assert list(r.terms) == analyze(text) and r.index_term in r.terms
            good.append(r)
    assert len(good) == len(wl.queries) and len(results) > len(good)
    assert len({r.subscription_id for r in good}) == len(good)
    assert_placed(sim, good, replicas)
    # fewer Index messages than queries: at most one per owner and batch
    sent = sim.ring.ledger.snapshot()
    index = sent["Index"].messages - (before["Index"].messages if "Index" in before else 0)
    assert 0 < index <= len(vias) * len(sim.engines) < len(good)
    for d in wl.docs:
        sim.publish(d.docno, d.text, d.title)
    assert_exact(sim.alerts(), wl.oracle({r.subscription_id: list(r.terms) for r in good}))


def test_a_batch_costs_one_copy_of_the_home_records_and_one_per_owner():
    """Replicated, the home copies the batch's records to its replicas in one message
    each, and each owner its new entries: Replicate messages by owners, not queries."""
    wl = workload(1)
    sim = EngineSimulator(12, make_settings(wl, replicas=R, seed=4))
    via = sorted(sim.engines)[0]
    results = sim.subscribe_many(list(wl.queries), via=via)
    assert all(isinstance(r, pb.SubscribeReply) for r in results)
    oracle = sim.ring.oracle()
    owners = {oracle.owner(term_id(r.index_term)).address for r in results}
    sent = sim.ring.ledger.snapshot()  # a node's calls to itself are not messages
    assert sent["Index"].messages == len(owners - {via}) < len(results)
    assert sent["Replicate"].messages == (R - 1) * (len(owners) + 1)  # owners', the home's


class Journal:
    """Records every call a journal gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name, args))


def test_the_journal_is_told_of_each_subscription_placed():
    wl = workload(0)
    sim = EngineSimulator(8, make_settings(wl, replicas=R, seed=2))
    via = sorted(sim.engines)[1]
    journal = sim.engines[via].ctx.journal = Journal()
    results = sim.subscribe_many(["levee", "the", "hurricane levee"], via=via)
    told = [args[0].id for name, args in journal.calls if name == "subscribed"]
    assert told == [results[0].subscription_id, results[2].subscription_id]


def test_entries_an_owner_does_not_own_are_looked_up_again_and_placed():
    """A lookup naming a node that does not own the keys (tables not yet up to date): the
    node places none of them and names them in its reply; the home looks them up again."""
    wl = workload(1)
    sim = EngineSimulator(12, make_settings(wl, replicas=R, seed=4))
    via = sorted(sim.engines)[0]
    chord = sim.engines[via].chord
    true_lookup, stale = chord.lookup, sim.engines[sorted(sim.engines)[5]].me

    def lookup(key, verify=False):
        chord.lookup = true_lookup  # the first lookup is stale, the next ones are not
        return (stale, 0)
        yield

    chord.lookup = lookup
    heard = []  # the entries the stale node was sent
    handler = sim.engines[stale.address].handlers
    index = handler["Index"]
    handler["Index"] = lambda req: heard.extend(req.entries) or index(req)
    results = sim.subscribe_many(list(wl.queries), via=via)
    assert all(isinstance(r, pb.SubscribeReply) for r in results)
    oracle = sim.ring.oracle()
    assert any(oracle.owner(e.index_id) != stale for e in heard)  # not all its own
    assert_placed(sim, results, R)  # yet each entry is at its true owner


def test_an_owner_places_only_the_entries_under_its_keys_and_names_the_others():
    wl = workload(1)
    sim = EngineSimulator(6, make_settings(wl, seed=4))  # unreplicated: the reply at once
    owner = sim.engines[sorted(sim.engines)[2]]
    terms = sorted({t for q in wl.queries for t in analyze(q)})
    entries = [
        pb.QueryEntry(subscription_id=i + 1, term_ids=[tid], terms=[t], index_id=tid, home="node-0")
        for i, (t, tid) in enumerate((t, term_id(t)) for t in terms)
    ]
    reply = owner.handle("Index", pb.IndexRequest(entries=entries))
    oracle = sim.ring.oracle()
    mine = {e.subscription_id for e in entries if oracle.owner(e.index_id) == owner.me}
    assert mine and len(mine) < len(entries)
    assert set(reply.moved) == {e.subscription_id for e in entries} - mine
    assert not reply.owner
    held = {e.subscription_id for k in owner.index.keys() for e in owner.index.get(k)}
    assert held == mine


def test_an_empty_or_oversized_batch_is_refused_whole_and_changes_nothing():
    sim = EngineSimulator(4, Settings(seed=1))
    via = sorted(sim.engines)[0]
    n = limits.MAX_BATCH_QUERIES
    for texts, why in (([], "at least one query"), (["levee"] * (n + 1), f"at most {n} go")):
        with pytest.raises(EngineError, match=why) as e:
            sim.subscribe_many(texts, via=via)
        assert e.value.code == "INVALID_ARGUMENT"
    assert sum(len(e.subscriptions) for e in sim.engines.values()) == 0
    assert "Index" not in sim.ring.ledger.snapshot()


def test_a_batch_of_bad_queries_only_sends_nothing():
    sim = EngineSimulator(4, Settings(seed=1, replicas=R))
    results = sim.subscribe_many([q for q, _ in BAD], via=sorted(sim.engines)[0])
    assert all(isinstance(r, EngineError) for r in results)
    assert sim.ring.ledger.snapshot() == {}


def test_an_index_message_of_too_many_entries_or_an_entry_besides_is_refused():
    sim = EngineSimulator(2, Settings(seed=1))
    node = next(iter(sim.engines.values()))
    tid = term_id("levee")
    e = pb.QueryEntry(subscription_id=1, term_ids=[tid], terms=["levee"], index_id=tid)
    for req, why in (
        (pb.IndexRequest(entry=e, entries=[e]), "an entry and 1 entries besides"),
        (pb.IndexRequest(entries=[e] * (limits.MAX_BATCH_QUERIES + 1)), "entries; at most"),
    ):
        with pytest.raises(Refused, match=why):
            node.handle("Index", req)
    assert len(node.index) == 0
    node.handle("Index", pb.IndexRequest(entries=[e] * 3))  # one, and three times: fine
