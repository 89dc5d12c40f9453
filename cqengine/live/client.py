"""`cqengine.live.client.Client`: the Python client of a ring (any node accepts any call).

    with Client("127.0.0.1:7000") as c:
        sub = c.subscribe("hurricane levee")
        c.publish("DOC-1", "The levee held as the hurricane passed.")
        c.publish_many([("DOC-2", "More rain on the levee.", ""), ("DOC-3", "Calm.", "")])
        for alert in c.alerts(sub):
            print(alert.docno)

The node a client subscribes through is the subscription's home: its alerts stream from
there (`alerts` connects to the home node by itself; one stream may carry many of a home's
subscriptions).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import grpc

from cqengine.proto import cqengine_pb2 as pb
from cqengine.proto import cqengine_pb2_grpc as pb_grpc


class ClientError(Exception):
    """The ring refused a call, or could not be reached; `code` is the gRPC status name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error(e: grpc.RpcError, address: str) -> ClientError:
    code = e.code().name
    if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return ClientError(code, f"node {address} does not answer ({code.lower()})")
    return ClientError(code, e.details() or code)


def unbatched(batch: pb.AlertBatch) -> Iterator[pb.Alert]:
    """The alerts of a batch, one by one."""
    n = len(batch.docnos)
    titles, snippets = batch.titles or [""] * n, batch.snippets or [""] * n
    counts = batch.counts or [len(batch.subscription_ids)]
    subs, start = batch.subscription_ids, 0
    for docno, title, snippet, c in zip(batch.docnos, titles, snippets, counts):
        for sub_id in subs[start : start + c]:
            yield pb.Alert(subscription_id=sub_id, docno=docno, title=title, snippet=snippet)
        start += c


class Client:
    def __init__(self, address: str, timeout: float = 30.0) -> None:
        self.address, self.timeout = address, timeout
        self._channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_send_message_length", 64 << 20),
                ("grpc.max_receive_message_length", 64 << 20),
            ],
        )
        self._stub = pb_grpc.CQEngineStub(self._channel)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _error(e, self.address) from None

    def subscribe(self, query: str) -> pb.SubscribeReply:
        return self._call("Subscribe", pb.SubscribeRequest(query=query))

    def unsubscribe(self, subscription_id: int, token: str) -> None:
        self._call(
            "Unsubscribe", pb.UnsubscribeRequest(subscription_id=subscription_id, token=token)
        )

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
    ) -> Iterator[pb.Alert]:
        """Alerts as they arrive, until the stream ends, the iterator is closed or `timeout`
        s pass. `sub` is a subscription (a SubscribeReply, or its id and token) or several
        of one home node's, streamed together."""
        subs = [sub] if isinstance(sub, (pb.SubscribeReply, tuple)) else list(sub)
        if not subs:
            raise ClientError("INVALID_ARGUMENT", "no subscription to stream")
        keys = [
            (s.subscription_id, s.token) if isinstance(s, pb.SubscribeReply) else s for s in subs
        ]
        home = home or next((s.home for s in subs if isinstance(s, pb.SubscribeReply)), None)
        client = Client(home) if home and home != self.address else self
        (first_id, first_token), *more = keys
        request = pb.StreamRequest(
            subscription_id=first_id,
            token=first_token,
            subscriptions=[pb.SubscriptionKey(subscription_id=i, token=t) for i, t in more],
        )
        stream = client._stub.StreamAlerts(request, timeout=timeout)
        try:
            for batch in stream:
                yield from unbatched(batch)
        except grpc.RpcError as e:
            ended = {grpc.StatusCode.CANCELLED} | (
                {grpc.StatusCode.DEADLINE_EXCEEDED} if timeout else set()
            )
            if e.code() not in ended:
                raise _error(e, client.address) from None
        finally:
            stream.cancel()
            if client is not self:
                client.close()
