"""Rings on the home log (Settings.home_log, cqengine.core.home.homes) in the simulator:
homes fail, are cut off from the rest of the ring and come back, and still every alert is
the matcher's, shown once, each subscription's numbered 0, 1, 2, ... without a gap, and
no number ever names two documents (a subscriber that saw number n never sees another
document under it)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.homelog import Subscribers, publish, ring
from support.oracle import assert_exact, consecutive

from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.proto import cqengine_pb2 as pb


def halfway(members: int):
    """A ring on the home log (`members` a log) with the first half of the workload's
    documents published and read off the streams."""
    wl, sim, subs = ring(members)
    streams = Subscribers(sim)
    publish(sim, wl.docs[: len(wl.docs) // 2], sorted(sim.engines))
    streams.read()
    return wl, sim, subs, streams


def the_rest(wl, sim: EngineSimulator, subs, streams: Subscribers) -> None:
    """The second half published and read: every alert the matcher's, shown once, each
    subscription's numbered without a gap."""
    publish(sim, wl.docs[len(wl.docs) // 2 :], sorted(sim.engines))
    streams.read()
    streams.check_numbers()
    assert_exact(streams.shown, wl.oracle(subs))


def busiest_home(sim: EngineSimulator) -> str:
    return max(sim.engines, key=lambda a: len(sim.engines[a].subscriptions))


@pytest.mark.parametrize("members,failing", [(3, 1), (5, 2)])
def test_homes_failing_lose_no_alert_nor_number_one_twice(members, failing):
    """Fewer than half a log's members fail at once (a home and its successors, with alerts
    waiting and acknowledged): their successor leads each log in a new epoch, numbering on
    where the failed home stopped."""
    wl, sim, subs = ring(members)
    streams = Subscribers(sim)
    third = len(wl.docs) // 3
    publish(sim, wl.docs[:third], sorted(sim.engines))
    streams.read()  # acknowledged: those must never come again
    publish(sim, wl.docs[third : 2 * third], sorted(sim.engines))  # waiting in the mailboxes
    failed = consecutive(sim, busiest_home(sim), failing)
    sim.fail(failed)
    publish(sim, wl.docs[2 * third :], sorted(sim.engines))
    streams.read()
    streams.check_numbers()
    assert_exact(streams.shown, wl.oracle(subs))
    assert not any(e.counters["dropped:home_unreachable"] for e in sim.engines.values())


def test_every_member_derives_the_leaders_mailboxes_from_its_copy():
    """A member's copy of a log, replayed from nothing up to the commit position, makes
    exactly the leader's mailboxes: the numbers are a function of the log."""
    from cqengine.core.homelog.derive import Derived

    wl, sim, _ = ring(3)
    publish(sim, wl.docs, sorted(sim.engines))
    Subscribers(sim).read()  # acknowledgements in the logs too
    sim.reconcile_round()  # every member knows the commit position
    compared = 0
    for leader_node in sim.engines.values():
        logs = leader_node.home.logs
        for key, leader in logs.leaders.items():
            if not leader.leading:
                continue
            want = {
                s.id: (s.mailbox.first, s.mailbox.next, list(s.mailbox.queue))
                for s in leader_node.subscriptions.values()
                if s.key == key
            }
            for address in leader.members:
                copy = sim.engines[address].home.logs.logs[key]
                assert copy.committed == logs.logs[key].committed
                derived = Derived(sim.settings.mailbox_bytes)
                if copy.checkpoint is not None:  # (folded entries: from their checkpoint)
                    derived = Derived.restore(copy.checkpoint, sim.settings.mailbox_bytes)
                for position in range(copy.base + 1, copy.committed + 1):
                    derived.apply(position, copy.entry(position))
                got = {
                    s.id: (s.mailbox.first, s.mailbox.next, list(s.mailbox.queue))
                    for s in derived.subscriptions.values()
                }
                assert got == want
                compared += 1
    assert compared >= 9  # every log's every member (3 of each)


def test_logs_fold_into_checkpoints_and_a_member_far_behind_takes_one(monkeypatch):
    """Members fold their committed entries into a checkpoint once they are many
    (limits.LOG_KEPT, 6 here): no log keeps more. A member cut off meanwhile finds, once
    back, that the leader's entries it lacks are folded: it takes the leader's checkpoint
    (LogAppend.checkpoint). Then the home fails and that member leads the log from the
    checkpoint: every alert the matcher's, once, numbered without a gap."""
    from cqengine.core.basis import limits
    from cqengine.core.homelog.log import Log

    monkeypatch.setattr(limits, "LOG_KEPT", 6)
    installed = []
    install = Log.install

    def counted(log, checkpoint):
        if checkpoint.position > log.base:
            installed.append(checkpoint.position)
        install(log, checkpoint)

    monkeypatch.setattr(Log, "install", counted)
    wl, sim, subs = ring(3)
    streams = Subscribers(sim)
    third = len(wl.docs) // 3
    publish(sim, wl.docs[:third], sorted(sim.engines))
    streams.read()
    home = busiest_home(sim)
    successor = consecutive(sim, home, 2)[1]
    key = sim.engines[home].home.logs.own
    sim.cut([successor])
    publish(sim, wl.docs[third : 2 * third], sorted(set(sim.engines) - {successor}))
    streams.read()
    sim.heal()
    sim.reconcile_round()  # the leader brings its member up to date: by its checkpoint
    assert installed, "no member took a leader's checkpoint"
    lagging = sim.engines[successor].home.logs.logs[key]
    assert lagging.base > 0 and lagging.committed == sim.engines[home].home.logs.logs[key].committed
    sim.fail([home])
    publish(sim, wl.docs[2 * third :], sorted(sim.engines))
    streams.read()
    streams.check_numbers()
    assert_exact(streams.shown, wl.oracle(subs))
    for e in sim.engines.values():
        for log in e.home.logs.logs.values():
            assert log.committed - log.base <= limits.LOG_KEPT, (log.base, log.committed)


@pytest.mark.parametrize("asked", [False, True], ids=["handed over", "claimed by a stream"])
def test_a_node_that_joins_before_a_home_key_leads_its_log(asked):
    """A node joins right before a home key: it owns the key now, but is no member of its
    log and knows nothing of it. Its leader, serving the key no more, sends it its copy at
    the next maintenance (`handed over`); or a subscriber's stream names the key there
    first, is told UNAVAILABLE while the node takes the log over, and then served
    (`claimed`). Either way it leads the log in a later epoch: every alert once, numbered
    on without a gap."""
    from cqengine.core.basis.errors import EngineError

    wl, sim, subs, streams = halfway(3)
    home = busiest_home(sim)
    key = sim.engines[home].home.logs.own
    sub = next(s for s in sim.engines[home].subscriptions.values() if s.key == key)
    sim.ring.join("node-new", node_id=key)  # (it owns its own id: the key)
    sim.ring.converge()
    sim.settle()
    new = sim.engines["node-new"]
    assert new.serves(key) and key not in new.home.logs.logs
    if asked:
        with pytest.raises(EngineError, match="taking over"):
            new.placement.authorized(sub.id, "not the token", key)
        sim.settle()  # the claim it began
    else:
        sim.reconcile_round()  # the old leader's maintenance sends its copy
        sim.reconcile_round()  # and the new owner's takes the key over
    assert new.home.logs.leaders[key].leading
    assert sub.id in new.subscriptions
    the_rest(wl, sim, subs, streams)


def test_a_home_and_two_of_its_members_leaving_in_a_row_leave_its_log_a_majority():
    """The node leading a log of five leaves the ring for good, and two more of the log's
    members right after it, before the successor serving the key next has taken it over.
    Leaving, the leader first moved its log to a member set without it (Departures.step_down):
    the successor still finds a majority of that set, takes the key over, and every alert
    is shown once (without the step-down, 2 of the 5 were left: the log stood still, its
    subscriptions served nowhere, as bench_churn once saw)."""
    wl, sim, subs, streams = halfway(5)
    home = busiest_home(sim)
    key = sim.engines[home].home.logs.own
    members = sim.engines[home].home.logs.leaders[key].members
    assert members[0] == home and len(members) == 5
    successor = members[1]
    for address in (home, members[2], members[3]):  # no maintenance between them
        sim.ring.leave(address)
        sim.settle()  # (what a leave sets off at once: a predecessor told reconfigures)
    sim.ring.converge()
    sim.settle()
    sim.reconcile_round()
    logs = sim.engines[successor].home.logs
    assert sim.engines[successor].serves(key) and logs.leaders[key].leading
    the_rest(wl, sim, subs, streams)


@pytest.mark.parametrize("offset,rounds", [(0, 0), (0, 1), (1, 1)])
def test_a_node_joining_before_a_home_that_leaves_takes_its_log_over(offset, rounds):
    """A node joins just before a log's leader, in front of its key (at the key itself, offset
    0, or just past it: it learns its predecessor only at the ring's next round), and so
    comes to serve the key without being a member of its log; the leader leaves the ring for
    good, then three of the other four members one after another, the ring's maintenance
    running `rounds` times between them but the logs' not (nobody leads the log while they
    leave: the member set's leader has gone). The leaver moves the log to a set with the new
    node in it, and each member leaving asks the node serving the key (and the other
    members) to lead it without them (Departures.step_down): the new node leads the key, and
    every alert is shown once. Before, the log kept the leader and two more members that had
    gone, a majority of five: no node could ever lead it again, and its subscriptions were
    served nowhere (bench_churn, now and then)."""
    wl, sim, subs, streams = halfway(5)
    home = busiest_home(sim)
    key = sim.engines[home].home.logs.own
    members = sim.engines[home].home.logs.leaders[key].members
    assert members[0] == home and len(members) == 5
    sim.ring.join("node-new", via=members[2], node_id=(key + offset) % 2**64)
    sim.settle()
    for address in (home, *members[2:]):
        sim.ring.leave(address)
        sim.settle()
        sim.ring.rounds(rounds)
        sim.settle()
    sim.ring.converge()
    sim.settle()
    new = sim.engines["node-new"]
    new.home.logs.claim(key)  # (as the key's subscribers' streams name it)
    sim.settle()
    assert new.serves(key) and new.home.logs.leaders[key].leading
    the_rest(wl, sim, subs, streams)


def test_a_home_key_no_log_is_of_is_not_taken_over_for_ever():
    """A subscriber names a home key the node serves but no log is of (guessed, or long
    gone): the node tries to take it over, finds no copy to take over, and forgets it. It
    then answers an unknown subscription NOT_FOUND, not UNAVAILABLE for ever (a fuzzing
    client made one node of a small ring refuse every later call this way). No member
    keeps anything of it either: it was asked whether it held a copy, not for a promise
    (a promise is kept for good: a fuzzing client would fill every member's disk)."""
    from cqengine.core.basis.errors import EngineError

    wl, sim, subs = ring(3)
    node = busiest_home(sim)
    e = sim.engines[node]
    lo, hi = e.ctx.region()
    guessed = (lo + 7) & ((1 << 64) - 1)  # in its region, no home key
    assert e.serves(guessed) and guessed not in e.home.logs.logs
    with pytest.raises(EngineError, match="taking over"):
        e.placement.authorized(1, "0" * 32, guessed)
    sim.settle()  # the claim it began: no copy answers
    sim.reconcile_round()  # nor does maintenance try it again
    assert guessed not in e.home.logs.logs and not e.home.logs.taking_over()
    assert not [a for a, other in sim.engines.items() if guessed in other.home.logs.logs]
    with pytest.raises(EngineError) as refused:
        e.placement.authorized(1, "0" * 32)
    assert refused.value.code == "NOT_FOUND"


@pytest.mark.parametrize("shape", ["a third, interleaved", "two of six in a row"])
def test_a_cut_and_its_heal_show_no_alert_twice_nor_a_number_for_two_documents(shape):
    """The ring is cut in two for a while, documents published on both sides, then the cut
    heals 20 s later. Where a log's majority is across the cut from its home, the
    successors there lead it; a home left without a majority of its log commits nothing:
    the batches it is sent are held, and their DNs keep them until the link is back (cut
    two in a row, the log of the first keeps its majority on the smaller side, out of the
    larger side's reach). Nothing is shown twice or under two numbers, nothing shown is
    not owed, and every alert owed is shown: those of documents published on the smaller
    side included, which reach the queries the other side alone holds once the cut heals
    and their DNs announce them again (DN.on_found)."""
    nodes = 9 if shape.startswith("a third") else 6
    wl, sim, subs = ring(3, nodes=nodes)
    streams = Subscribers(sim)
    by_id = sorted(sim.engines, key=lambda a: sim.ring.nodes[a].me.id)
    minority = set(by_id[::3]) if nodes == 9 else set(consecutive(sim, busiest_home(sim), 2))
    majority = sorted(set(sim.engines) - minority)
    n = len(wl.docs)  # half of them published on the smaller side
    before, during = wl.docs[: n // 6], wl.docs[n // 6 : n // 3]
    inside, after = wl.docs[n // 3 : 5 * n // 6], wl.docs[5 * n // 6 :]
    publish(sim, before, sorted(sim.engines))
    streams.read()
    sim.cut(minority)
    sim.heal_later(20.0)
    publish(sim, during, majority)
    publish(sim, inside, sorted(minority))
    held = sum(e.counters["alerts_held"] for e in sim.engines.values())
    sim.heal()
    publish(sim, after, sorted(sim.engines))
    streams.read()
    streams.check_numbers()
    assert len(streams.shown) == len(set(streams.shown))  # nothing shown twice
    assert_exact(streams.shown, wl.oracle(subs))
    again = sum(e.counters["documents_sent_again"] for e in sim.engines.values())
    assert again >= len(inside)  # every side announced what it sent while apart again
    repeated = sum(e.counters["alerts_repeated"] for e in sim.engines.values())
    assert repeated > 0  # the homes that had them took them once, and counted the rest
    dropped = {k: n for e in sim.engines.values() for k, n in e.counters.items() if "dropped:" in k}
    assert not any(dropped.values()), dropped  # and nothing it sent again went astray
    if nodes == 6:  # the larger side's DNs were held by a home without a majority
        assert held > 0


def test_a_paused_home_is_fenced_not_obeyed():
    """A home stops (SIGSTOP: to the others, cut off alone) while its successor leads its
    log in a higher epoch; woken, it still believes it leads. An alert batch it is sent then
    (by a DN that remembers its address) is not numbered there: the members refuse its
    epoch, and the DN is told to look again."""
    wl, sim, subs = ring(3)
    streams = Subscribers(sim)
    half = len(wl.docs) // 2
    publish(sim, wl.docs[:half], sorted(sim.engines))
    streams.read()
    paused = busiest_home(sim)
    stale = sim.engines[paused]
    key = stale.home.logs.own
    sim.cut([paused])
    others = sorted(a for a in sim.engines if a != paused)
    publish(sim, wl.docs[half:], others)
    sim.ring.heal()  # it wakes: no maintenance has run yet
    assert stale.home.logs.leaders[key].leading  # as far as it knows
    box = next(s for s in stale.subscriptions.values() if s.key == key)
    batch = pb.AlertBatch(home_id=key, docnos=["LATE-1"], subscription_ids=[box.id])
    reply = sim.ring.run(sim.ring.nodes[paused], stale.handle("Deliver", batch))
    assert reply.moved and not reply.held
    assert not stale.home.logs.leaders.get(key) or not stale.home.logs.leaders[key].leading
    assert "LATE-1" not in {doc[0] for doc in box.mailbox.queue}
    sim.heal()
    streams.read()
    streams.check_numbers()
    assert_exact(streams.shown, wl.oracle(subs))


@hsettings(max_examples=6, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**16),
    nodes=st.integers(6, 10),
    faults=st.lists(st.sampled_from(["fail", "cut", "pause"]), min_size=1, max_size=3),
)
def test_any_faults_show_nothing_twice_and_lose_only_what_is_counted(seed, nodes, faults):
    """Nodes fail, random groups are cut off and healed, homes pause, with documents
    published all along: whatever happens, nothing is shown twice or under two numbers,
    numbers run without gaps, nothing is shown that is not owed, and every alert owed but
    not shown was counted lost by a DN."""
    wl, sim, subs = ring(5, nodes=nodes, seed=seed)
    streams = Subscribers(sim)
    rng = random.Random(seed)
    steps = [wl.docs[i :: len(faults) + 1] for i in range(len(faults) + 1)]
    publish(sim, steps[0], sorted(sim.engines))
    streams.read()
    for fault, docs in zip(faults, steps[1:]):
        alive = sorted(sim.engines)
        if fault == "fail" and len(alive) > 5:
            sim.fail([rng.choice(alive)])
            publish(sim, docs, sorted(sim.engines))
        else:
            apart = rng.sample(alive, 1 if fault == "pause" else len(alive) // 3)
            sim.cut(apart)
            publish(sim, docs, sorted(set(alive) - set(apart)))
            sim.heal()
        streams.read()
    streams.check_numbers()
    assert len(streams.shown) == len(set(streams.shown))
    owed = wl.oracle(subs)
    assert set(streams.shown) <= owed
    assert len(streams.shown) >= len(owed) // 2  # not vacuous
    lost = sum(n for e in sim.engines.values() for k, n in e.counters.items() if "dropped:" in k)
    assert len(owed - set(streams.shown)) <= lost


def test_a_home_cut_off_from_its_log_answers_its_subscribers_unavailable():
    """A home cut off from the other members of its log leads on in its own view, but no
    majority has answered it for a while: its subscribers are told the home is in a
    minority (they look for its key's new home), not served what may no longer be true.
    Once the cut heals and it leads with a majority again, they are served."""
    from cqengine.core.basis.errors import EngineError

    wl, sim, _ = ring(3)
    home = sorted(sim.engines)[1]
    reply = sim.subscribe(wl.queries[0], via=home)
    engine = sim.engines[home]
    logs = engine.home.logs
    engine.placement.authorized(reply.subscription_id, reply.token)  # served
    sim.cut([home])
    sim.ring.run(sim.ring.nodes[home], logs.maintain())  # no member answers
    period = sim.settings.reconcile_period
    sim.ring.clock.advance(5 * period)
    assert logs.in_minority(reply.home_id)
    with pytest.raises(EngineError, match="home in minority"):
        engine.placement.authorized(reply.subscription_id, reply.token)
    assert engine.stats(sim.ring.ledger).logs_in_minority == 1
    sim.heal()
    sim.reconcile_round()
    assert not logs.in_minority(reply.home_id)
    engine.placement.authorized(reply.subscription_id, reply.token)


def test_a_log_of_one_member_is_never_in_a_minority():
    """A ring of one copy on the home log: each log's one member is its majority, however
    long no other node answers (there is none to)."""
    wl, sim, _ = ring(1, nodes=4)
    publish(sim, wl.docs[:5], sorted(sim.engines))
    sim.reconcile_round()
    sim.ring.clock.advance(10 * sim.settings.reconcile_period)
    sim.reconcile_round()
    led = [(e, k) for e in sim.engines.values() for k in e.home.logs.leaders]
    assert led and not any(e.home.logs.in_minority(k) for e, k in led)
