"""Regenerate the Python stubs of every .proto here: `make protos`.

Each proto is compiled under a virtual include path equal to the package its stubs live in,
so the generated gRPC module imports its messages as `chord.proto.chord_pb2`.
tests/project/test_protos.py runs `generate` into a scratch directory and compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = {
    "chord.proto": "chord/proto",
    "cqengine.proto": "cqengine/proto",
}  # proto file -> package directory of its stubs


def generate(out_dir: Path = ROOT) -> list[Path]:
    written = []
    for proto, package in PROTOS.items():
        (out_dir / package).mkdir(parents=True, exist_ok=True)
        args = [
            "protoc",
            f"-I{package}={ROOT / 'protos'}",
            f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            f"--pyi_out={out_dir}",  # the messages' types, for the type checker
            str(ROOT / "protos" / proto),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {proto}")
        stem = proto.removesuffix(".proto")
        written += [
            out_dir / package / f"{stem}_pb2.py",
            out_dir / package / f"{stem}_pb2.pyi",
            out_dir / package / f"{stem}_pb2_grpc.py",
        ]
    return written


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(f"wrote {path}")
