"""The live profile puts each sample where its innermost telling frame says."""

from support.repo import load_script

LOOP = "BaseEventLoop._run_once (asyncio/base_events.py:1922);Handle._run (asyncio/events.py:80)"
WORKER = "Thread._bootstrap (threading.py:1002);_worker (concurrent/futures/thread.py:83)"


def test_samples_are_placed_by_thread_and_innermost_frame():
    profile = load_script("experiments/profile_live.py")
    raw = "\n".join(
        [
            f"{LOOP};run_async (chord/live/grpc_transport.py:141);Resolver.knowing "
            "(cqengine/core/resolution/resolution.py:248);"
            "unique (numpy/lib/_arraysetops_impl.py:296) 6",
            f"{LOOP};run_async (chord/live/grpc_transport.py:141);GrpcTransport.call "
            "(chord/live/grpc_transport.py:118);UnaryUnaryCall._invoke (grpc/aio/_call.py:595) 3",
            f"{LOOP};EngineNode.handle (cqengine/core/node.py:104);PyUpb_Message (_message.so) 1",
            f"{LOOP} 4",
            f"{LOOP};LiveNode.dispatch (chord/live/server.py:133) 2",
            f"{WORKER};prepare (cqengine/core/frame/documents.py:43);analyze "
            "(cqengine/text/analysis.py:68) 2",
            "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982) 2",
            f"{LOOP.split(';')[0]};EpollSelector.select (selectors.py:468) 5",
            "",
        ]
    )
    got = profile.summarize(raw, top=2)
    assert got["samples"] == 25
    assert got["share_by_place"] == {
        "event loop idle (waiting in epoll)": 5 / 25,
        "engine core": 6 / 25,
        "gRPC and protobuf": 4 / 25,
        "event loop and gRPC callbacks": 4 / 25,
        "live shell": 2 / 25,
        "analysis (worker thread)": 2 / 25,
        "gRPC poller thread": 2 / 25,
    }
    assert abs(sum(got["share_by_place"].values()) - 1) < 1e-12
    assert [x["share"] for x in got["innermost"]] == [6 / 25, 5 / 25]
    # callees included: a function counts once a sample, however deep its frames
    inclusive = {x["function"]: x["share"] for x in got["inclusive"]}
    assert inclusive["BaseEventLoop._run_once (asyncio/base_events.py)"] == 21 / 25
    assert inclusive["run_async (chord/live/grpc_transport.py)"] == 9 / 25
    assert got["inclusive"][0]["function"].startswith("BaseEventLoop._run_once")
    every = {x["function"]: x["share"] for x in profile.summarize(raw, top=20)["inclusive"]}
    assert every["PyUpb_Message (_message.so)"] == 1 / 25  # native code: no line to strip
    assert ")" not in every
