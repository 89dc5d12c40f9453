"""What a node checks of every Engine message before it acts on it.

Like chord.checks for the ring's own messages: a message that fails a check is refused
(chord.node.Refused), counted (`messages_refused` in Stats) and changes nothing. The
checks are of shape and range only: every message a correct node sends, whatever the
ring is doing, passes them (tests/test_checks.py runs whole simulated rings, replicated
and churning, with every message checked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from chord.checks import address_problem
from cqengine.proto import cqengine_pb2 as pb
from cqengine.text.analysis import term_id

if TYPE_CHECKING:
    from cqengine.core.engine import EngineNode

MAX_QUERY_TERMS = 64  # a query's terms (the client API's limit)
MAX_TERM_BYTES = 256  # one analyzed term's UTF-8 bytes


def entry_problem(e: pb.QueryEntry) -> str | None:
    """An inverted-list entry: its terms and their ids alike, sorted by id, at most
    MAX_QUERY_TERMS, indexed under one of them, with a real home address."""
    n = len(e.term_ids)
    if not 0 < n <= MAX_QUERY_TERMS or len(e.terms) != n:
        return f"an entry of {n} term ids and {len(e.terms)} terms"
    if any(len(t.encode("utf-8")) > MAX_TERM_BYTES for t in e.terms):
        return f"a term of more than {MAX_TERM_BYTES} bytes"
    if list(e.term_ids) != sorted(e.term_ids) or any(
        term_id(t) != i for t, i in zip(e.terms, e.term_ids)
    ):
        return "an entry's term ids are not its terms', in order"
    if e.index_id not in e.term_ids:
        return "an entry indexed under none of its terms"
    return address_problem(e.home) if e.home else None


def _index(engine: EngineNode, req: pb.IndexRequest) -> str | None:
    return entry_problem(req.entry)


CHECKS: dict[str, Callable[[Any, Any], str | None]] = {
    "Index": _index,
}


def invalid(engine: EngineNode, method: str, request: Any) -> str | None:
    """Why `engine` refuses this request (None: it may act on it)."""
    check = CHECKS.get(method)
    return check(engine, request) if check is not None else None
