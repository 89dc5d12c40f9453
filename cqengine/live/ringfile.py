"""The ring file: the JSON record of a ring's nodes that `ring up` writes and other
commands read (addresses, ids, pids, logs, data directories, the engine options the ring
started with, and where its certificates are), and the client credentials it points to.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from chord.live.tls import Credentials, TlsError
from chord.protocol.routing import SUCCESSORS

DEFAULT_RING_FILE = Path(".cqengine") / "ring.json"
CLIENT = "client"  # the admin client certificate `ring up` makes


class RingError(Exception):
    """A ring command cannot do what was asked; the message is one line for the operator."""


@dataclass
class NodeEntry:
    address: str
    port: int
    pid: int
    log: str
    id: str = ""  # hex, filled in once the node answers
    data: str = ""  # its data directory ("": it keeps nothing)
    metrics: str = ""  # host:port of its Prometheus endpoint ("": none)


@dataclass
class RingFile:
    path: Path
    r: int = SUCCESSORS
    nodes: list[NodeEntry] = field(default_factory=list)
    engine: list[str] = field(default_factory=list)  # the engine options the ring started with
    tls: str = ""  # the directory of the ring's certificates ("": the ring runs plaintext)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "r": self.r,
            "engine": self.engine,
            "tls": self.tls,
            "nodes": [asdict(n) for n in self.nodes],
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.path)

    @classmethod
    def load(cls, path: Path) -> RingFile:
        if not path.exists():
            raise RingError(f"no ring file at {path}: start a ring with `cqengine ring up`")
        try:
            data = json.loads(path.read_text())
            known = {f.name for f in fields(NodeEntry)}  # a newer version's fields aside
            nodes = [NodeEntry(**{k: v for k, v in n.items() if k in known}) for n in data["nodes"]]
            return cls(
                path=path,
                r=int(data.get("r", SUCCESSORS)),
                nodes=nodes,
                engine=[str(a) for a in data.get("engine", [])],
                tls=str(data.get("tls", "")),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise RingError(
                f"ring file {path} is malformed ({e}); remove it and run `cqengine ring up`"
            ) from None

    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    def credentials(self, name: str = CLIENT) -> Credentials | None:
        """A client's credentials for this ring: its certificate `name` (None: the ring
        runs plaintext)."""
        if not self.tls:
            return None
        try:
            return Credentials.load(Path(self.tls), name)
        except TlsError as e:
            raise RingError(str(e)) from None
