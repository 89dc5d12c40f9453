"""`cqengine console`: the web console of the ring file's ring (cqengine.live.console)."""

from __future__ import annotations

import argparse
import asyncio

from cqengine.cli.options import CliError, port_number, ring_file_option


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "console",
        help="serve a web page that shows the ring and lets you subscribe and publish",
        description="Serve the ring's web console: its nodes on a circle by id, up or down, "
        "their load and copies, traffic charts, and boxes to subscribe and publish; updates "
        "are pushed to the page. It reaches the ring with the ring file's admin certificate.",
    )
    p.add_argument("--port", type=port_number, default=8080, help="(default %(default)s)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default %(default)s: this machine only); any other "
        "needs --token",
    )
    p.add_argument(
        "--token",
        help="a secret every request must carry (?token= or Authorization: Bearer); "
        "required to listen beyond loopback, since the page acts with admin rights",
    )
    ring_file_option(p)


def cmd_console(args: argparse.Namespace) -> int:
    from cqengine.live.console import Console, is_loopback
    from cqengine.live.ringfile import RingFile

    if not is_loopback(args.host) and not args.token:
        raise CliError(
            f"--host {args.host} lets other machines reach the console, which acts with the "
            "ring's admin certificate: give --token SECRET too"
        )
    if args.token is not None and len(args.token) < 8:
        raise CliError("--token must be at least 8 characters")
    asyncio.run(Console(RingFile.load(args.ring_file), args.token).serve(args.host, args.port))
    return 0


COMMANDS = {"console": cmd_console}
