"""The `cqengine` command line. Every failure the user can cause ends in one clear line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from chord.ids import parse_id
from chord.live import StartupError, Timing, serve
from cqengine.ring import DEFAULT_RING_FILE, RingError, ring_down, ring_status, ring_up


class CliError(Exception):
    pass


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
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


def timing_options(p: argparse.ArgumentParser) -> None:
    d = Timing()
    g = p.add_argument_group("maintenance (seconds; each period is randomized by +-50%)")
    g.add_argument("--stabilize", type=positive_float, default=d.stabilize, metavar="S")
    g.add_argument("--fix-fingers", type=positive_float, default=d.fix_fingers, metavar="S")
    g.add_argument("--check-predecessor", type=positive_float, default=d.check_predecessor, metavar="S")
    g.add_argument("--rpc-timeout", type=positive_float, default=d.rpc_timeout, metavar="S",
                   help="a peer silent this long counts as failed (default %(default)s)")
    p.add_argument("--successors", type=int, default=8, metavar="R",
                   help="successor list length r (default %(default)s)")


def timing_from(args: argparse.Namespace) -> Timing:
    return Timing(stabilize=args.stabilize, fix_fingers=args.fix_fingers,
                  check_predecessor=args.check_predecessor, rpc_timeout=args.rpc_timeout)


def ring_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ring-file", type=Path,
                   default=Path(os.environ.get("CQENGINE_RING_FILE", DEFAULT_RING_FILE)),
                   help="where the ring's nodes are recorded (default $CQENGINE_RING_FILE "
                        f"or {DEFAULT_RING_FILE})")


class Parser(argparse.ArgumentParser):
    """Usage mistakes get the same one-line error as everything else, plus where to look."""

    def error(self, message: str):
        self.exit(2, f"cqengine: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="cqengine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)

    node = sub.add_parser("node", help="run one ring node in this process")
    node.add_argument("--port", type=port_number, required=True)
    node.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    node.add_argument("--advertise", metavar="HOST",
                      help="host other nodes reach this one at (default: --host)")
    node.add_argument("--join", type=address, metavar="HOST:PORT",
                      help="any node of the ring to join; omit to start a new ring")
    node.add_argument("--id", type=node_id, help="node id, decimal or 0x-hex (default: mmh3 of address)")
    node.add_argument("-v", "--verbose", action="store_true")
    timing_options(node)

    ring = sub.add_parser("ring", help="start, inspect or stop a ring of local node processes")
    ring_sub = ring.add_subparsers(dest="ring_command", required=True, metavar="ACTION",
                                   parser_class=Parser)
    up = ring_sub.add_parser("up", help="start N nodes on loopback and wait until converged")
    up.add_argument("-n", "--nodes", type=int, required=True, metavar="N")
    up.add_argument("--base-port", type=port_number, help="ports P..P+N-1 (default: any free ports)")
    up.add_argument("--timeout", type=positive_float, help="seconds to wait for convergence (default 30+N)")
    ring_file_option(up)
    timing_options(up)
    status = ring_sub.add_parser("status", help="each node's view; exit 0 only if the ring is correct")
    ring_file_option(status)
    down = ring_sub.add_parser("down", help="stop every node of the ring file")
    ring_file_option(down)

    demo = sub.add_parser("demo", help="start a small ring, check lookups against the truth, stop")
    demo.add_argument("-n", "--nodes", type=int, default=8)
    demo.add_argument("--lookups", type=int, default=20, help="lookups per node (default %(default)s)")
    demo.add_argument("--seed", type=int, default=1)
    return parser


def progress_printer():
    """Progress on one rewritten stderr line when it is a terminal, silence otherwise."""
    if not sys.stderr.isatty():
        return lambda s: None
    return lambda s: print(f"\r{s}\033[K", end="", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.command == "node":
        if args.host in ("0.0.0.0", "::") and not args.advertise:
            raise CliError(f"--host {args.host} listens everywhere; say with --advertise how peers reach this node")
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        asyncio.run(serve(args.host, args.port, args.join, args.id, args.successors,
                          timing_from(args), args.advertise))
        return 0
    if args.command == "ring":
        if args.ring_command == "up":
            progress = progress_printer()
            ring_up(args.nodes, args.ring_file, args.base_port, r=args.successors,
                    timing=timing_from(args), timeout=args.timeout, progress=progress)
            progress("")
            return 0
        if args.ring_command == "status":
            return 0 if ring_status(args.ring_file) else 1
        ring_down(args.ring_file)
        return 0
    if args.command == "demo":
        from cqengine.demo import run_demo
        return 0 if run_demo(args.nodes, args.lookups, args.seed) else 1
    raise CliError(f"unknown command {args.command}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (CliError, RingError, StartupError) as e:
        print(f"cqengine: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cqengine: interrupted", file=sys.stderr)
        return 130
