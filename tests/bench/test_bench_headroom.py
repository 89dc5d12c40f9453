"""The announcement-headroom benchmark on a small simulated ring: it sees every
announcement message the ledger counts, its alerts equal the matcher's (it exits
otherwise), and what it calls skippable is what carries no id with a list."""

import json

from support.repo import load_script


def test_bench_headroom_small(tmp_path):
    bench = load_script("experiments/bench_headroom.py")
    out = tmp_path / "h.json"
    args = ["--nodes", "64", "--queries", "400", "--docs", "40", "--strategies", "ri,mhi"]
    assert bench.main([*args, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    for row in result["strategies"].values():
        assert row["announce_messages_per_doc"] == row["ledger_announce_messages_per_doc"] > 0
        assert 0 < row["needed_messages_per_doc"] <= row["announce_messages_per_doc"]
        assert 0 < row["listed_ids_per_doc"] <= row["ids_per_doc"]
        assert row["skippable_share"] == 1 - (
            row["needed_messages_per_doc"] / row["announce_messages_per_doc"]
        )
        assert row["indexed_ids"] > 0
        # a message that leads to a match carries an id with a list
        assert 0 < row["matching_messages_per_doc"] <= row["needed_messages_per_doc"]


def test_every_id_listed_leaves_nothing_to_skip():
    """The watch's arithmetic on a message it is shown: ids with lists make it needed."""
    bench = load_script("experiments/bench_headroom.py")
    from cqengine.proto import cqengine_pb2 as pb

    watch = bench.Headroom(indexed={1, 2})
    watch.on_announce(None, pb.Announcement(runs=[pb.Run(ids=[1, 5]), pb.Run(ids=[7])]))
    watch.on_announce(None, pb.Announcement(runs=[pb.Run(ids=[5, 6])]))
    assert (watch.messages, watch.needed, watch.ids, watch.listed) == (2, 1, 5, 1)


def test_a_message_leads_to_a_match_when_it_carries_a_matching_querys_index_id():
    bench = load_script("experiments/bench_headroom.py")
    from cqengine.core.frame.documents import PublishedDoc
    from cqengine.proto import cqengine_pb2 as pb

    watch = bench.Headroom(indexed={1, 2}, matching={"D": {1}})
    watch.on_published(None, PublishedDoc(9, "D", "", "", frozenset({1, 2, 5})))
    watch.on_announce(None, pb.Announcement(doc_keys=[9], runs=[pb.Run(ids=[5, 1], doc=0)]))
    watch.on_announce(None, pb.Announcement(doc_keys=[9], runs=[pb.Run(ids=[2], doc=0)]))
    assert (watch.messages, watch.needed, watch.matched) == (2, 2, 1)
