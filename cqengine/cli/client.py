"""The commands of a ring's client: `subscribe` (one query, or a file of them), `publish`,
`stats`, and `analyze` (the terms the engine makes of a text, no ring needed)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from itertools import islice
from pathlib import Path

from chord.live.tls import TlsError
from chord.protocol.ids import hash_id
from cqengine.cli.options import CliError, count, defaults_of, node_option, positive
from cqengine.live.client import Client, ClientError, find_credentials
from cqengine.live.costs import cost_by_stage
from cqengine.live.ring.commands import any_node
from cqengine.live.ringfile import RingFile

PUBLISH_CALL = 256  # documents `publish` sends per PublishBatch call
QUERY_LANGUAGE = """queries:
  hurricane levee        both words (AND is the default)
  hurricane OR typhoon   either (OR in capitals; | is the same)
  levee -flood           levee, and not flood (NOT flood is the same)
  "the levee held"       a phrase: its words' terms in a row in the document, stop
                         words left out (this is the phrase levee held)
  (storm OR hurricane) "levee breach" -drill
                         grouping; NOT binds tighter than AND, AND than OR
Words are analyzed as documents are (lowercased, stop words dropped, stemmed); the
reply names what was dropped. A query matches a document when any alternative of its
expansion does; a subscriber gets one alert per document however many match. Refused,
with the character at fault: unbalanced parentheses or quotes, an operator with nothing
on one side, an alternative with nothing but negated words (-a, a OR -b), more than
--max-alternatives alternatives (a ring setting, default 32) or more than 64 terms."""


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "subscribe",
        help="register a query and print its alerts as they arrive; or, with --file, many "
        "queries, their ids and tokens written to --out",
        epilog=QUERY_LANGUAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("query", nargs="?", help="the query, in the language below (or --file)")
    s.add_argument(
        "--count", type=count, help="exit after this many alerts (default: until interrupted)"
    )
    s.add_argument(
        "--file",
        type=Path,
        metavar="QUERIES",
        help="subscribe every query of this file, one a line (blank lines and lines starting "
        "with # skipped), in SubscribeBatch calls, and print no alerts: the subscriptions "
        "stay until unsubscribed",
    )
    s.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="with --file: a new file (never one that exists) to write each query's result "
        "to as it comes, a JSON object a line: query, subscription_id (16 hex digits), token, "
        "home, home_id, terms, index_term, normalized (the query analyzed), alternatives "
        "(each [alternative, its index term]), dropped; or, refused, query, code and error",
    )
    s.add_argument(
        "--per-call",
        type=positive,
        metavar="N",
        default=defaults_of(Client.subscribe_many)["per_call"],
        help="with --file: queries per SubscribeBatch call (default %(default)s, the most "
        "a call takes)",
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
    if args.file is not None:
        return subscribe_file(args)
    if args.query is None:
        raise CliError("give a QUERY to subscribe, or --file QUERIES")
    if args.out is not None:
        raise CliError("--out goes with --file")
    with connect(args) as client:
        sub = client.subscribe(args.query)
        print(describe(sub), file=sys.stderr, flush=True)
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


def describe(sub) -> str:
    """What a subscription's reply says: its terms and index term, or for a query of the
    language, as the engine understood it, each alternative with its index term."""
    alternatives = list(sub.alternatives)
    plain = [a.query for a in alternatives] in ([], [" ".join(sorted(sub.terms))])
    if plain:
        what = f"terms {' '.join(sub.terms)}; indexed under {sub.index_term!r}"
    else:
        what = f"{sub.query}; alternatives " + "; ".join(
            f"{a.query} under {a.index_term!r}" for a in alternatives
        )
    dropped = f"; left out: {' '.join(sub.dropped)}" if sub.dropped else ""
    return f"subscription {sub.subscription_id:016x}: {what}{dropped}; alerts from {sub.home}"


def read_queries(path: Path) -> list[str]:
    """The queries of a file, one a line, but blank lines and those starting with #."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"{path}: cannot read it: {e}") from None
    return [q for q in (line.strip() for line in lines) if q and not q.startswith("#")]


def result_line(query: str, r) -> str:
    """A query's result as the --out file has it."""
    if r.code:
        return json.dumps({"query": query, "code": r.code, "error": r.error})
    return json.dumps(
        {
            "query": query,
            "subscription_id": f"{r.subscription_id:016x}",
            "token": r.token,
            "home": r.home,
            "home_id": f"{r.home_id:016x}",
            "terms": list(r.terms),
            "index_term": r.index_term,
            "normalized": r.query,
            "alternatives": [[a.query, a.index_term] for a in r.alternatives],
            "dropped": list(r.dropped),
        }
    )


def subscribe_file(args: argparse.Namespace) -> int:
    """Subscribe a file's queries, a SubscribeBatch call at a time, each call's results
    written to the --out file before the next is made: an interrupted run keeps the ids
    and tokens of what it placed."""
    if args.query is not None or args.count is not None:
        raise CliError("--file subscribes the file's queries: give no QUERY nor --count")
    if args.out is None:
        raise CliError("--file needs --out FILE, where the subscriptions' ids and tokens go")
    queries = read_queries(args.file)
    if not queries:
        raise CliError(f"{args.file}: no queries in it")
    try:  # its tokens are secrets: the owner's alone; and never over a file that exists
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise CliError(
            f"{args.out} exists: it may hold the tokens of subscriptions placed before; "
            "name a new file"
        ) from None
    except OSError as e:
        raise CliError(f"cannot write {args.out}: {e.strerror}") from None
    total, done, refused, start = len(queries), 0, 0, time.monotonic()
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out, connect(args) as client:
            while done < total:
                chunk = queries[done : done + args.per_call]
                results = client.subscribe_many(chunk, per_call=len(chunk))
                out.writelines(result_line(q, r) + "\n" for q, r in zip(chunk, results))
                out.flush()
                done += len(chunk)
                refused += sum(bool(r.code) for r in results)
                print(
                    f"subscribed {done:,} of {total:,}"
                    + (f" ({refused:,} refused)" if refused else ""),
                    file=sys.stderr,
                    flush=True,
                )
    except BaseException:
        if not done:  # nothing placed: no empty file left to refuse the next run
            args.out.unlink(missing_ok=True)
        raise
    elapsed = max(time.monotonic() - start, 1e-9)
    print(
        f"subscribed {total - refused:,} queries in {elapsed:.1f}s ({total / elapsed:,.0f}/s); "
        f"their ids and tokens are in {args.out}"
        + (f"; {refused:,} refused, each with why there" if refused else ""),
        file=sys.stderr,
    )
    return 1 if refused else 0


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
        "alerts_repeated",
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
    releases = Counter(
        f"cqengine {r.software or '(a release before versions)'}, protocol {r.protocol or 1}"
        for r in replies
    )
    print("releases: " + "; ".join(f"{n} x {what}" for what, n in sorted(releases.items())))
    floor = min(r.ring_floor or 1 for r in replies)
    print(f"ring floor: protocol {floor} (the oldest a member speaks; newer features wait)")
    print(
        f"engine: strategy {cfg.strategy}, resolution {cfg.resolution}, piggyback {cfg.piggyback}"
        f", header terms {cfg.header_terms}, filter lease {cfg.filter_lease:g} s"
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
    refused = Counter()
    for r in replies:
        refused.update(dict(r.calls_refused))
    if refused:
        print(f"{'calls refused':20} {sum(refused.values())}")
        for reason, n in sorted(refused.items()):
            print(f"  {reason.replace('_', ' '):18} {n}")
    for r in replies:
        if r.storage_full:
            print(f"data directory full at {r.node}: {r.storage_full}")
    print_latency(replies)
    print(f"\n{'message kind':24} {'messages':>10} {'bytes':>14}")
    for kind, (m, b) in sorted(ledger.items()):
        print(f"{kind:24} {m:>10} {b:>14}")
    print_costs(replies)


def print_latency(replies) -> None:
    """Publish to alert, from the homes' histograms summed: the bucket each quantile falls
    in (a histogram knows no finer)."""
    bounds = next((list(r.alert_latency.bounds) for r in replies if r.alert_latency.counts), None)
    if bounds is None:
        return
    counts = [0] * (len(bounds) + 1)
    for r in replies:
        if list(r.alert_latency.bounds) == bounds:
            counts = [a + b for a, b in zip(counts, r.alert_latency.counts)]
    total = sum(counts)
    if not total:
        return

    def at_most(q: float) -> str:
        seen = 0
        for bound, n in zip([*bounds, None], counts):
            seen += n
            if seen >= q * total:
                return f"<= {bound:g} s" if bound is not None else f"> {bounds[-1]:g} s"
        return "?"

    print(f"{'alert latency':20} p50 {at_most(0.5)}, p99 {at_most(0.99)} ({total} alerts)")


def print_costs(replies) -> None:
    """The nodes' CPU time since they began, by stage of a document's path (the cost
    model: cqengine/live/costs.py), with each stage's share."""
    cpu: Counter = Counter()
    for r in replies:
        cpu.update(dict(r.cpu_seconds))
    total = sum(cpu.values())
    if not total:
        return
    print(f"\n{'CPU by stage':36} {'seconds':>10} {'share':>7}")
    for stage, seconds in cost_by_stage(cpu).items():
        print(f"{stage:36} {seconds:>10.2f} {seconds / total:>7.1%}")


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
