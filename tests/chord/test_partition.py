"""A network partition and its healing, in memory. Each side of a partition forgets the
other's nodes as failed and makes a correct ring of its own; Chord's maintenance asks only
the nodes in a node's tables, so once the link is back the two rings stay apart for ever.
A node asking the nodes it forgot as unreachable (ChordNode.recontact) merges them."""

from inspect import isgenerator

from chord.protocol.calls import PeerUnreachable
from chord.protocol.driver import drive
from chord.protocol.node import LOST_KEPT, LOST_TRIES, LOST_WAIT, ChordNode
from chord.simulation.oracle import ring_problems
from chord.simulation.simulator import Simulator

R = 4


class Partition:
    """The simulator's nodes, their calls crossing between `cut` and the rest failing while
    the link is down (each side's processes run on)."""

    def __init__(self, sim: Simulator, cut: set[str]) -> None:
        self.sim, self.cut, self.down = sim, cut, False

    def run(self, node: ChordNode, op):
        def call(c):
            target = self.sim.nodes.get(c.peer.address)
            apart = (c.peer.address in self.cut) != (node.me.address in self.cut)
            if target is None or (self.down and apart):
                raise PeerUnreachable(c.peer, "partitioned")
            reply = target.handle(
                c.method, type(c.request).FromString(c.request.SerializeToString())
            )
            return self.run(target, reply) if isgenerator(reply) else reply

        return drive(op, call)

    def rounds(self, k: int, recontact: bool) -> None:
        for _ in range(k):
            nodes = self.sim.live()
            self.sim.rng.shuffle(nodes)
            for node in nodes:
                ops = [node.stabilize, node.check_predecessor, node.fix_fingers]
                for op in ops + ([node.recontact] if recontact else []):
                    self.run(node, op())

    def problems(self, side: bool | None = None) -> list[str]:
        """What is wrong with the ring of one side (True: the cut nodes), or of all."""
        tables = [
            n.table for a, n in self.sim.nodes.items() if side is None or (a in self.cut) == side
        ]
        return ring_problems(tables, R)


def partitioned(n: int = 12, every: int = 3) -> Partition:
    """A converged ring of n nodes, every `every`-th of them (by id, so that the two sides
    interleave around the circle) cut off, and each side's own ring made."""
    sim = Simulator(r=R, seed=5)
    sim.build_instant(Simulator.address(i) for i in range(n))
    by_id = sorted(sim.nodes.values(), key=lambda node: node.me.id)
    net = Partition(sim, {node.me.address for node in by_id[::every]})
    net.down = True
    net.rounds(40, recontact=True)  # recontact fails throughout: the other side is away
    assert net.problems(side=True) == [] and net.problems(side=False) == []
    return net


def test_two_rings_a_partition_made_stay_apart_without_recontact():
    net = partitioned()
    net.down = False
    net.rounds(40, recontact=False)
    assert any("successor ring holds" in p for p in net.problems())


def test_rings_split_by_a_partition_merge_once_it_heals():
    net = partitioned()
    assert all(node.lost for node in net.sim.live())  # each remembers the other side
    net.down = False
    for rounds in range(1, 41):  # noqa: B007 (how many it took is told after the loop)
        net.rounds(1, recontact=True)
        if not net.problems():
            break
    assert net.problems() == [], f"not one ring after {rounds} rounds"
    net.rounds(3, recontact=True)
    assert net.problems() == []
    # every lost node was found again in the ring: none is asked any more
    assert all(not node.lost for node in net.sim.live())


def test_a_node_remembers_the_latest_lost_and_not_those_that_left():
    sim = Simulator(r=R, seed=1)
    sim.build_instant(Simulator.address(i) for i in range(LOST_KEPT + 4))
    me, *others = sorted(sim.nodes.values(), key=lambda node: node.me.id)
    for other in others:
        me.forget(other.me)
    assert list(me.lost) == [o.me for o in others[-LOST_KEPT:]]
    sim.leave(others[-1].me.address)  # it tells its predecessor, me, that it leaves
    assert others[-1].me not in me.lost


def test_a_node_lost_for_good_is_asked_less_and_less_then_given_up():
    sim = Simulator(r=R, seed=2)
    sim.build_instant(Simulator.address(i) for i in range(6))
    me, gone = sorted(sim.nodes.values(), key=lambda node: node.me.id)[:2]
    net = Partition(sim, {gone.me.address})
    net.down = True  # it never answers again
    me.forget(gone.me)
    asked = []  # the rounds in which it was asked
    for round in range(100 * LOST_TRIES):
        tries = me.lost[gone.me][0]
        net.run(me, me.recontact())
        if gone.me not in me.lost:
            asked.append(round)
            break
        if me.lost[gone.me][0] > tries:
            asked.append(round)
    assert gone.me not in me.lost, "a node that never answers is asked for ever"
    assert len(asked) == LOST_TRIES
    gaps = [b - a for a, b in zip(asked, asked[1:])]
    assert gaps == sorted(gaps) and gaps[0] < gaps[-1] <= LOST_WAIT + 1  # backing off


def test_an_adopted_successor_undone_by_stabilize_is_asked_for_again():
    """recontact keeps the lost node it merged through until its ring knows it: should a
    stabilize under way put the old successor back, the next round merges again."""
    net = partitioned()
    net.down = False
    ring = sorted(net.sim.live(), key=lambda n: n.me.id)
    true_successor = {a.me: b.me for a, b in zip(ring, ring[1:] + ring[:1])}
    # a node whose successor in the whole ring is of the other side
    node = next(n for n in ring if n.lost and true_successor[n.me] != n.table.successor)
    before = node.table.successor
    for _ in range(LOST_WAIT + 1):  # until one of its lost nodes is due and answers
        net.run(node, node.recontact())
        if node.table.successor != before:
            break
    assert node.table.successor != before, "the merge did not begin"
    node.table.set_successors([before, *node.table.successors])  # a stabilize's old view
    assert node.lost  # what it merged through is still remembered
    for _ in range(LOST_WAIT + 1):
        net.run(node, node.recontact())
        if node.table.successor != before:
            break
    assert node.table.successor != before, "the undone merge was not tried again"
