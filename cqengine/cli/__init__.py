"""cqengine: continuous keyword queries over a Chord ring.

Every failure the user can cause ends in one clear line on stderr and a non-zero exit:
here, in main(), for every command. Each family of commands (a module of this package)
adds its parsers and names the function that runs each of its commands.
"""

from __future__ import annotations

import os
import sys

# gRPC's C core logs every failed TLS handshake; the command line says why in one line
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from chord.live.server import StartupError
from chord.protocol import versions
from cqengine.cli import certs, client, console, data, experiments, ring
from cqengine.cli.options import CliError, Parser
from cqengine.core.terms.settings import SettingsError
from cqengine.live.client import ClientError
from cqengine.live.ringfile import RingError
from cqengine.text.trec import TrecError

FAMILIES = (ring, client, console, certs, data, experiments)  # in the order `--help` lists them
COMMANDS = {name: run for family in FAMILIES for name, run in family.COMMANDS.items()}


def build_parser() -> Parser:
    parser = Parser(prog="cqengine", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--version",
        action="version",
        version=f"cqengine {versions.software()}, {versions.MINE}",
        help="print the release and the node-to-node protocol it speaks, and exit",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for family in FAMILIES:
        family.add_parsers(sub)
    return parser


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
