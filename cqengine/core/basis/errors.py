"""Why the engine refuses a client's request: EngineError, whose code names the gRPC status
a live node answers with (cqengine.live.service). A malformed message from another node is
refused differently: chord.protocol.calls.Refused, by the checks (cqengine.core.frame.checks)."""

from __future__ import annotations

from chord.protocol.calls import StatusError

LEAVING = "this node is stopping; send it to another node of the ring"
FULL = "data directory full"  # the node can keep nothing more now (its disk, say)
MINORITY = "the home's log has no majority of its members now (home in minority); try again"


class EngineError(StatusError):
    """A request the engine refuses; `code` names the gRPC status it maps to."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
