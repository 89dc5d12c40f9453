"""The repository around the tests: its root, and scripts that are no package's modules."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str):
    """Import a script that is not part of a package (benchmarks, generators) by path."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
