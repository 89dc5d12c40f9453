"""The commands of a ring's client: `subscribe`, `publish`, `stats`, and `analyze` (the
terms the engine makes of a text, no ring needed)."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from itertools import islice
from pathlib import Path

from chord.ids import hash_id
from chord.tls import TlsError
from cqengine.cli.options import CliError, count, node_option
from cqengine.live.client import Client, ClientError, find_credentials
from cqengine.live.ring import any_node
from cqengine.live.ringfile import RingFile

PUBLISH_CALL = 256  # documents `publish` sends per PublishBatch call


def add_parsers(sub) -> None:
    s = sub.add_parser("subscribe", help="register a query and print its alerts as they arrive")
    s.add_argument("query")
    s.add_argument(
        "--count", type=count, help="exit after this many alerts (default: until interrupted)"
    )
    node_option(s)

    p = sub.add_parser("publish", help="publish TREC files (plain or .gz), or one text")
    p.add_argument("files", nargs="*", type=Path, metavar="FILE")
    p.add_argument("--text", help="publish this text instead of files")
    p.add_argument("--docno", help="docno for --text (default: derived from the text)")
    p.add_argument("--title", default="", help="title for --text")
    node_option(p)

    st = sub.add_parser("stats", help="a node's message ledger and counters")
    st.add_argument("--all", action="store_true", help="sum over every node of the ring file")
    node_option(st)

    a = sub.add_parser("analyze", help="print the terms the engine makes of a text, one a line")
    a.add_argument("text")


def connect(args: argparse.Namespace, address: str | None = None, timeout: float = 30.0) -> Client:
    """A client of `address`, else the node the command names (--node, or a node of the ring
    file that answers), presenting the certificate it finds (find_credentials)."""
    address = address or args.node
    try:
        credentials = find_credentials(address, args.ring_file, args.tls_dir, args.tls_name)
    except TlsError as e:
        raise CliError(str(e)) from None
    return Client(address or any_node(args.ring_file, credentials), timeout, credentials)


def cmd_subscribe(args: argparse.Namespace) -> int:
    with connect(args) as client:
        sub = client.subscribe(args.query)
        print(
            f"subscription {sub.subscription_id:016x}: terms {' '.join(sub.terms)}; indexed under "
            f"{sub.index_term!r}; alerts from {sub.home}",
            file=sys.stderr,
            flush=True,
        )
        seen = 0
        try:
            if args.count == 0:
                return 0
            for alert in client.alerts(sub):
                print(f"{alert.docno}\t{alert.title}", flush=True)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            try:
                client.unsubscribe(sub.subscription_id, sub.token, sub.home_id)
            except ClientError:
                pass  # the home node is gone; so is the subscription
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from cqengine.progress import Progress
    from cqengine.text.trec import iter_trec

    if bool(args.files) == bool(args.text):
        raise CliError("give FILEs to publish, or --text, not both or neither")
    with connect(args) as client:
        if args.text is not None:
            docno = args.docno or f"text-{hash_id(args.text):016x}"  # same text, same docno
            reply = client.publish(docno, args.text, args.title)
            print(f"published {docno}: {reply.terms} terms")
            return 0
        for f in args.files:
            if not f.is_file():
                raise CliError(f"{f}: no such file")
        total = sum(f.stat().st_size for f in args.files)
        progress, n, terms, start, done_bytes = (
            Progress("publishing", total),
            0,
            0,
            time.monotonic(),
            0,
        )
        refused = []
        for f in args.files:
            docs = iter_trec(f)
            while chunk := list(islice(docs, PUBLISH_CALL)):  # one PublishBatch call each
                replies = client.publish_many(
                    [(d.docno, d.text, d.title) for d in chunk], per_call=PUBLISH_CALL
                )
                for doc, reply in zip(chunk, replies):
                    if reply.accepted:
                        n, terms = n + 1, terms + reply.terms
                    else:
                        refused.append(f"{f}: {doc.docno}: {reply.error}")
                progress.update(n + len(refused), done_bytes)
            done_bytes += f.stat().st_size  # progress moves a file at a time
            progress.update(n + len(refused), done_bytes)
        progress.close()
        elapsed = time.monotonic() - start
        for line in refused:
            print(f"cqengine: refused {line}", file=sys.stderr)
        print(
            f"published {n} documents ({terms / max(n, 1):.0f} terms each) in {elapsed:.1f}s "
            f"({n / max(elapsed, 1e-9):.0f} docs/s)"
            + (f"; {len(refused)} refused" if refused else "")
        )
    return 1 if refused else 0


def cmd_stats(args: argparse.Namespace) -> int:
    addresses = [None]  # --node, or any node of the ring file
    if args.all:
        addresses = RingFile.load(args.ring_file).addresses()
    replies = []
    for a in addresses:
        with connect(args, a, timeout=5) as client:
            try:
                replies.append(client.stats())
            except ClientError:
                if not args.all:
                    raise
    print_stats(replies)
    return 0


def print_stats(replies) -> None:
    ledger: dict[str, list[int]] = {}
    fields = (
        "index_entries",
        "primary_entries",
        "replica_entries",
        "subscriptions",
        "replica_homes",
        "held_documents",
        "documents_published",
        "candidates",
        "matches",
        "alerts_delivered",
        "alerts_retried",
        "alerts_dropped",
        "repairs",
        "batches_in_flight",
        "background",
    )
    sums = dict.fromkeys(fields, 0)
    for r in replies:
        for c in r.ledger:
            ledger.setdefault(c.kind, [0, 0])
            ledger[c.kind][0] += c.messages
            ledger[c.kind][1] += c.bytes
        for f in fields:
            sums[f] += getattr(r, f)
    cfg = replies[0].config
    print(f"nodes: {', '.join(r.node for r in replies)}")
    print(
        f"engine: strategy {cfg.strategy}, resolution {cfg.resolution}, piggyback {cfg.piggyback}"
        f", replicas {cfg.replicas}"
    )
    for f in fields:
        print(f"{f.replace('_', ' '):20} {sums[f]}")
    why = Counter()
    for r in replies:
        why.update(dict(r.dropped_by))
    for reason, n in sorted(why.items()):
        print(f"  {reason.replace('_', ' '):18} {n}")
    docs = sums["documents_published"]
    if docs:
        print(f"{'candidates/doc':20} {sums['candidates'] / docs:.2f}")
    print(f"\n{'message kind':24} {'messages':>10} {'bytes':>14}")
    for kind, (m, b) in sorted(ledger.items()):
        print(f"{kind:24} {m:>10} {b:>14}")


def cmd_analyze(args: argparse.Namespace) -> int:
    from cqengine.text.analysis import analyze

    for term in analyze(args.text):
        print(term)
    return 0


COMMANDS = {
    "subscribe": cmd_subscribe,
    "publish": cmd_publish,
    "stats": cmd_stats,
    "analyze": cmd_analyze,
}
