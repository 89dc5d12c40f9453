"""The named hand-offs between roles (cqengine.core.frame.handoffs): the role each one names
meets it, member for member and parameter for parameter, on a real engine node, so a
Protocol cannot drift from the method go-to-definition is meant to lead to."""

import inspect

from support.fakes import RecordingAnnouncer, RecordingCopier, RecordingHearer
from support.workloads import make_settings, workload

from cqengine.core.frame import handoffs
from cqengine.evaluation.measuring.sim import EngineSimulator

# each hand-off, and the role of a node that is handed over as it
HANDED = {
    handoffs.Hearer: "qn",
    handoffs.Announcing: "announcer",
    handoffs.HopFilters: "filters",
    handoffs.Copier: "replication",
    handoffs.OwnBatches: "dn",
}


def members(protocol: type) -> dict[str, inspect.Signature | None]:
    """A Protocol's methods with their signatures (None: an attribute)."""
    out: dict[str, inspect.Signature | None] = {}
    for name, value in vars(protocol).items():
        if callable(value) and not name.startswith("_"):
            out[name] = inspect.signature(value)
    for name in getattr(protocol, "__annotations__", {}):
        out[name] = None
    return out


def unmet(protocol: type, role: object) -> list[str]:
    """What the role lacks of the protocol, or has with other parameters."""
    missing = []
    for name, signature in members(protocol).items():
        if not hasattr(role, name):
            missing.append(f"{name}: missing")
        elif signature is not None:
            theirs = list(inspect.signature(getattr(role, name)).parameters)
            mine = [p for p in signature.parameters if p != "self"]
            if theirs != mine:
                missing.append(f"{name}({', '.join(theirs)}) is not {name}({', '.join(mine)})")
    return missing


def test_each_role_meets_the_hand_off_it_is_given_as():
    sim = EngineSimulator(1, make_settings(workload(1)), seed=1)
    node = next(iter(sim.engines.values()))
    assert {p: unmet(p, getattr(node, role)) for p, role in HANDED.items()} == {
        p: [] for p in HANDED
    }
    # and each role holds the others it is handed, by name
    assert node.announcer.qn is node.qn and node.announcer.filters is node.filters
    assert node.dn.announcer is node.announcer
    assert node.replication.dn is node.dn and node.home.replication is node.replication


def test_the_stand_ins_a_role_is_tested_alone_with_meet_the_hand_offs_too():
    """A role tested alone (tests/support/fakes.py) is handed recordings in place of the
    roles it calls: they must be what it is handed on a node, or its tests would pass over
    calls a node's roles do not answer."""
    stand_ins = {
        handoffs.Hearer: RecordingHearer(),
        handoffs.Announcing: RecordingAnnouncer(),
        handoffs.Copier: RecordingCopier(),
    }
    assert {p: unmet(p, fake) for p, fake in stand_ins.items()} == {p: [] for p in stand_ins}


def test_a_role_that_drifts_from_its_hand_off_is_found():
    class Drifted:
        def heard(self, heard, extra):
            pass

    assert unmet(handoffs.Hearer, Drifted()) == ["heard(heard, extra) is not heard(h)"]
    assert unmet(handoffs.OwnBatches, Drifted()) == ["take_over: missing", "own: missing"]
