"""Files of terms: document frequencies (prep's stats.tsv, or JSON) and popular-term lists.

The command line reads them into Settings (df, popular); the engine itself reads no file,
and a joining node takes their contents from the ring by value.
"""

from __future__ import annotations

import json
from pathlib import Path


class TermFileError(ValueError):
    """A file of terms is missing, unreadable or malformed; the message says which and why."""


def load_stats(path: Path) -> dict[str, int]:
    """Document frequencies: JSON {term: df}, or lines `term<TAB>df` (a header line and
    #-comments allowed)."""
    text = _read(path)
    if path.suffix == ".json":
        try:
            data = json.loads(text)
            return {str(t): int(v) for t, v in data.items()}
        except (ValueError, AttributeError, TypeError) as e:
            raise TermFileError(
                f"{path}: not a JSON object of term -> document frequency ({e})"
            ) from None
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.rstrip("\n").split("\t")
        try:
            out[parts[0]] = int(parts[-1])
        except ValueError:
            if n == 1:
                continue  # a header
            raise TermFileError(
                f"{path}:{n}: expected `term<TAB>document frequency`, got {line!r}"
            ) from None
    return out


def load_terms(path: Path) -> frozenset[str]:
    """One term a line (analyzed form, as the synopsis holds it); #-comments allowed."""
    return frozenset(
        line.split("\t")[0].strip()
        for line in _read(path).splitlines()
        if line.strip() and not line.startswith("#")
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TermFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TermFileError(f"{path}: cannot read ({e})") from None
