"""The packages' rooms, in order: a room imports only itself and the rooms before it
(tests/project/test_structure.py), and a document's path through the core never steps back
among them (tests/project/test_architecture.py)."""

# cqengine/core's rooms along a document's path (cqengine/core/__init__.py): a room imports
# only itself and the rooms before it; node.py, at the top, any
CORE_ROOMS = [
    "basis",
    "terms",
    "alerts",
    "homelog",
    "state",
    "resolution",
    "frame",
    "dn",
    "announcement",
    "qn",
    "delivery",
    "home",
    "placement",
]


# the other crowded packages' rooms, in the same sense: chord's I/O-free protocol, then its
# two shells (hypercorn's protocol/ beside its asyncio/ and trio/); the evaluation from its
# inputs through measuring and passes to the reports
ROOMS = {
    "cqengine.core": CORE_ROOMS,
    "chord": ["protocol", "simulation", "live"],
    "cqengine.evaluation": ["setup", "measuring", "passes", "reports"],
}
