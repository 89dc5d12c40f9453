"""`cqengine.live.client.Client`: the Python client of a ring (any node accepts any call).

    with Client("127.0.0.1:7000") as c:
        sub = c.subscribe("hurricane levee")
        either = c.subscribe('hurricane OR "tropical storm" -drill')  # either.alternatives
        subs = c.subscribe_many(["levee breach", "storm surge"])  # refused ones have `code`
        c.publish("DOC-1", "The levee held as the hurricane passed.")
        c.publish_many([("DOC-2", "More rain on the levee.", ""), ("DOC-3", "Calm.", "")])
        for alert in c.alerts(sub):
            print(alert.docno)

The node a client subscribes through is the subscription's home: its alerts stream from
there (`alerts` connects to the home node by itself; one stream may carry many of a home's
subscriptions). Alerts carry their subscription's sequence numbers; `alerts` acknowledges
what it has handed out, and resumes a broken stream where it stood: every alert once, in
order, across dropped connections and restarts of the home. In a replicated ring (the
default) a subscription outlives its home: when the home fails, the next of its successors
serves it, and `alerts` finds that node (any node's lookup of the home key names it) and
resumes there.

On a ring that runs mutual TLS (what `ring up` starts unless told --insecure) a client
presents a certificate whose role allows what it asks (`cqengine certs client`). By
default it finds one itself, as the command line does: `find_credentials`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import grpc

from chord.live.client import lookup
from chord.live.tls import Credentials, TlsError, channel, tls_failure
from cqengine.core.basis.limits import MAX_BATCH_QUERIES
from cqengine.live.ringfile import DEFAULT_RING_FILE, RingFile
from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc


class ClientError(Exception):
    """The ring refused a call, or could not be reached; `code` is the gRPC status name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error(e: grpc.RpcError, address: str, credentials: Credentials | None) -> ClientError:
    why = tls_failure(e, address, credentials)
    if why is not None:
        return ClientError("UNAUTHENTICATED", why)
    code = e.code().name
    if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        said = e.details() or ""  # the node's reason, when it answered (home in minority)
        return ClientError(
            code, f"node {address} does not answer ({code.lower()})" + (f": {said}" if said else "")
        )
    return ClientError(code, e.details() or code)


def unbatched(batch: pb.AlertBatch) -> Iterator[pb.Alert]:
    """The alerts of a batch, one by one."""
    n = len(batch.docnos)
    titles, snippets = batch.titles or [""] * n, batch.snippets or [""] * n
    counts = batch.counts or [len(batch.subscription_ids)]
    subs, start = batch.subscription_ids, 0
    seqs = batch.seqs or [0] * len(subs)
    for docno, title, snippet, c in zip(batch.docnos, titles, snippets, counts):
        for sub_id, seq in zip(subs[start : start + c], seqs[start : start + c]):
            yield pb.Alert(
                subscription_id=sub_id, docno=docno, title=title, snippet=snippet, seq=seq
            )
        start += c


ACK_EVERY = 1.0  # seconds between a stream's acknowledgements (and at most ACK_ALERTS alerts)
ACK_ALERTS = 1000
RESUME_WAITS = (0.1, 0.2, 0.5, 1.0)  # between attempts to resume a broken stream, then the last


def key_list(keys: Sequence[tuple[int, str]], nexts: dict[int, int]) -> list[pb.SubscriptionKey]:
    return [pb.SubscriptionKey(subscription_id=i, token=t, next=nexts[i]) for i, t in keys]


def stream_request(
    subs: Sequence[pb.SubscribeReply | tuple[int, str]],
    nexts: dict[int, int] | None = None,
    **fields,
) -> pb.StreamRequest:
    """The StreamAlerts request of these subscriptions of one home (SubscribeReplies, or
    ids and tokens), each from its `next` (0 where `nexts` names none), with these more
    fields (home_id, watermark)."""
    keys = [(s.subscription_id, s.token) if isinstance(s, pb.SubscribeReply) else s for s in subs]
    nexts = {i: (nexts or {}).get(i, 0) for i, _ in keys}
    (first_id, first_token), *more = keys
    return pb.StreamRequest(
        subscription_id=first_id,
        token=first_token,
        next=nexts[first_id],
        subscriptions=key_list(more, nexts),
        **fields,
    )


class Acknowledger:
    """What a stream's subscriber has been handed, and how its home is told: by the
    stream's id and how many of its messages were handed out whole (one number: the home
    checked the tokens as the stream opened), else, for a stream of a node that knows no
    watermark or that ended, by each subscription's token and next alert."""

    def __init__(self, keys: Sequence[tuple[int, str]], home_id: int) -> None:
        self.keys, self.home_id = keys, home_id
        self.nexts = {sub_id: 0 for sub_id, _ in keys}  # the first alert of each not handed out
        self.acked = dict(self.nexts)  # what the home was last told
        self.opened()

    def opened(self) -> None:
        """A new stream: no id yet (its first message brings it), no message handed out."""
        self.stream, self.messages, self.through, self.whole = b"", 0, 0, True

    def received(self, batch: pb.AlertBatch) -> None:
        """A message begins to be handed out."""
        self.stream = self.stream or batch.stream
        self.whole = False

    def handed(self) -> None:
        """Every alert of the message was handed out."""
        self.messages += 1
        self.whole = True

    def ack(self, client: Client) -> None:
        if self.stream and self.whole:
            if self.messages == self.through:
                return  # nothing new
            try:
                request = pb.AckRequest(stream=self.stream, through=self.messages)
                client._call("AckAlerts", request)
                self.through = self.messages
                self.acked.update(self.nexts)
                return
            except ClientError as e:
                if e.code != "NOT_FOUND":
                    raise
                self.stream = b""  # it ended: by tokens, from now on
        # only the subscriptions whose next moved: the home checks each one's token (a
        # hash), and a stream may carry thousands, most of them quiet
        moved = [(i, t) for i, t in self.keys if self.acked.get(i) != self.nexts[i]]
        if moved:
            acks = pb.AckRequest(subscriptions=key_list(moved, self.nexts), home_id=self.home_id)
            client._call("AckAlerts", acks)
            self.acked.update(self.nexts)


CLIENT_NAME = "client"  # the certificate a client presents unless told another
FIND = "find"  # Client(credentials=FIND): find them (find_credentials)


def find_credentials(
    address: str | None = None,
    ring_file: Path | None = None,
    tls_dir: Path | None = None,
    name: str | None = None,
) -> Credentials | None:
    """The credentials a client presents (None: it speaks plaintext). From `tls_dir` or
    else $CQENGINE_TLS_DIR, the certificate `name` (else $CQENGINE_TLS_NAME, else
    `client`); failing both, from the ring file that `ring up` wrote (`ring_file`, else
    $CQENGINE_RING_FILE or .cqengine/ring.json), if it lists this address."""
    name = name or os.environ.get("CQENGINE_TLS_NAME") or CLIENT_NAME
    tls_dir = tls_dir or os.environ.get("CQENGINE_TLS_DIR")
    if tls_dir:
        return Credentials.load(Path(tls_dir), name)
    ring_file = ring_file or Path(os.environ.get("CQENGINE_RING_FILE") or DEFAULT_RING_FILE)
    if not ring_file.is_file():
        return None
    ring = RingFile.load(ring_file)
    if address is not None and address not in ring.addresses():
        return None
    return ring.credentials(name)


class Client:
    def __init__(
        self,
        address: str,
        timeout: float = 30.0,
        credentials: Credentials | None | str = FIND,
    ) -> None:
        """A client of the node at `address`. `credentials`: the certificate to present on
        a ring that runs mutual TLS; None speaks plaintext, and FIND (the default) finds
        them (find_credentials: $CQENGINE_TLS_DIR, or the ring file listing `address`)."""
        if credentials == FIND:
            try:
                credentials = find_credentials(address)
            except TlsError as e:
                raise ClientError("UNAUTHENTICATED", str(e)) from None
        self.address, self.timeout, self.credentials = address, timeout, credentials
        self._channel = channel(
            address,
            credentials,
            options=[
                ("grpc.max_send_message_length", 64 << 20),
                ("grpc.max_receive_message_length", 64 << 20),
                # a home that restarts is tried again soon, not after gRPC's minutes of backoff
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
            ],
        )
        self._stub = pb_grpc.CQEngineStub(self._channel)

    def _at(self, address: str) -> Client:
        """A client of another node of the ring, presenting the same certificate."""
        return Client(address, self.timeout, self.credentials)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _error(e, self.address, self.credentials) from None

    def subscribe(self, query: str) -> pb.SubscribeReply:
        """Subscribe a query in the query language (README, "Queries"): the reply has its
        id and token, the query as understood (`query`), each alternative with the term
        it is indexed under (`alternatives`) and the words left out (`dropped`). A query
        refused raises ClientError (INVALID_ARGUMENT, naming the character at fault)."""
        return self._call("Subscribe", pb.SubscribeRequest(query=query))

    def subscribe_many(
        self, queries: Iterable[str], per_call: int = MAX_BATCH_QUERIES
    ) -> list[pb.SubscribeReply]:
        """Subscribe queries, `per_call` to a SubscribeBatch call (at most MAX_BATCH_QUERIES):
        per query its reply, in order, whose `code` and `error` say why for one the node
        refused (it has no subscription id then)."""
        if not 0 < per_call <= MAX_BATCH_QUERIES:
            raise ClientError(
                "INVALID_ARGUMENT", f"per_call is {per_call}; 1-{MAX_BATCH_QUERIES} go in a call"
            )
        out: list[pb.SubscribeReply] = []
        batch: list[pb.SubscribeRequest] = []
        for query in queries:
            batch.append(pb.SubscribeRequest(query=query))
            if len(batch) == per_call:
                out += self._call("SubscribeBatch", pb.SubscribeBatchRequest(queries=batch)).results
                batch = []
        if batch:
            out += self._call("SubscribeBatch", pb.SubscribeBatchRequest(queries=batch)).results
        return out

    def unsubscribe(self, subscription_id: int, token: str, home_id: int = 0) -> None:
        """Unsubscribe through this client's node; with the home key (SubscribeReply.home_id),
        through whichever node serves the subscription now if this one does not."""
        request = pb.UnsubscribeRequest(subscription_id=subscription_id, token=token)
        try:
            self._call("Unsubscribe", request)
        except ClientError as e:
            home = self.find_home(home_id) if home_id and e.code == "UNAVAILABLE" else None
            if home is None or home == self.address:
                raise
            with self._at(home) as there:
                there._call("Unsubscribe", request)

    def find_home(self, home_id: int, contacts: Sequence[str] = ()) -> str | None:
        """The node that serves a home key now, as this client's node or a contact finds it by
        lookup; None if none of them answers."""
        for address in dict.fromkeys([self.address, *contacts]):
            try:
                owner, _ = lookup(
                    address, home_id, timeout=min(5.0, self.timeout), credentials=self.credentials
                )
                return owner.address
            except grpc.RpcError:
                continue
        return None

    def publish(self, docno: str, text: str | bytes, title: str = "") -> pb.PublishReply:
        body = text.encode("utf-8") if isinstance(text, str) else text
        return self._call("Publish", pb.PublishRequest(docno=docno, text=body, title=title))

    def publish_many(
        self, docs: Iterable[tuple[str, str | bytes, str]], per_call: int = 1000
    ) -> list[pb.PublishReply]:
        """Publish (docno, text, title) documents, `per_call` to a PublishBatch call: per
        document its reply, whose `accepted` is false (with `code` and `error`) for one
        the node refused. The node publishes them in batches of its own."""
        out: list[pb.PublishReply] = []
        batch: list[pb.PublishRequest] = []
        for docno, text, title in docs:
            batch.append(
                pb.PublishRequest(
                    docno=docno,
                    title=title,
                    text=text.encode("utf-8") if isinstance(text, str) else text,
                )
            )
            if len(batch) == per_call:
                out += self._call("PublishBatch", pb.PublishBatchRequest(documents=batch)).results
                batch = []
        if batch:
            out += self._call("PublishBatch", pb.PublishBatchRequest(documents=batch)).results
        return out

    def stats(self) -> pb.StatsReply:
        return self._call("Stats", pb.StatsRequest())

    def alerts(
        self,
        sub: pb.SubscribeReply | tuple[int, str] | Sequence[pb.SubscribeReply | tuple[int, str]],
        home: str | None = None,
        timeout: float | None = None,
        resume: float = 60.0,
    ) -> Iterator[pb.Alert]:
        """Alerts as they arrive, until the stream ends, the iterator is closed or `timeout`
        s pass. `sub` is a subscription (a SubscribeReply, or its id and token) or several
        of one home node's, streamed together. What has been handed out is acknowledged
        (with the first message ACK_EVERY s after the last acknowledgement, after ACK_ALERTS
        alerts, and when the iterator ends), so the home forgets it; a stream
        that breaks (a dropped connection, the home restarting) is resumed for up to
        `resume` s after the last alert handed out: each alert comes once, in order."""
        subs = [sub] if isinstance(sub, (pb.SubscribeReply, tuple)) else list(sub)
        if not subs:
            raise ClientError("INVALID_ARGUMENT", "no subscription to stream")
        keys = [
            (s.subscription_id, s.token) if isinstance(s, pb.SubscribeReply) else s for s in subs
        ]
        replies = [s for s in subs if isinstance(s, pb.SubscribeReply)]
        home = home or next((s.home for s in replies), None)
        home_id = next((s.home_id for s in replies if s.home_id), 0)  # followed, if it moves
        # told the home (StreamRequest.home_id) only if it is every subscription's: on the
        # home log one node's subscriptions may have several (its key moved with a join)
        one_key = home_id if {s.home_id for s in replies} == {home_id} else 0
        contacts = [home or self.address, *(c for s in replies for c in s.contacts)]
        client = self._at(home) if home and home != self.address else self
        acks = Acknowledger(keys, one_key)
        nexts = acks.nexts
        deadline = time.monotonic() + timeout if timeout else None

        broken: float | None = None  # when the stream last broke, if it has not resumed
        attempts = 0  # to resume it since
        try:
            while True:
                request = stream_request(keys, nexts, home_id=one_key, watermark=True)
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                stream = client._stub.StreamAlerts(request, timeout=left)
                acks.opened()  # its opening acknowledged what was handed out on the last
                try:
                    last_ack, handed = time.monotonic(), 0
                    for batch in stream:
                        broken, attempts = None, 0
                        acks.received(batch)
                        # a message groups alerts by document: each subscription's in order
                        for alert in sorted(unbatched(batch), key=lambda a: a.seq):
                            if alert.seq < nexts[alert.subscription_id]:
                                continue  # sent again on a resumed stream: handed out already
                            nexts[alert.subscription_id] = alert.seq + 1
                            handed += 1
                            yield alert
                        acks.handed()
                        if handed >= ACK_ALERTS or time.monotonic() - last_ack >= ACK_EVERY:
                            try:
                                acks.ack(client)
                            except ClientError:
                                pass  # the home went away: the stream breaks, and resumes
                            last_ack, handed = time.monotonic(), 0
                    return  # the home ended the stream: no subscription is left on it
                except grpc.RpcError as e:
                    code = e.code()
                    if code == grpc.StatusCode.CANCELLED or (
                        deadline is not None and code == grpc.StatusCode.DEADLINE_EXCEEDED
                    ):
                        return
                    if code != grpc.StatusCode.UNAVAILABLE:
                        raise _error(e, client.address, self.credentials) from None
                    broken = broken or time.monotonic()
                    if time.monotonic() - broken > resume:
                        raise _error(e, client.address, self.credentials) from None
                    time.sleep(RESUME_WAITS[min(attempts, len(RESUME_WAITS) - 1)])
                    attempts += 1
                    there = self.find_home(home_id, contacts) if home_id else None
                    if there is not None and there != client.address:  # it moved: follow it
                        try:
                            acks.ack(client)  # what the old home could not take, the new one takes
                        except ClientError:
                            pass
                        if client is not self:
                            client.close()
                        client = self if there == self.address else self._at(there)
                        acks.acked.clear()  # the new home hears every acknowledgement afresh
                finally:
                    stream.cancel()
        finally:
            try:
                acks.ack(client)  # what was handed out is the subscriber's: the home may forget it
            except ClientError:
                pass  # it stays there, and a later stream sends it again
            if client is not self:
                client.close()
