"""The web console: one page that shows a ring and lets an operator try it.

The page (cqengine/live/web/: plain HTML, CSS and JavaScript, no build step, nothing
fetched from elsewhere) draws the ring's nodes on a circle by id with their successor
links, each node's load, up or down, and the ranges short of copies; small charts of
documents, alerts and bytes a second; a box to subscribe to a query and watch its alerts
arrive, and one to publish a text. The server pushes a look at the ring every POLL seconds
and each alert as it arrives, as server-sent events: no page reload, no polling from the
page.

It is served by aiohttp, an asyncio server, so the console's looks at the ring (grpc.aio
calls, every node at once) share its event loop; it reaches the ring with the ring file's
admin certificate. Subscribing and publishing use the Python client in a worker thread, and
a subscription's alerts are read by it (it follows a home that moves and acknowledges what
it handed out) in a thread of their own; the console unsubscribes them as it stops. It
binds 127.0.0.1 unless told otherwise, and beyond loopback only with a token, which every
request must then carry (`?token=`, `Authorization: Bearer`, or the cookie the page gets
with it); without one it answers only requests naming it by a loopback name (no DNS
rebinding), and calls only as JSON from its own page (no cross-site form posts).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import itertools
import json
import logging
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web

from chord.live.tls import Credentials, aio_channel
from chord.proto import chord_pb2
from cqengine.live.client import Client, ClientError
from cqengine.live.ringfile import RingError, RingFile
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.live.console")

WEB = Path(__file__).parent / "web"
POLL = 1.0  # s between two looks at the ring
MAX_SUBSCRIPTIONS = 100  # made from pages; each has a thread reading its alerts
BEHIND = 100  # events a page has not read yet past which it misses looks (never alerts)
COOKIE = "cqengine_console"  # holds the token once a page has shown it: its assets need it
CALL_TIMEOUT = 1.0  # s a node has to answer a look: a node that does not is shown down
OPTIONS = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 1000)]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RingWatch:
    """Looks at every node of the ring file, and every node their tables name, with one
    GetState and one Stats call each, all at once; and turns two looks into rates."""

    def __init__(self, addresses: list[str], credentials: Credentials | None) -> None:
        self.addresses = list(addresses)
        self.credentials = credentials
        self.channels: dict[str, grpc.aio.Channel] = {}
        self.before: dict[str, tuple[float, pb.StatsReply]] = {}

    def _channel(self, address: str) -> grpc.aio.Channel:
        if address not in self.channels:
            self.channels[address] = aio_channel(address, self.credentials, OPTIONS)
        return self.channels[address]

    async def _ask(self, address: str) -> tuple[Any, Any]:
        """The node's state and stats, or (None, None) if it does not answer."""
        ch = self._channel(address)
        state = ch.unary_unary(
            "/chord.Chord/GetState",
            request_serializer=chord_pb2.Empty.SerializeToString,
            response_deserializer=chord_pb2.StateReply.FromString,
        )
        stats = ch.unary_unary(
            "/cqengine.CQEngine/Stats",
            request_serializer=pb.StatsRequest.SerializeToString,
            response_deserializer=pb.StatsReply.FromString,
        )
        try:
            return await asyncio.gather(
                state(chord_pb2.Empty(), timeout=CALL_TIMEOUT),
                stats(pb.StatsRequest(no_digests=True), timeout=CALL_TIMEOUT),
            )
        except grpc.aio.AioRpcError:
            return None, None

    async def look(self) -> dict:
        """The ring now: each node (up or down, its links and load), what the ring is
        short of, and rates since the last look."""
        replies = dict(zip(self.addresses, await asyncio.gather(*map(self._ask, self.addresses))))
        for state, _ in list(replies.values()):
            for info in [state.predecessor, *state.successors] if state else []:
                if info.address and info.address not in self.addresses:
                    self.addresses.append(info.address)  # a node joined: watch it too
        now = time.monotonic()
        up = {a: r for a, r in replies.items() if r[0] is not None}
        nodes = [self._node(a, *replies[a]) for a in self.addresses if a in replies]
        replicas = max((r[1].config.replicas for r in up.values()), default=1)
        want = min(replicas, len(up))
        short = [n["address"] for n in nodes if n["up"] and n["copies"] < want]
        rates = self._rates(now, {a: r[1] for a, r in up.items()})
        return {
            "time": time.time(),
            "nodes": nodes,
            "up": len(up),
            "replicas": replicas,
            "short_of_copies": short,
            "rates": rates,
        }

    @staticmethod
    def _node(address: str, state, stats) -> dict:
        if state is None:
            return {"address": address, "up": False, "id": "", "copies": 0}
        successor = state.successors[0].address if state.successors else ""
        return {
            "address": address,
            "up": True,
            "id": f"{state.node.id:016x}",
            "successor": successor,
            "predecessor": state.predecessor.address,
            "index_entries": stats.index_entries,
            "subscriptions": stats.subscriptions,
            "alerts_waiting": stats.alerts_waiting,
            "copies": stats.copies,
        }

    def _rates(self, now: float, stats: dict[str, pb.StatsReply]) -> dict:
        """Documents, alerts and bytes by kind a second since the last look, over the nodes
        up at both (a node that went down takes its counters with it)."""
        docs = alerts = 0.0
        kinds: Counter[str] = Counter()
        for address, s in stats.items():
            if address not in self.before:
                continue
            then, old = self.before[address]
            dt = max(now - then, 1e-3)
            # (a node restarted between two looks starts its counters again: no negative rates)
            docs += max(0, s.documents_published - old.documents_published) / dt
            alerts += max(0, s.alerts_delivered - old.alerts_delivered) / dt
            was = {c.kind: c.bytes for c in old.ledger}
            for c in s.ledger:
                if not c.kind.endswith(".reply"):
                    kinds[c.kind] += max(0, c.bytes - was.get(c.kind, 0)) / dt
        self.before = {a: (now, s) for a, s in stats.items()}
        return {"documents": docs, "alerts": alerts, "bytes": dict(kinds)}

    async def close(self) -> None:
        await asyncio.gather(*(ch.close() for ch in self.channels.values()))


class Console:
    """The console's server: the page, the ring's looks and the alerts pushed to every
    page open, and the calls the page makes (subscribe, publish)."""

    def __init__(self, ring: RingFile, token: str | None = None) -> None:
        self.ring, self.token = ring, token
        self.credentials = ring.credentials()
        self.watch = RingWatch(ring.addresses(), self.credentials)
        self.listeners: set[asyncio.Queue] = set()
        self.last: dict | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hosts: set[str] = set()  # what a request's Host may say (DNS rebinding)
        self.stopping = threading.Event()  # read by the alert readers' threads too
        # subscriptions made here, with the client reading each one's alerts: each is
        # unsubscribed and its client closed when the console stops
        self.streams: dict[int, tuple[pb.SubscribeReply, Client]] = {}
        self.docnos = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._page)
        app.router.add_static("/static/", WEB)
        app.router.add_get("/events", self._events)
        app.router.add_post("/api/subscribe", self._subscribe)
        app.router.add_post("/api/publish", self._publish)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        """Every request: to this console by name (no DNS rebinding), with its token if it
        has one (in the query, a bearer header, or the cookie the page got with it), and a
        call only as JSON from its own page (no cross-site form can post JSON)."""
        if self.hosts and request.host not in self.hosts:
            return web.Response(status=421, text="421: not this console's address\n")
        given = None
        if self.token is not None:
            header = request.headers.get("Authorization", "")
            given = request.query.get("token") or request.cookies.get(COOKIE, "")
            if header.startswith("Bearer "):
                given = header[len("Bearer ") :]
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return web.Response(status=401, text="401: this console needs its token\n")
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if request.content_type != "application/json" or (
                origin is not None and origin != f"{request.scheme}://{request.host}"
            ):
                return web.Response(status=403, text="403: calls come from the console's page\n")
        response = await handler(request)
        if given is not None and request.path == "/":
            response.set_cookie(COOKIE, given, httponly=True, samesite="Strict")
        return response

    async def _page(self, request: web.Request) -> web.Response:
        return web.FileResponse(WEB / "index.html")

    async def watching(self) -> None:
        """Look at the ring every POLL s and tell every page."""
        while True:
            started = time.monotonic()
            try:
                self.last = await self.watch.look()
                self._tell("ring", self.last)
            except Exception:  # the console outlives a bad look
                log.exception("looking at the ring failed")
            await asyncio.sleep(max(0.0, POLL - (time.monotonic() - started)))

    def _tell(self, event: str, data: Any) -> None:
        for queue in self.listeners:
            if event == "ring" and queue.qsize() > BEHIND:
                continue  # a page that reads slowly misses looks; never an alert
            queue.put_nowait((event, data))

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        queue: asyncio.Queue = asyncio.Queue()
        self.listeners.add(queue)
        try:
            if self.last is not None:
                queue.put_nowait(("ring", self.last))
            while True:
                event, data = await queue.get()
                if event is None:
                    break  # the console stops
                await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.listeners.discard(queue)
        return response

    def _a_node(self) -> str:
        """A node that answered the last look (the ring file's first, before any)."""
        nodes = self.last["nodes"] if self.last else []
        return next((n["address"] for n in nodes if n["up"]), self.ring.addresses()[0])

    async def _subscribe(self, request: web.Request) -> web.Response:
        query = str((await request.json()).get("query", ""))
        if len(self.streams) >= MAX_SUBSCRIPTIONS:
            error = f"this console holds {MAX_SUBSCRIPTIONS} subscriptions already"
            return web.json_response({"error": error}, status=429)
        try:
            reply = await asyncio.to_thread(self._call, lambda c: c.subscribe(query))
        except ClientError as e:
            return web.json_response({"error": str(e)}, status=400)
        if self.stopping.is_set():  # it stopped meanwhile: leave nothing behind on the ring
            await asyncio.to_thread(self._unsubscribe, reply)
            return web.json_response({"error": "the console is stopping"}, status=503)
        # (on the event loop, as _stopped: nothing runs between the check and this)
        client = Client(reply.home, credentials=self.credentials)
        self.streams[reply.subscription_id] = (reply, client)
        threading.Thread(target=self._stream, args=(reply, client), daemon=True).start()
        return web.json_response(
            {
                "subscription_id": f"{reply.subscription_id:016x}",
                "query": reply.query,
                "home": reply.home,
                "alternatives": [
                    {"query": a.query, "index_term": a.index_term} for a in reply.alternatives
                ],
                "dropped": list(reply.dropped),
            }
        )

    async def _publish(self, request: web.Request) -> web.Response:
        body = await request.json()
        text, title = str(body.get("text", "")), str(body.get("title", ""))
        docno = str(body.get("docno") or f"console-{int(time.time())}-{next(self.docnos)}")
        try:
            reply = await asyncio.to_thread(self._call, lambda c: c.publish(docno, text, title))
        except ClientError as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"docno": docno, "accepted": reply.accepted, "terms": reply.terms})

    def _call(self, call):
        with Client(self._a_node(), timeout=10.0, credentials=self.credentials) as client:
            return call(client)

    def _stream(self, sub: pb.SubscribeReply, client: Client) -> None:
        """A subscription's alerts, to every page, as they arrive (a thread of its own)."""
        try:
            for alert in client.alerts(sub, resume=3600.0):
                if self.stopping.is_set():
                    return
                data = {
                    "subscription_id": f"{alert.subscription_id:016x}",
                    "seq": alert.seq,
                    "docno": alert.docno,
                    "title": alert.title,
                    "snippet": alert.snippet,
                }
                self.loop.call_soon_threadsafe(self._tell, "alert", data)
        except Exception as e:  # closed as the console stops, or the ring is gone
            if not self.stopping.is_set():
                log.warning("alerts of %016x: %s", sub.subscription_id, e)
        finally:
            client.close()

    def _unsubscribe(self, sub: pb.SubscribeReply) -> None:
        try:
            with Client(self._a_node(), timeout=5.0, credentials=self.credentials) as client:
                client.unsubscribe(sub.subscription_id, sub.token, sub.home_id)
        except ClientError as e:
            log.warning("could not unsubscribe %016x: %s", sub.subscription_id, e)

    async def _stopped(self) -> None:
        """Pages told, alert readers closed, subscriptions made here unsubscribed."""
        self.stopping.set()
        for queue in self.listeners:
            queue.put_nowait((None, None))
        streams = list(self.streams.values())
        for _, client in streams:
            client.close()
        await asyncio.gather(*(asyncio.to_thread(self._unsubscribe, s) for s, _ in streams))

    async def serve(self, host: str, port: int, ready=print) -> None:
        """Serve until SIGINT or SIGTERM."""
        self.loop = asyncio.get_running_loop()
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as e:
            await runner.cleanup()
            raise RingError(
                f"cannot serve the console on {host}:{port}: {e.strerror or e}"
            ) from None
        if self.token is None:  # loopback: only this machine's names for it reach it
            self.hosts = {f"{h}:{port}" for h in (host, "127.0.0.1", "localhost", "[::1]")}
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.loop.add_signal_handler(sig, stop.set)
        watching = asyncio.create_task(self.watching())
        where = f"http://{host}:{port}/" + (f"?token={self.token}" if self.token else "")
        ready(f"console of {len(self.ring.nodes)} nodes at {where}", flush=True)
        try:
            await stop.wait()
        finally:
            watching.cancel()
            await self._stopped()
            await runner.cleanup()
            await self.watch.close()
