"""A node's Prometheus endpoint: its Stats reply in Prometheus' text format.

Every value is read from the reply the `Stats` RPC gives (cqengine.core.home.stats), at the
moment of the scrape, so the endpoint and `cqengine stats` never disagree and nothing is
counted twice. It is served by aiohttp on the node's own event loop (a scrape reads the
engine's state between two of its steps, never during one), over plain HTTP, bound to
127.0.0.1 unless the operator says otherwise: it tells what the ring holds, not who.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from chord.live.gate import REFUSALS
from chord.live.meter import Meter, charged
from chord.live.server import StartupError
from cqengine.core.home.stats import DROP_REASONS
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.live.metrics")

PREFIX = "cqengine"

# StatsReply field -> (metric name, help): counters, each `cqengine_<name>_total`
COUNTERS = {
    "documents_published": ("documents_published", "documents this node announced as DN"),
    "candidates": ("candidates", "queries this node presented to resolution as QN"),
    "matches": ("matches", "candidates confirmed: alerts made"),
    "header_bytes": ("header_bytes", "announcement bytes of term-presence headers sent"),
    "announcements_filtered": (
        "announcements_filtered",
        "announcements not sent: the hop's aggregate filter showed no list there",
    ),
    "filter_waits": (
        "filter_waits",
        "entries under new keys acknowledged only once older filters expired",
    ),
    "alerts_delivered": ("alerts_delivered", "alerts put in mailboxes served here"),
    "alerts_repeated": ("alerts_repeated", "matches of a document a mailbox had already"),
    "alerts_retried": ("alerts_retried", "alerts sent again to a home that did not answer"),
    "reindexed": ("reindexed", "queries this node moved to a new indexing term"),
    "repairs": ("repairs", "records reconciliation brought up to date, either side"),
    "messages_refused": ("messages_refused", "messages from nodes refused as malformed"),
    "alerts_held": ("alerts_held", "alerts held by a home whose log had no majority"),
    "documents_sent_again": (
        "documents_sent_again",
        "documents announced again as DN once a partition healed",
    ),
    "documents_unkept": (
        "documents_unkept",
        "documents announced while nodes were lost, let go before they were found",
    ),
}
# StatsReply field -> (metric name, help): gauges
GAUGES = {
    "index_entries": ("index_entries", "query entries in this node's inverted lists"),
    "primary_entries": ("primary_entries", "of those, under keys this node owns"),
    "replica_entries": ("replica_entries", "of those, copies held for the nodes before it"),
    "subscriptions": ("subscriptions", "subscriptions homed here"),
    "replica_homes": ("replica_homes", "subscriptions held as a replica of another home"),
    "alerts_waiting": ("alerts_waiting", "alerts in mailboxes served here, not acknowledged"),
    "held_documents": ("held_documents", "documents held for a DN that may fail"),
    "held_batches": ("held_batches", "batches of those documents"),
    "batches_in_flight": ("batches_in_flight", "batches announced here, not through yet"),
    "background": ("background_operations", "operations running or waiting for a slot"),
    "copies": ("range_copies", "copies of this node's range its last reconciliation found"),
    "synopsis_size": ("synopsis_terms", "terms in this node's synopsis"),
    "logs_led": ("logs_led", "home keys whose logs this node leads"),
    "logs_in_minority": ("logs_in_minority", "of those, led without a majority answering"),
    "log_entries": ("log_entries", "entries of the home keys' logs kept here"),
    "ring_floor": (
        "ring_protocol_floor",
        "the oldest protocol a ring member speaks (chord.protocol.floor)",
    ),
}


def families(s: pb.StatsReply) -> Iterator[Metric]:
    """The reply's values as Prometheus metric families."""
    for field, (name, doc) in COUNTERS.items():
        yield _counter(name, doc, getattr(s, field))
    yield _by("alerts_dropped", "alerts lost, by why", "reason", DROP_REASONS, dict(s.dropped_by))
    yield _by(
        "calls_refused", "calls the gate refused, by why", "reason", REFUSALS, s.calls_refused
    )
    kinds = {c.kind: c for c in s.ledger}
    sent = CounterMetricFamily(f"{PREFIX}_messages_sent", "messages sent, by kind", labels=["kind"])
    sent_bytes = CounterMetricFamily(
        f"{PREFIX}_sent_bytes", "bytes of messages sent, by kind", labels=["kind"]
    )
    for kind in sorted(kinds):
        sent.add_metric([kind], kinds[kind].messages)
        sent_bytes.add_metric([kind], kinds[kind].bytes)
    yield sent
    yield sent_bytes
    cpu = CounterMetricFamily(
        f"{PREFIX}_cpu_seconds", "the process's CPU time, by what it went to", labels=["stage"]
    )
    for stage, seconds in sorted(s.cpu_seconds.items()):
        cpu.add_metric([stage], seconds)
    yield cpu
    for field, (name, doc) in GAUGES.items():
        yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=getattr(s, field))
    yield GaugeMetricFamily(
        f"{PREFIX}_storage_full",
        "1 while the data directory can keep nothing (calls that change state refused)",
        value=1 if s.storage_full else 0,
    )
    yield _histogram(s.alert_latency)
    info = GaugeMetricFamily(
        f"{PREFIX}_build_info",
        "1, labelled with the node's release and protocols",
        labels=["software", "protocol", "oldest_protocol"],
    )
    info.add_metric([s.software, str(s.protocol), str(s.oldest_protocol)], 1)
    yield info


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", doc, value=value)


def _by(name: str, doc: str, label: str, known, values) -> CounterMetricFamily:
    """A counter by a label, every known value of it present (0 until it happens), so that
    a rate over it starts at the first scrape."""
    family = CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=[label])
    for key in sorted(set(known) | set(values)):
        family.add_metric([key], values.get(key, 0))
    return family


def _histogram(h: pb.Histogram) -> HistogramMetricFamily:
    """Prometheus counts buckets cumulatively: each bound with everything at or below it."""
    buckets, total = [], 0
    for bound, count in zip([*h.bounds, float("inf")], h.counts):
        total += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
    return HistogramMetricFamily(
        f"{PREFIX}_alert_latency_seconds",
        "from a document's acceptance at its DN to its alerts in mailboxes here, per alert",
        buckets=buckets or [("+Inf", 0)],
        sum_value=h.sum,
    )


class _Collected:
    """One scrape's metrics, as prometheus_client's exposition reads a registry's."""

    def __init__(self, reply: pb.StatsReply) -> None:
        self.reply = reply

    def collect(self) -> Iterator[Metric]:
        return families(self.reply)


class MetricsServer:
    """`/metrics` over HTTP on the node's event loop. Until the node is built (it takes its
    state back from disk first), a scrape is answered 503: Prometheus counts the target
    down rather than reading zeros."""

    def __init__(self, host: str, port: int, stats: Callable[[], pb.StatsReply | None]) -> None:
        self.host, self.port, self.stats = host, port, stats
        self.runner: web.AppRunner | None = None
        self.meter: Meter | None = None  # the node's, once it is built: charged each scrape

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/", self._index)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        try:
            await web.TCPSite(self.runner, self.host, self.port).start()
        except OSError as e:
            await self.stop()
            raise StartupError(
                f"cannot serve metrics on {self.host}:{self.port}: {e.strerror or e}"
            ) from None

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = charged(self.meter, "metrics", self._render)
        if body is None:
            return web.Response(status=503, text="the node is not serving yet\n")
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _render(self) -> bytes | None:
        reply = self.stats()
        return None if reply is None else generate_latest(_Collected(reply))

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(text="cqengine node: metrics at /metrics\n")


def scrape_config(targets: list[str], job: str = "cqengine") -> str:
    """Prometheus file_sd JSON for these metrics endpoints (host:port)."""
    return json.dumps([{"targets": targets, "labels": {"job": job}}], indent=2) + "\n"
