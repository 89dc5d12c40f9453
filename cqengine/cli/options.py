"""What the command families share: the one-line error of a usage mistake, argument types,
option groups (ring maintenance, publishing, limits, engine, ring file, node address,
Spark), and the parsed arguments turned into Timing, Publishing, Limits and Settings."""

from __future__ import annotations

import argparse
import inspect
import os
from pathlib import Path

from chord.live.server import Limits, Timing
from chord.protocol.ids import parse_id
from chord.protocol.routing import RoutingTable
from cqengine.core.terms.indexing import STRATEGIES
from cqengine.core.terms.presence import DEFAULT_HEADER_TERMS
from cqengine.core.terms.settings import LOG_MEMBERS, REPLICAS, RESOLUTIONS, Settings, SettingsError
from cqengine.live.ringfile import DEFAULT_RING_FILE
from cqengine.text.termfiles import TermFileError, load_stats, load_terms


class CliError(Exception):
    """A command refuses what it was asked; main() prints the message as one line."""


class Parser(argparse.ArgumentParser):
    """Usage mistakes get the same one-line error as everything else, plus where to look."""

    def error(self, message: str):
        self.exit(2, f"cqengine: error: {message} (see `{self.prog} --help`)\n")


def defaults_of(fn) -> dict:
    """A function's parameters' defaults by name: what its command states as its options'
    defaults, so that each is written once (in the function that uses it)."""
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


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


def share(text: str) -> float:
    """A fraction, 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1")
    return value


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def switch(text: str) -> bool:
    """on / off (also true / false, yes / no, 1 / 0)."""
    value = text.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, not {text!r}")


def positive(text: str) -> int:
    value = count(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def successor_count(text: str) -> int:
    from chord.protocol.checks import MAX_SUCCESSORS

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
    for flag, default, what in (
        ("--stabilize", d.stabilize, "checking the successor and notifying it"),
        ("--fix-fingers", d.fix_fingers, "refreshing the fingers"),
        ("--check-predecessor", d.check_predecessor, "pinging the predecessor"),
    ):
        g.add_argument(
            flag,
            type=positive_float,
            default=default,
            metavar="S",
            help=f"period of {what} (default %(default)s)",
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
        default=RoutingTable.r,
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


ENGINE_FLAGS = {  # option -> (Settings field, type, help; engine_options states the default)
    "--strategy": ("strategy", str, f"query indexing: {' | '.join(STRATEGIES)}"),
    "--stats": (
        "df",
        str,
        "term statistics FILE (term<TAB>df lines, or JSON): OI, rarest-first dialogue",
    ),
    "--popular": ("popular", str, "popular terms FILE, one a line: SAP-MHI"),
    "--piggyback": ("piggyback", count, "successor ids piggybacked per announced run, k"),
    "--resolution": ("resolution", str, f"query resolution: {' | '.join(RESOLUTIONS)}"),
    "--bloom-bits": ("bloom_bits", count, "Bloom filter size in bits"),
    "--bloom-hashes": ("bloom_hashes", count, "Bloom filter hash functions"),
    "--dialogue-batch": ("dialogue_batch", count, "ids asked per query per Term Dialogue round"),
    "--header-terms": (
        "header_terms",
        count,
        "hot terms (highest document frequency in --stats) whose presence every "
        "announcement tells its QNs; 0: none (default 0), but "
        f"{DEFAULT_HEADER_TERMS} when the ring has --stats and --resolution td: there they pay",
    ),
    "--filter-lease": (
        "filter_lease",
        non_negative_float,
        "seconds a node's aggregate filter of its region is good for: an announcement none "
        "of whose ids has a list at its next hop is not sent; 0: no filters",
    ),
    "--merge-queries": (
        "merge_queries",
        switch,
        "on: queries of a list that ask the same first question are one merged column, "
        "split when it matches (fewer candidates, the same bytes)",
    ),
    "--home-log": (
        "home_log",
        switch,
        "on: each home key a replicated log of its subscriptions' inputs, alerts numbered "
        "only in an epoch a majority of its --log-members promised (no partition or "
        "pause numbers them twice); off: every numbered alert copied to the replicas",
    ),
    "--log-members": (
        "log_members",
        count,
        "members of each home's log on --home-log on: the home and its next successors; "
        "a majority of five outlives two nodes failing at once; 0: as many as --replicas; "
        f"1 with --replicas 1 (default {LOG_MEMBERS})",
    ),
    "--max-doc-bytes": ("max_document_bytes", count, "largest document accepted"),
    "--max-query-bytes": (
        "max_query_bytes",
        count,
        "longest query text accepted, checked before it is analyzed",
    ),
    "--max-alternatives": (
        "max_alternatives",
        count,
        "alternatives a query may expand to (its OR groups multiplied out)",
    ),
    "--mailbox-bytes": (
        "mailbox_bytes",
        count,
        "a subscription's alerts waiting, in bytes, before the oldest go",
    ),
    "--seed": ("seed", count, "seed of every random choice, e.g. RI's"),
    "--synopsis-k": (
        "synopsis_k",
        count,
        "SAP-MHI without --popular: popular terms learnt by gossip, K",
    ),
    "--synopsis-hashes": (
        "synopsis_hashes",
        count,
        "coin-toss registers per synopsis term; 1: exact merging",
    ),
    "--gossip": ("gossip_period", positive_float, "seconds between synopsis gossip rounds"),
    "--reindex-grace": (
        "reindex_grace",
        positive_float,
        "seconds a re-indexed query stays at its old key",
    ),
    "--replicas": (
        "replicas",
        positive,
        "copies of every index entry, subscription and mailbox: its key's owner and the "
        "owner's next R-1 successors; 1: no replication",
    ),
    "--reconcile": (
        "reconcile_period",
        positive_float,
        "seconds between reconciliations of each node's range with its replicas",
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


def engine_defaults() -> Settings:
    """A ring's settings where its command line gives none: Settings' own, but replicated."""
    return Settings(replicas=REPLICAS, home_log=True)


def headers_pay(settings: Settings) -> bool:
    """Do term-presence headers pay where the command line leaves them to the ring? With
    term statistics and Term Dialogue they take 13-57% off a document's bytes at paper
    scale; with Bloom filters they add 8-12% (experiments/results/paper-real/beyond.md)."""
    return settings.df is not None and settings.resolution == "td"


def engine_options(p: argparse.ArgumentParser) -> None:
    # no option has a default here: what is not given is left to the ring (given_engine_flags)
    d = engine_defaults()
    g = p.add_argument_group("engine (ring-wide: set by the node that starts the ring)")
    for flag, (name, kind, text) in ENGINE_FLAGS.items():
        g.add_argument(
            flag,
            type=kind,
            default=None,
            help=text
            if flag in FILES or "(default" in text
            else f"{text} (default {stated(name, getattr(d, name))})",
            metavar="FILE" if flag in FILES else None,
        )


def stated(name: str, value: str | int | float) -> str:
    """A setting's default as help states it: sizes in whole MiB, seconds without a `.0`."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if name.endswith("_bytes") and value and not value % (1 << 20):
        return f"{value >> 20} MiB"
    return f"{value:g}" if isinstance(value, float) else str(value)


def given_engine_flags(args: argparse.Namespace) -> list[str]:
    """The engine options on the command line, as arguments for a node process (paths absolute)."""
    out = []
    for flag in ENGINE_FLAGS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            out += [flag, str(Path(value).resolve()) if flag in FILES else str(value)]
    return out


def settings_from(args: argparse.Namespace) -> Settings:
    settings = engine_defaults()
    try:
        for flag, (name, _, _) in ENGINE_FLAGS.items():
            value = getattr(args, flag[2:].replace("-", "_"))
            if value is not None:
                setattr(settings, name, FILES[flag](Path(value)) if flag in FILES else value)
        if args.header_terms is None and headers_pay(settings):
            settings.header_terms = DEFAULT_HEADER_TERMS
        if args.log_members is None and settings.home_log and settings.replicas > 1:
            settings.log_members = LOG_MEMBERS  # a majority left after two fail
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
