"""Ring-wide settings travel to a joining node by value: the term statistics and popular
terms the first node read from its files, never the files' paths (a node must not read a
local path that a message names)."""

from dataclasses import fields

from cqengine.core.terms.settings import Settings
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.termfiles import load_stats, load_terms


def test_a_joining_node_gets_the_files_contents_and_reads_no_path(tmp_path):
    stats, popular = tmp_path / "stats.tsv", tmp_path / "popular.txt"
    stats.write_text("levee\t12\nhurrican\t40\n")
    popular.write_text("storm\nrain\n")
    first = Settings(strategy="sap-mhi", df=load_stats(stats), popular=load_terms(popular))
    first.validate()
    wire = first.to_pb().SerializeToString()
    stats.unlink()
    popular.unlink()  # a joining node elsewhere has no such files
    joined = Settings.from_pb(pb.EngineConfig.FromString(wire))
    assert joined.df == {"levee": 12, "hurrican": 40}
    assert joined.popular == frozenset({"storm", "rain"})
    assert str(tmp_path) not in wire.decode("utf-8", "replace")
    paths = {"stats_path", "popular_path"}  # the wire reserves these names; no field has them
    assert not paths & set(pb.EngineConfig.DESCRIPTOR.fields_by_name)
    assert not paths & {f.name for f in fields(Settings)}


def test_no_popular_list_stays_none_so_the_ring_gossips_them():
    joined = Settings.from_pb(Settings(strategy="sap-mhi").validate().to_pb())
    assert joined.popular is None and joined.gossiped and joined.df is None


def test_a_summary_of_the_settings_leaves_the_values_out(tmp_path):
    stats = tmp_path / "stats.tsv"
    stats.write_text("levee\t12\n")
    settings = Settings(strategy="oi", df=load_stats(stats)).validate()
    assert len(settings.to_pb(values=False).df) == 0
    assert settings.to_pb(values=False).strategy == "oi"


def test_a_joining_node_takes_settings_larger_than_grpcs_default_message():
    """Term statistics of a real corpus (hundreds of thousands of terms) make settings of
    several MiB: a joining node reads them whole, past gRPC's 4 MiB default."""
    import asyncio

    from chord.live.server import LiveNode
    from cqengine.core.node import EngineNode
    from cqengine.live.ports import free_ports
    from cqengine.live.service import fetch_config

    df = {f"term{i:06d}": i for i in range(300_000)}
    first = Settings(strategy="oi", df=df).validate()
    assert first.to_pb().ByteSize() > 4 << 20
    node = LiveNode(
        "127.0.0.1", free_ports(1)[0], app=lambda chord, spawn: EngineNode(chord, first, spawn)
    )

    async def main():
        await node.start()
        try:
            return await fetch_config(node.me.address)
        finally:
            await node.stop(graceful=False)

    joined, ring = asyncio.run(asyncio.wait_for(main(), 60))
    assert joined.df == df and joined.strategy == "oi"
    assert ring == 0  # a node whose shell set no ring id (an earlier version's) sends none
