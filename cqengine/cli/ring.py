"""`cqengine node` (one ring node in this process) and `cqengine ring up|status|down` (a
ring of local node processes)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from chord.live.tls import TlsError
from cqengine.cli.options import (
    CliError,
    Parser,
    address,
    count,
    engine_options,
    given_engine_flags,
    limits_flags,
    limits_from,
    limits_options,
    node_id,
    port_number,
    positive_float,
    publishing_flags,
    publishing_from,
    publishing_options,
    ring_file_option,
    settings_from,
    timing_from,
    timing_options,
)
from cqengine.core.announcement.filters import lease_problem
from cqengine.live.datadir import RESERVE
from cqengine.live.ring.commands import DATA, ring_down, ring_metrics, ring_status, ring_up


def add_parsers(sub) -> None:
    add_node(sub)
    add_ring(sub)


def add_node(sub) -> None:
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
    node.add_argument(
        "--disk-reserve",
        type=count,
        default=RESERVE >> 20,
        metavar="MIB",
        help="with --data-dir: while its disk has less than MIB MiB free, or a write there "
        "fails, the node refuses every call that would change what it keeps "
        "(RESOURCE_EXHAUSTED, 'data directory full'; streams, lookups and Stats go on) "
        "and serves them again by itself once space returns (0: only when a write fails; "
        f"default {RESERVE >> 20})",
    )
    node.add_argument(
        "--rejoin-empty",
        action="store_true",
        help="with --data-dir and --join: move the data directory aside (DIR.damaged-TIME) "
        "and start with an empty one, at the node's place on the ring, refilled from the "
        "copies the other nodes hold (the remedy for a directory found damaged at start)",
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
    node.add_argument(
        "--metrics-port",
        type=port_number,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: none)",
    )
    node.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics endpoint listens on (default %(default)s: this machine only)",
    )
    node.add_argument("-v", "--verbose", action="store_true")
    timing_options(node)
    publishing_options(node)
    limits_options(node)
    engine_options(node)


def add_ring(sub) -> None:
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
    up.add_argument(
        "--metrics",
        action="store_true",
        help="each node serves Prometheus metrics on a port of its own on 127.0.0.1, listed "
        "in the ring file (`cqengine ring metrics` prints a scrape configuration)",
    )
    up.add_argument(
        "--hashed-ids",
        action="store_true",
        help="give a new ring's nodes ids hashed from their addresses, as Chord's (default: "
        "evenly spaced ids, every node's range the same size, so load follows the lists "
        "alone); a node restarted from its data keeps the id it had either way",
    )
    up.add_argument(  # the default now; kept so that scripts that give it still run
        "--balanced-ids", action="store_true", help=argparse.SUPPRESS
    )
    ring_file_option(up)
    timing_options(up)
    publishing_options(up)
    limits_options(up)
    engine_options(up)
    ring_file_option(
        ring_sub.add_parser("status", help="each node's view; exit 0 only if the ring is correct")
    )
    ring_file_option(
        ring_sub.add_parser(
            "metrics",
            help="print Prometheus file_sd JSON for the metrics endpoints of the ring file's "
            "nodes (a ring started with --metrics)",
        )
    )
    down = ring_sub.add_parser(
        "down", help="stop every node of the ring file; each keeps its data for `ring up`"
    )
    down.add_argument("--purge", action="store_true", help="remove the nodes' data too")
    ring_file_option(down)


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
            (args.metrics_host, args.metrics_port) if args.metrics_port else None,
            args.disk_reserve << 20,
            args.rejoin_empty,
        )
    )
    return 0


def node_credentials(args: argparse.Namespace):
    """The node's own certificate, from --tls-dir; None with --insecure (said loudly)."""
    from chord.live.tls import Credentials

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
        # refuse bad settings here, before any process starts
        why = lease_problem(settings_from(args).filter_lease, timing_from(args).call_timeout)
        if why is not None:
            raise CliError(why)
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
            metrics=args.metrics,
            balanced_ids=not args.hashed_ids,
        )
        progress("")
        return 0
    if args.ring_command == "status":
        return 0 if ring_status(args.ring_file) else 1
    if args.ring_command == "metrics":
        print(ring_metrics(args.ring_file), end="")
        return 0
    ring_down(args.ring_file, purge=args.purge)
    return 0


COMMANDS = {"node": cmd_node, "ring": cmd_ring}
