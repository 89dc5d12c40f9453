"""Ring-wide settings travel to a joining node by value: the term statistics and popular
terms the first node read from its files, never the files' paths (a node must not read a
local path that a message names)."""

from cqengine.core.settings import Settings
from cqengine.proto import cqengine_pb2 as pb


def test_a_joining_node_gets_the_files_contents_and_reads_no_path(tmp_path):
    stats, popular = tmp_path / "stats.tsv", tmp_path / "popular.txt"
    stats.write_text("levee\t12\nhurrican\t40\n")
    popular.write_text("storm\nrain\n")
    first = Settings(
        strategy="sap-mhi", stats_path=str(stats), popular_path=str(popular)
    ).validate()
    wire = first.to_pb().SerializeToString()
    stats.unlink()
    popular.unlink()  # a joining node elsewhere has no such files
    joined = Settings.from_pb(pb.EngineConfig.FromString(wire))
    assert joined.df == {"levee": 12, "hurrican": 40}
    assert joined.popular == frozenset({"storm", "rain"})
    assert (joined.stats_path, joined.popular_path) == ("", "")
    assert str(tmp_path) not in wire.decode("utf-8", "replace")
    assert not {"stats_path", "popular_path"} & set(pb.EngineConfig.DESCRIPTOR.fields_by_name)


def test_no_popular_list_stays_none_so_the_ring_gossips_them():
    joined = Settings.from_pb(Settings(strategy="sap-mhi").validate().to_pb())
    assert joined.popular is None and joined.gossiped and joined.df is None


def test_a_summary_of_the_settings_leaves_the_values_out(tmp_path):
    stats = tmp_path / "stats.tsv"
    stats.write_text("levee\t12\n")
    settings = Settings(strategy="oi", stats_path=str(stats)).validate()
    assert len(settings.to_pb(values=False).df) == 0
    assert settings.to_pb(values=False).strategy == "oi"
