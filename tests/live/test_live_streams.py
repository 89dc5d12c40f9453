"""Alert streams on live loopback rings: each alert carries its subscription's sequence
number and stays in the mailbox until acknowledged, so a stream that breaks, or a home
node that is killed and restarted from its data directory, loses and repeats nothing."""

from __future__ import annotations

import io
import signal
import time

import grpc
from support.live import FAST, kill_hard, restart
from support.waiting import eventually

from cqengine.live.client import Client, stream_request
from cqengine.live.ring.commands import ring_up
from cqengine.live.ring.processes import stop_processes
from cqengine.proto import cqengine_pb2 as pb

WORDS = "levee hurricane"


def publish(address: str, credentials, first: int, n: int) -> list[str]:
    docnos = [f"D{i}" for i in range(first, first + n)]
    with Client(address, credentials=credentials) as c:
        replies = c.publish_many([(d, f"the {WORDS} report {d}", "") for d in docnos])
    assert all(r.accepted for r in replies)
    return docnos


def take(it, n: int, timeout: float = 30.0) -> list[pb.Alert]:
    """The next n alerts of an iterator (bounded by a deadline)."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got.append(next(it))
    return got


def test_a_broken_stream_resumes_where_its_client_stands(tmp_path):
    ring = ring_up(3, tmp_path / "ring.json", timing=FAST, out=io.StringIO())
    credentials = ring.credentials()
    try:
        home = ring.nodes[1].address
        with Client(home, credentials=credentials) as c:
            subs = [c.subscribe(WORDS) for _ in range(3)]
            sent = publish(home, credentials, 0, 20)
            # a raw stream: read a message, then break it without acknowledging anything
            stream = c._stub.StreamAlerts(stream_request(subs), timeout=10)
            first = next(stream)
            stream.cancel()
            assert len(first.seqs) == len(first.subscription_ids) > 0
            it = c.alerts(subs, timeout=20)
            got = take(it, 60)
            it.close()  # acknowledges all 60
            it = c.alerts(subs, timeout=1)
            assert list(it) == []  # nothing is sent twice once acknowledged
    finally:
        stop_processes(ring.nodes, grace=2.0)
    per_sub = {}
    for a in got:
        per_sub.setdefault(a.subscription_id, []).append(a)
    assert sorted(per_sub) == sorted(s.subscription_id for s in subs)
    for alerts in per_sub.values():  # every alert once, numbered 0.. without a gap, in order
        assert [a.seq for a in alerts] == list(range(20))
        assert sorted(a.docno for a in alerts) == sorted(sent)


def test_a_watermark_acknowledges_a_streams_messages_and_names_only_an_open_stream(tmp_path):
    """A stream opened with `watermark` names its id in its first message; an
    acknowledgement of its first messages by that id takes their alerts out of the
    mailboxes (no token named). An id no stream of the node has is NOT_FOUND, a watermark
    past what was sent INVALID_ARGUMENT; tokens still acknowledge as before."""
    ring = ring_up(2, tmp_path / "ring.json", timing=FAST, out=io.StringIO())
    credentials = ring.credentials()
    try:
        home = ring.nodes[1].address
        with Client(home, credentials=credentials) as c:
            subs = [c.subscribe(WORDS) for _ in range(3)]
            publish(home, credentials, 0, 10)
            delivered(home, credentials, 30)
            stream = c._stub.StreamAlerts(stream_request(subs, watermark=True), timeout=10)
            message = next(stream)
            assert len(message.stream) == 16 and len(message.subscription_ids) == 30
            for wrong, code in (
                (pb.AckRequest(stream=bytes(16), through=1), grpc.StatusCode.NOT_FOUND),
                (pb.AckRequest(stream=message.stream, through=2), grpc.StatusCode.INVALID_ARGUMENT),
            ):
                try:
                    c._stub.AckAlerts(wrong, timeout=5)
                    raise AssertionError(f"{wrong} was taken")
                except grpc.RpcError as e:
                    assert e.code() == code, e
            c._stub.AckAlerts(pb.AckRequest(stream=message.stream, through=1), timeout=5)
            stream.cancel()
            assert list(c.alerts(subs, timeout=1)) == []  # acknowledged: not sent again
            publish(home, credentials, 10, 2)
            got = list(c.alerts(subs, timeout=2))  # by watermark, in Client.alerts
            assert sorted((a.subscription_id, a.seq) for a in got) == sorted(
                (s.subscription_id, seq) for s in subs for seq in (10, 11)
            )
            assert list(c.alerts(subs, timeout=1)) == []
    finally:
        stop_processes(ring.nodes, grace=2.0)


def test_alerts_of_many_messages_come_in_order_for_each_subscription(tmp_path):
    """More alerts than a message carries (1,000): a message groups them by document, so a
    subscription's may come out of order within one; the client hands each out in order."""
    ring = ring_up(2, tmp_path / "ring.json", timing=FAST, out=io.StringIO())
    credentials = ring.credentials()
    try:
        home = ring.nodes[1].address
        with Client(home, credentials=credentials) as c:
            subs = [c.subscribe(WORDS) for _ in range(50)]
        publish(home, credentials, 0, 30)
        delivered(home, credentials, 50 * 30)
        with Client(home, credentials=credentials) as c:
            got = list(c.alerts(subs, timeout=2))
    finally:
        stop_processes(ring.nodes, grace=2.0)
    per_sub: dict[int, list[int]] = {}
    for a in got:
        per_sub.setdefault(a.subscription_id, []).append(a.seq)
    assert len(per_sub) == 50
    assert all(seqs == list(range(30)) for seqs in per_sub.values())


def delivered(address: str, credentials, n: int, timeout: float = 20.0) -> None:
    """Until the node has put n alerts in its subscribers' mailboxes (fails after `timeout`)."""
    with Client(address, credentials=credentials) as c:
        eventually(
            lambda: c.stats().alerts_delivered,
            timeout,
            f"{n} alerts in the mailboxes of {address}",
            holds=lambda count: count >= n,
        )


def first_seq(client: Client, sub, timeout: float = 20.0) -> int:
    """The number of the first alert a raw stream of the subscription's home sends, once the
    home serves it (a restarted home serves once its successor has handed its range back)."""
    request = pb.StreamRequest(subscription_id=sub.subscription_id, token=sub.token)

    def first() -> int | grpc.RpcError:
        raw = client._stub.StreamAlerts(request, timeout=10)
        try:
            return next(raw).seqs[0]
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return e  # not served yet
        finally:
            raw.cancel()

    return eventually(
        first,
        timeout,
        "the home to serve the subscription's stream",
        holds=lambda seen: not isinstance(seen, grpc.RpcError),
        interval=0.2,
    )


def test_a_stream_survives_its_home_killed_and_restarted(tmp_path):
    """Alerts waiting in the mailboxes, some handed out and none acknowledged, when the home
    is killed: the client's stream resumes once the home is back from its data directory,
    and hands out the rest and the later ones, each once, numbered without a gap."""
    data = tmp_path / "data"
    ring = ring_up(3, tmp_path / "ring.json", timing=FAST, out=io.StringIO(), data_root=data)
    nodes, credentials = list(ring.nodes), ring.credentials()
    try:
        home, other = nodes[1], nodes[0].address
        with Client(home.address, credentials=credentials) as c:
            subs = [c.subscribe(WORDS) for _ in range(2)]
        publish(other, credentials, 0, 10)
        delivered(home.address, credentials, 20)
        client = Client(other, credentials=credentials)
        it = client.alerts(subs, home=home.address, timeout=90, resume=30)
        got = take(it, 7)  # handed out, not yet acknowledged (that waits ACK_EVERY)
        time.sleep(0.5)  # a home that forgot alerts once sent would have written so by now
        kill_hard(home)
        nodes.append(restart(home, other, ring, tmp_path, data / str(home.port)))
        # what was handed out but not acknowledged is kept
        with Client(home.address, credentials=credentials) as c:
            assert first_seq(c, subs[0]) == 0
        with Client(other, credentials=credentials) as c:  # the ring routes to the home again
            eventually(
                lambda: c.find_home(subs[0].home_id),
                30,
                f"a lookup from {other} to find the home {home.address}",
                holds=lambda found: found == home.address,
            )
        publish(other, credentials, 10, 20)
        got += take(it, 60 - 7)
        it.close()
        client.close()
    finally:
        stop_processes(nodes, grace=2.0, how=signal.SIGUSR1)
    per_sub = {}
    for a in got:
        per_sub.setdefault(a.subscription_id, []).append(a)
    for s in subs:  # every alert once and in order, across the restart
        alerts = per_sub[s.subscription_id]
        assert [a.seq for a in alerts] == list(range(30))
        assert sorted(a.docno for a in alerts) == sorted(f"D{i}" for i in range(30))
