"""cqengine: continuous keyword queries over a Chord ring.

Every failure the user can cause ends in one clear line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from itertools import islice
from pathlib import Path

# gRPC's C core logs every failed TLS handshake; the command line says why in one line
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from chord.ids import hash_id, parse_id
from chord.live import Limits, StartupError, Timing
from chord.tls import TlsError
from cqengine.core.indexing import STRATEGIES
from cqengine.core.settings import REPLICAS, RESOLUTIONS, Settings, SettingsError
from cqengine.live.client import Client, ClientError, find_credentials
from cqengine.live.ring import DATA, any_node, ring_down, ring_status, ring_up
from cqengine.live.ringfile import DEFAULT_RING_FILE, RingError, RingFile
from cqengine.text.termfiles import TermFileError, load_stats, load_terms
from cqengine.text.trec import TrecError

PUBLISH_CALL = 256  # documents `publish` sends per PublishBatch call


class CliError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """Usage mistakes get the same one-line error as everything else, plus where to look."""

    def error(self, message: str):
        self.exit(2, f"cqengine: error: {message} (see `{self.prog} --help`)\n")


# ---- argument types -----------------------------------------------------------------------


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def positive(text: str) -> int:
    value = count(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def successor_count(text: str) -> int:
    from chord.checks import MAX_SUCCESSORS

    value = positive(text)
    if value > MAX_SUCCESSORS:  # peers refuse a longer list in a Leave
        raise argparse.ArgumentTypeError(f"{text!r} is more than {MAX_SUCCESSORS}")
    return value


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"port {value} is outside 1-65535")
    return value


def node_id(text: str) -> int:
    try:
        return parse_id(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    port_number(port)
    return text


# ---- option groups ------------------------------------------------------------------------


def timing_options(p: argparse.ArgumentParser) -> None:
    d = Timing()
    g = p.add_argument_group("ring maintenance (seconds; each period is randomized by +-50%)")
    g.add_argument("--stabilize", type=positive_float, default=d.stabilize, metavar="S")
    g.add_argument("--fix-fingers", type=positive_float, default=d.fix_fingers, metavar="S")
    g.add_argument(
        "--check-predecessor", type=positive_float, default=d.check_predecessor, metavar="S"
    )
    g.add_argument(
        "--rpc-timeout",
        type=positive_float,
        default=d.rpc_timeout,
        metavar="S",
        help="a peer silent this long to the ring's calls counts as failed (default "
        "%(default)s); one that answered within --call-timeout is waited for longer",
    )
    g.add_argument(
        "--call-timeout",
        type=positive_float,
        default=d.call_timeout,
        metavar="S",
        help="how long the engine's calls (announcements, resolution, alerts) wait for a "
        "busy peer, and a DN for a batch's last report (default %(default)s)",
    )
    g.add_argument(
        "--successors",
        type=successor_count,
        default=8,
        metavar="R",
        help="successor list length r (default %(default)s)",
    )


def timing_from(args: argparse.Namespace) -> Timing:
    return Timing(
        stabilize=args.stabilize,
        fix_fingers=args.fix_fingers,
        check_predecessor=args.check_predecessor,
        rpc_timeout=args.rpc_timeout,
        call_timeout=args.call_timeout,
    )


ENGINE_FLAGS = {  # option -> (Settings field, type, help)
    "--strategy": ("strategy", str, f"query indexing: {' | '.join(STRATEGIES)} (default mhi)"),
    "--stats": (
        "df",
        str,
        "term statistics FILE (term<TAB>df lines, or JSON): OI, rarest-first dialogue",
    ),
    "--popular": ("popular", str, "popular terms FILE, one a line: SAP-MHI"),
    "--piggyback": (
        "piggyback",
        count,
        "successor ids piggybacked per announced run, k (default 0)",
    ),
    "--resolution": (
        "resolution",
        str,
        f"query resolution: {' | '.join(RESOLUTIONS)} (default td)",
    ),
    "--bloom-bits": ("bloom_bits", count, "Bloom filter size in bits (default 1024)"),
    "--bloom-hashes": ("bloom_hashes", count, "Bloom filter hash functions (default 5)"),
    "--dialogue-batch": (
        "dialogue_batch",
        count,
        "ids asked per query per Term Dialogue round (default 1)",
    ),
    "--max-doc-bytes": ("max_document_bytes", count, "largest document accepted (default 1 MiB)"),
    "--max-query-bytes": (
        "max_query_bytes",
        count,
        "longest query text accepted, checked before it is analyzed (default 4096)",
    ),
    "--mailbox-bytes": (
        "mailbox_bytes",
        count,
        "a subscription's alerts waiting, in bytes, before the oldest go (default 16 MiB)",
    ),
    "--seed": ("seed", count, "seed of every random choice, e.g. RI's (default 0)"),
    "--synopsis-k": (
        "synopsis_k",
        count,
        "SAP-MHI without --popular: popular terms learnt by gossip, K (default 3000)",
    ),
    "--synopsis-hashes": (
        "synopsis_hashes",
        count,
        "coin-toss registers per synopsis term (default 1, exact merging)",
    ),
    "--gossip": (
        "gossip_period",
        positive_float,
        "seconds between synopsis gossip rounds (default 1)",
    ),
    "--reindex-grace": (
        "reindex_grace",
        positive_float,
        "seconds a re-indexed query stays at its old key (default 5)",
    ),
    "--replicas": (
        "replicas",
        positive,
        f"copies of every index entry, subscription and mailbox: its key's owner and the "
        f"owner's next R-1 successors (default {REPLICAS}; 1: no replication)",
    ),
    "--reconcile": (
        "reconcile_period",
        positive_float,
        "seconds between reconciliations of each node's range with its replicas (default 2)",
    ),
}
FILES = {"--stats": load_stats, "--popular": load_terms}  # read here into the settings


def publishing_options(p: argparse.ArgumentParser) -> None:
    from cqengine.live.publishing import Publishing

    d = Publishing()
    g = p.add_argument_group(
        "publishing (per node: how documents published through it are batched)"
    )
    g.add_argument(
        "--linger-ms",
        type=non_negative_float,
        default=d.linger_ms,
        metavar="MS",
        help="a batch waits this long after its first document for more (default %(default)s)",
    )
    g.add_argument(
        "--batch-docs",
        type=positive,
        default=d.batch_docs,
        metavar="N",
        help="a batch goes at once when it holds this many documents (default %(default)s)",
    )


def limits_options(p: argparse.ArgumentParser) -> None:
    d = Limits()
    g = p.add_argument_group("limits (per node: what others may make it hold or do)")
    g.add_argument(
        "--max-channels",
        type=positive,
        default=d.channels,
        metavar="N",
        help="channels to other nodes kept open; the least recently used close first "
        "(default %(default)s)",
    )
    g.add_argument(
        "--max-background",
        type=positive,
        default=d.background,
        metavar="N",
        help="background operations (deliveries, hand-overs, repairs) running at once; "
        "more wait their turn (default %(default)s)",
    )
    g.add_argument(
        "--client-rate",
        type=non_negative_float,
        default=d.client_rate,
        metavar="CALLS",
        help="client API calls a second one client (its certificate, or its host) may make; "
        "beyond it RESOURCE_EXHAUSTED; 0: no limit (default %(default)s)",
    )
    g.add_argument(
        "--client-burst",
        type=positive,
        default=d.client_burst,
        metavar="CALLS",
        help="calls one client may make at once above its rate (default %(default)s)",
    )


def limits_from(args: argparse.Namespace) -> Limits:
    return Limits(
        channels=args.max_channels,
        background=args.max_background,
        client_rate=args.client_rate,
        client_burst=args.client_burst,
    )


def limits_flags(args: argparse.Namespace) -> list[str]:
    """The limits, as arguments for every node process of a ring."""
    return [
        *("--max-channels", str(args.max_channels), "--max-background", str(args.max_background)),
        *("--client-rate", str(args.client_rate), "--client-burst", str(args.client_burst)),
    ]


def publishing_from(args: argparse.Namespace):
    from cqengine.live.publishing import Publishing

    return Publishing(linger_ms=args.linger_ms, batch_docs=args.batch_docs)


def publishing_flags(args: argparse.Namespace) -> list[str]:
    """The publishing options, as arguments for every node process of a ring."""
    return ["--linger-ms", str(args.linger_ms), "--batch-docs", str(args.batch_docs)]


def engine_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine (ring-wide: set by the node that starts the ring)")
    for flag, (_, kind, text) in ENGINE_FLAGS.items():
        g.add_argument(
            flag,
            type=kind,
            default=None,
            help=text,
            metavar="FILE" if flag in FILES else None,
        )


def given_engine_flags(args: argparse.Namespace) -> list[str]:
    """The engine options on the command line, as arguments for a node process (paths absolute)."""
    out = []
    for flag in ENGINE_FLAGS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            out += [flag, str(Path(value).resolve()) if flag in FILES else str(value)]
    return out


def settings_from(args: argparse.Namespace) -> Settings:
    settings = Settings(replicas=REPLICAS)  # a ring of the command line is replicated
    try:
        for flag, (name, _, _) in ENGINE_FLAGS.items():
            value = getattr(args, flag[2:].replace("-", "_"))
            if value is not None:
                setattr(settings, name, FILES[flag](Path(value)) if flag in FILES else value)
        return settings.validate()
    except (SettingsError, TermFileError) as e:
        raise CliError(str(e)) from None


def ring_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ring-file",
        type=Path,
        default=Path(os.environ.get("CQENGINE_RING_FILE", DEFAULT_RING_FILE)),
        help="where the ring's nodes are recorded (default $CQENGINE_RING_FILE "
        f"or {DEFAULT_RING_FILE})",
    )


def node_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--node",
        type=address,
        metavar="HOST:PORT",
        help="the node to talk to (default: a node of the ring file that answers)",
    )
    ring_file_option(p)
    p.add_argument(
        "--tls-dir",
        type=Path,
        metavar="DIR",
        help="the ring's CA and this client's certificate (default $CQENGINE_TLS_DIR, or the "
        "ring file's directory when it lists the node)",
    )
    p.add_argument(
        "--tls-name",
        metavar="NAME",
        help="the certificate to present: DIR/NAME.pem (default $CQENGINE_TLS_NAME or client)",
    )


def spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default $CQENGINE_SPARK_MASTER or local[*])",
    )
    p.add_argument("--partitions", type=count, help="partitions to spread the work over")


# ---- the parser ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="cqengine", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )

    node = sub.add_parser("node", help="run one ring node in this process")
    node.add_argument("--port", type=port_number, required=True)
    node.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default %(default)s)"
    )
    node.add_argument(
        "--advertise", metavar="HOST", help="host other nodes reach this one at (default: --host)"
    )
    node.add_argument(
        "--join",
        type=address,
        metavar="HOST:PORT",
        help="any node of the ring to join; omit to start a new ring",
    )
    node.add_argument(
        "--id", type=node_id, help="node id, decimal or 0x-hex (default: mmh3 of address)"
    )
    node.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="keep this node's subscriptions, index entries and waiting alerts in DIR "
        "(SQLite), and take them back when restarted with it (default: keep nothing)",
    )
    tls = node.add_argument_group("security (one of --tls-dir and --insecure is required)")
    tls.add_argument(
        "--tls-dir",
        type=Path,
        metavar="DIR",
        help="speak mutual TLS with the ring's CA and this node's certificate in DIR "
        "(`cqengine certs`)",
    )
    tls.add_argument(
        "--tls-name",
        metavar="NAME",
        help="this node's certificate: DIR/NAME.pem, NAME-key.pem (default: --advertise or --host)",
    )
    tls.add_argument(
        "--insecure",
        action="store_true",
        help="speak plaintext: anyone who reaches the port may call every service",
    )
    node.add_argument("-v", "--verbose", action="store_true")
    timing_options(node)
    publishing_options(node)
    limits_options(node)
    engine_options(node)

    ring = sub.add_parser("ring", help="start, inspect or stop a ring of local node processes")
    ring_sub = ring.add_subparsers(
        dest="ring_command", required=True, metavar="ACTION", parser_class=Parser
    )
    up = ring_sub.add_parser("up", help="start N nodes on loopback and wait until converged")
    up.add_argument("-n", "--nodes", type=int, required=True, metavar="N")
    up.add_argument(
        "--base-port", type=port_number, help="ports P..P+N-1 (default: any free ports)"
    )
    up.add_argument(
        "--timeout", type=positive_float, help="seconds to wait for convergence (default 30+N)"
    )
    up.add_argument(
        "--data-dir",
        type=Path,
        metavar="ROOT",
        help="node i keeps its state in ROOT/<its port>, and a node whose directory holds "
        "data is started at that port again (default: data/ beside the ring file)",
    )
    up.add_argument(
        "--insecure",
        action="store_true",
        help="run plaintext (default: mutual TLS, certificates in tls/ beside the ring file)",
    )
    ring_file_option(up)
    timing_options(up)
    publishing_options(up)
    limits_options(up)
    engine_options(up)
    ring_file_option(
        ring_sub.add_parser("status", help="each node's view; exit 0 only if the ring is correct")
    )
    down = ring_sub.add_parser(
        "down", help="stop every node of the ring file; each keeps its data for `ring up`"
    )
    down.add_argument("--purge", action="store_true", help="remove the nodes' data too")
    ring_file_option(down)

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

    certs = sub.add_parser(
        "certs", help="make a ring's certificate authority and its nodes' and clients' certificates"
    )
    certs_sub = certs.add_subparsers(
        dest="certs_command", required=True, metavar="ACTION", parser_class=Parser
    )
    ci = certs_sub.add_parser("init", help="a new certificate authority: DIR/ca.pem, ca-key.pem")
    cn = certs_sub.add_parser(
        "node", help="a ring node's certificate for host NAME: DIR/NAME.pem, NAME-key.pem"
    )
    cn.add_argument(
        "--name",
        required=True,
        help="the certificate's name (DIR/NAME.pem), and its host unless --host says",
    )
    cn.add_argument("--host", help="the host name or IP address peers reach the node by")
    cc = certs_sub.add_parser(
        "client", help="a client's certificate in a role: DIR/NAME.pem, NAME-key.pem"
    )
    cc.add_argument("--name", required=True, help="who the client is")
    cc.add_argument(
        "--role",
        required=True,
        choices=["subscriber", "publisher", "admin"],
        help="subscriber: subscribe, unsubscribe, stream; publisher: publish; admin: all, "
        "and stats",
    )
    for c in (ci, cn, cc):
        c.add_argument("--dir", type=Path, required=True, help="the ring's certificate directory")
        c.add_argument("--days", type=int, help="validity in days (default: CA 3650, others 825)")
        c.add_argument("--force", action="store_true", help="replace files already there")

    pr = sub.add_parser(
        "prep", help="Spark: analyze a corpus into documents, term statistics and a summary"
    )
    pr.add_argument(
        "--input",
        nargs="+",
        type=Path,
        required=True,
        metavar="PATH",
        help="TREC files (plain/.gz), JSON Lines (docno, text), or directories of them "
        "or of plain-text files",
    )
    pr.add_argument("--out", type=Path, required=True, metavar="DIR")
    pr.add_argument("--skip-bad", action="store_true", help="skip and count malformed documents")
    spark_options(pr)

    w = sub.add_parser("workload", help="Spark: generate a query workload from term statistics")
    w.add_argument(
        "--stats", type=Path, required=True, metavar="DIR", help="output of `cqengine prep`"
    )
    w.add_argument("--kind", choices=("uniform", "skew", "inverskew"), required=True)
    w.add_argument("--queries", type=int, required=True, metavar="N")
    w.add_argument(
        "--mean-size",
        type=positive_float,
        default=5.0,
        metavar="V",
        help="mean query size; sizes ~ Normal(V, 0.3V) (default %(default)s)",
    )
    w.add_argument("--seed", type=count, default=1)
    w.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="writes queries.parquet, queries.jsonl and summary.json here",
    )
    spark_options(w)

    g = sub.add_parser("gen-corpus", help="write a synthetic TREC corpus (Zipfian pseudo-words)")
    g.add_argument("--docs", type=count, required=True, metavar="N")
    g.add_argument(
        "--out",
        type=Path,
        required=True,
        help="a file (.gz for gzip), or with --files a directory of part files",
    )
    g.add_argument(
        "--files", type=count, default=1, help="split over this many gzip files (default 1)"
    )
    g.add_argument("--seed", type=count, default=1)
    g.add_argument(
        "--vocab", type=count, default=46654, help="vocabulary size (default: TREC-AP's)"
    )
    g.add_argument(
        "--mean-terms",
        type=positive_float,
        default=178.0,
        help="mean unique terms per document (default: TREC-AP's)",
    )
    g.add_argument(
        "--zipf", type=positive_float, default=1.0, help="Zipf exponent of term popularity"
    )

    cp = sub.add_parser("corpus", help="build a corpus of real text from installed documentation")
    cp_sub = cp.add_subparsers(
        dest="corpus_command", required=True, metavar="SOURCE", parser_class=Parser
    )
    cd = cp_sub.add_parser(
        "debian",
        help="the HTML documentation Debian packages put under /usr/share/doc, as TREC files",
    )
    cd.add_argument("--out", type=Path, required=True, metavar="DIR", help="where to write it")
    cd.add_argument(
        "--packages",
        nargs="+",
        metavar="PACKAGE",
        help="whose documentation (default: the newest postgresql-doc-NN installed, 15 on "
        "Debian 12, and debian-handbook; apt-get install them first)",
    )
    cd.add_argument("--docs", type=positive, metavar="N", help="at most N documents, spread evenly")
    cd.add_argument(
        "--words",
        type=positive,
        default=450,
        metavar="W",
        help="long pages are cut at paragraph breaks into documents of about W words "
        "(default %(default)s, news-article sized)",
    )
    cd.add_argument("--doc-root", type=Path, default=Path("/usr/share/doc"), help=argparse.SUPPRESS)

    x = sub.add_parser(
        "experiment", help="reproduce the paper's evaluation on the simulator: report, JSON, plots"
    )
    x.add_argument(
        "name",
        choices=("table2", "piggyback", "synopsis", "breakdown", "all"),
        help="table2 (Table 2), piggyback (Figure 3), synopsis (Figures 4, 5), breakdown "
        "(Figure 6), or all of them",
    )
    x.add_argument(
        "--corpus",
        type=Path,
        metavar="DIR",
        help="output of `cqengine prep` (optional with --quick)",
    )
    x.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="writes NAME.md, NAME.json and the figures' PNGs here",
    )
    # the scale's defaults are the paper's, or --quick's; a value given overrides either
    x.add_argument("--nodes", type=positive, help="ring size (default 1000; --quick: 64)")
    x.add_argument(
        "--queries", type=positive, help="queries per workload (default 100000; --quick: 2000)"
    )
    x.add_argument(
        "--docs",
        type=positive,
        help="documents published, the first by docno; synopses sample the first half "
        "(default 10000; --quick: 300)",
    )
    x.add_argument(
        "--mean-size",
        type=positive_float,
        metavar="V",
        help="mean query size; sizes ~ Normal(V, 0.3V) (default 5)",
    )
    x.add_argument("--seed", type=count, default=1)
    x.add_argument(
        "--workers", type=positive, help="processes publishing in parallel (default: one per core)"
    )
    x.add_argument(
        "--quick",
        action="store_true",
        help="every run small (64 nodes, 2,000 queries, 300 documents, K scaled to the "
        "vocabulary), on a generated corpus unless --corpus is given: a minute or two; --nodes, "
        "--queries, --docs and --mean-size still set what they name",
    )
    x.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    demo = sub.add_parser(
        "demo", help="a live ring per strategy: workload, corpus, alerts checked, costs compared"
    )
    demo.add_argument("-n", "--nodes", type=int, default=8)
    demo.add_argument("--queries", type=int, default=300)
    demo.add_argument("--docs", type=int, default=60)
    demo.add_argument("--seed", type=int, default=1)
    return parser


# ---- commands -----------------------------------------------------------------------------


def progress_printer():
    """Progress on one rewritten stderr line when it is a terminal, silence otherwise."""
    if not sys.stderr.isatty():
        return lambda s: None
    return lambda s: print(f"\r{s}\033[K", end="", file=sys.stderr, flush=True)


def cmd_node(args: argparse.Namespace) -> int:
    from cqengine.live.service import serve_engine

    if args.host in ("0.0.0.0", "::") and not args.advertise:
        raise CliError(
            f"--host {args.host} listens everywhere; say with --advertise how peers reach this node"
        )
    if args.join and given_engine_flags(args):
        raise CliError(
            "engine options belong to the ring: a joining node takes them from the node it joins"
        )
    settings = None if args.join else settings_from(args)
    credentials = node_credentials(args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    asyncio.run(
        serve_engine(
            args.host,
            args.port,
            args.join,
            args.id,
            args.successors,
            timing_from(args),
            settings,
            args.advertise,
            publishing_from(args),
            args.data_dir,
            credentials,
            limits_from(args),
        )
    )
    return 0


def node_credentials(args: argparse.Namespace):
    """The node's own certificate, from --tls-dir; None with --insecure (said loudly)."""
    from chord.tls import Credentials

    if args.insecure:
        if args.tls_dir or args.tls_name:
            raise CliError("--insecure runs plaintext: it takes no --tls-dir or --tls-name")
        print(
            "cqengine: WARNING: --insecure: this node speaks plaintext; anyone who reaches "
            "its port may call every service, the ring's internal ones included",
            file=sys.stderr,
            flush=True,
        )
        return None
    if args.tls_dir is None:
        raise CliError(
            "a node speaks mutual TLS: give --tls-dir with the ring's certificates "
            "(`cqengine certs`), or --insecure to run plaintext"
        )
    try:
        return Credentials.load(args.tls_dir, args.tls_name or args.advertise or args.host)
    except TlsError as e:
        raise CliError(str(e)) from None


def cmd_ring(args: argparse.Namespace) -> int:
    if args.ring_command == "up":
        settings_from(args)  # refuse bad settings here, before any process starts
        if args.insecure:
            print(
                "cqengine: WARNING: --insecure: the ring speaks plaintext; anyone who reaches "
                "its ports may call every service, the ring's internal ones included",
                file=sys.stderr,
            )
        progress = progress_printer()
        ring_up(
            args.nodes,
            args.ring_file,
            args.base_port,
            r=args.successors,
            timing=timing_from(args),
            timeout=args.timeout,
            progress=progress,
            engine=given_engine_flags(args),
            node_args=publishing_flags(args) + limits_flags(args),
            data_root=args.data_dir or args.ring_file.parent / DATA,
            insecure=args.insecure,
        )
        progress("")
        return 0
    if args.ring_command == "status":
        return 0 if ring_status(args.ring_file) else 1
    ring_down(args.ring_file, purge=args.purge)
    return 0


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


def cmd_certs(args: argparse.Namespace) -> int:
    from cqengine.live import certs

    days = {} if args.days is None else {"days": args.days}
    if days and args.days <= 0:
        raise CliError("--days must be positive")
    try:
        if args.certs_command == "init":
            made = certs.init_ca(args.dir, force=args.force, **days)
        else:
            node = args.certs_command == "node"
            made = certs.issue(
                args.dir,
                args.name,
                certs.NODE if node else args.role,
                force=args.force,
                host=args.host if node else None,
                **days,
            )
    except certs.CertError as e:
        raise CliError(str(e)) from None
    for path in made:
        print(path)
    return 0


def spark_session(args: argparse.Namespace):
    from cqengine.spark.session import session

    try:
        return session(args.master)
    except Exception as e:  # the JVM failed to start: say what to check, not a Py4J trace
        raise CliError(
            f"Spark could not start ({type(e).__name__}); it needs Java 17+ on PATH and a "
            f"reachable master"
        ) from None


def run_spark_job(args: argparse.Namespace, job) -> int:
    """Start Spark, run one job on it, print the job's summary as JSON; a refusal is one line."""
    import json

    from cqengine.spark.prep import PrepError
    from cqengine.spark.workload_job import WorkloadError

    spark = spark_session(args)
    try:
        summary = job(spark)
    except (PrepError, WorkloadError) as e:
        raise CliError(str(e)) from None
    finally:
        spark.stop()
    print(json.dumps(summary, indent=2))
    return 0


def cmd_prep(args: argparse.Namespace) -> int:
    from cqengine.spark.prep import run_prep

    for path in args.input:  # before the JVM starts
        if not path.exists():
            raise CliError(f"{path}: no such file or directory")
    return run_spark_job(
        args, lambda spark: run_prep(spark, args.input, args.out, args.skip_bad, args.partitions)
    )


def cmd_workload(args: argparse.Namespace) -> int:
    from cqengine.spark.workload_job import run_workload

    if not (args.stats / "terms.parquet").exists():  # before the JVM starts
        raise CliError(f"{args.stats}: no terms.parquet here; run `cqengine prep` first")
    return run_spark_job(
        args,
        lambda spark: run_workload(
            spark,
            args.stats,
            args.kind,
            args.queries,
            args.mean_size,
            args.seed,
            args.out,
            args.partitions,
        ),
    )


def cmd_gen_corpus(args: argparse.Namespace) -> int:
    from cqengine.progress import Progress
    from cqengine.text.corpus import write_corpus, write_corpus_files

    if args.docs == 0 or args.files == 0 or args.vocab == 0:
        raise CliError("--docs, --files and --vocab must be positive")
    kw = dict(seed=args.seed, vocab_size=args.vocab, mean_terms=args.mean_terms, zipf_s=args.zipf)
    start = time.monotonic()
    if args.files == 1:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_corpus(args.out, args.docs, **kw)
        where = str(args.out)
    else:
        progress = Progress("generating", args.docs)
        paths = write_corpus_files(
            args.out, args.docs, args.files, progress=lambda k: progress.update(k, k), **kw
        )
        progress.close()
        where = f"{len(paths)} files in {args.out}"
    print(f"wrote {args.docs} documents ({where}) in {time.monotonic() - start:.1f}s")
    return 0


def cmd_corpus(args: argparse.Namespace) -> int:
    from cqengine.text.debian import CorpusError, build

    start = time.monotonic()
    try:
        summary = build(
            args.out,
            args.packages,
            args.docs,
            args.words,
            args.doc_root,
            progress=lambda s: print(s, file=sys.stderr, flush=True),
        )
    except CorpusError as e:
        raise CliError(str(e)) from None
    for p in summary["packages"]:
        print(f"{p['package']} {p['version'] or '(version unknown)'}: {p['documents']} documents")
    print(
        f"wrote {summary['documents']} documents ({summary['words']} words) to {args.out} in "
        f"{time.monotonic() - start:.1f}s; `cqengine prep --input {args.out}/*.trec.gz` "
        "analyzes them"
    )
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from cqengine.evaluation import EvaluationError
    from cqengine.evaluation.evaluate import corpus_for, default_workers, evaluate, quick_scale
    from cqengine.evaluation.runs import Scale

    scale = (
        quick_scale(args.seed, args.workers or default_workers())
        if args.quick
        else Scale(seed=args.seed, workers=args.workers or default_workers())
    )
    given = {
        k: v
        for k, v in (
            ("nodes", args.nodes),
            ("queries", args.queries),
            ("docs", args.docs),
            ("mean_size", args.mean_size),
        )
        if v is not None
    }
    scale = replace(scale, **given)
    command = (
        "cqengine " + " ".join(sys.argv[1:])
        if sys.argv[1:2] == ["experiment"]
        else f"cqengine experiment {args.name}"
    )
    try:
        corpus = corpus_for(args.corpus, args.quick, args.seed, scale.docs)
        if args.quick and args.docs is None:  # a small prep output is used whole
            scale.docs = min(scale.docs, len(corpus))
        files = evaluate(args.name, corpus, scale, args.out, command, args.quick, args.quiet)
    except EvaluationError as e:
        raise CliError(str(e)) from None
    for f in files:
        print(f)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cqengine.demo import run_demo

    return 0 if run_demo(args.nodes, args.queries, args.docs, args.seed) else 1


COMMANDS = {
    "node": cmd_node,
    "ring": cmd_ring,
    "subscribe": cmd_subscribe,
    "publish": cmd_publish,
    "stats": cmd_stats,
    "analyze": cmd_analyze,
    "certs": cmd_certs,
    "demo": cmd_demo,
    "prep": cmd_prep,
    "workload": cmd_workload,
    "gen-corpus": cmd_gen_corpus,
    "corpus": cmd_corpus,
    "experiment": cmd_experiment,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (CliError, RingError, StartupError, ClientError, TrecError, SettingsError) as e:
        print(f"cqengine: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cqengine: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `cqengine stats | head`: the reader has what it wanted
        # what is left in stdout's buffer goes nowhere, or flushing it at exit fails again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE
