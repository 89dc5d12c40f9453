"""`cqengine certs init|node|client`: a ring's certificate authority, and its nodes' and
clients' certificates."""

from __future__ import annotations

import argparse
from pathlib import Path

from cqengine.cli.options import CliError, Parser


def add_parsers(sub) -> None:
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


COMMANDS = {"certs": cmd_certs}
