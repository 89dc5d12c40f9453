"""Term ids and announcement runs for properties of pruning and resolution: id strategies
that make query and document ids collide often, and runs split hop by hop by arbitrary
routing, as stale or inconsistent routing tables would split them."""

from hypothesis import strategies as st

from cqengine.core.resolution.runs import group_runs, per_id

SMALL = 2**16  # a small id space makes collisions between query and document ids common
ids = st.integers(0, SMALL)
big_ids = st.integers(0, 2**64 - 1)


def deliver(runs, dest_seq, k, depth=3):
    """Split runs hop by hop with arbitrary destinations; yield each QN's local runs."""
    groups = group_runs(runs, per_id(lambda x: dest_seq[x % len(dest_seq)]), k)
    for dest, sub in groups.items():
        if dest == 0 or depth == 0:
            yield sub
        else:
            yield from deliver(sub, dest_seq[1:] + dest_seq[:1], k, depth - 1)
