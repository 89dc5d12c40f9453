"""Term-presence headers (issue 44): the DN tells every QN which of the ring's *hot* terms
its document holds, so a QN prunes and settles candidates without asking.

The hot terms are the `header_terms` terms of highest document frequency in the ring's
term statistics (`Settings.df`, ties by smaller id), which every node holds alike: they
are fixed when the ring starts and travel to a joining node with the rest of the
settings. Queries draw their other terms where documents do, so these are the terms QNs
ask about most (measured in experiments/results/README.md, "Term-presence headers").

A header is, per document, the places among the hot ids (sorted) of those the document
holds, as a count and then gaps. Every hot id it does not list is absent. That is exact,
never a guess: the DN builds it from the document's own ids, and a QN reads it against the
same hot ids; a header that does not decode (a sender that knows other settings cannot
pass the join check, so this is a malformed message) is refused by the checks.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from cqengine.text.analysis import term_id

MAX_HEADER_TERMS = 1 << 16


def hot_ids(df: dict[str, int], k: int) -> np.ndarray:
    """The ids of the k terms of highest document frequency, ascending (Settings.hot_ids
    keeps them: every node of a simulated ring shares them)."""
    # by frequency, then by id: the same k terms at every node, whatever the dict's order
    ranked = sorted(((n, term_id(t)) for t, n in df.items()), key=lambda p: (-p[0], p[1]))[:k]
    out = np.array(sorted(y for _, y in ranked), dtype=np.uint64)
    out.flags.writeable = False
    return out


def places(hot: np.ndarray, sorted_ids: np.ndarray) -> list[int]:
    """The places among `hot` of the document's ids that are hot, ascending."""
    if not len(hot) or not len(sorted_ids):
        return []
    at = hot.searchsorted(sorted_ids)
    inside = at < len(hot)
    at = at[inside]
    return at[hot[at] == sorted_ids[inside]].tolist()


def encode(per_doc: Iterable[Sequence[int]]) -> list[int]:
    """Each document's places as a count then gaps (small numbers: one byte each, mostly)."""
    out: list[int] = []
    for ps in per_doc:
        out.append(len(ps))
        last = -1
        for p in ps:
            out.append(p - last - 1)
            last = p
    return out


def decode(values: Sequence[int], docs: int, k: int) -> list[list[int]]:
    """encode's inverse for `docs` documents among k hot ids; ValueError if the values
    do not make `docs` well-formed headers."""
    out, at, n = [], 0, len(values)
    for _ in range(docs):
        if at >= n:
            raise ValueError(f"a term-presence header of {len(out)} documents of {docs}")
        count, at = values[at], at + 1
        if count > k or at + count > n:
            raise ValueError(f"a term-presence header of {count} terms of {k}")
        ps, last = [], -1
        for gap in values[at : at + count]:
            last += gap + 1
            ps.append(last)
        if ps and ps[-1] >= k:
            raise ValueError(f"a term-presence header's place {ps[-1]} among {k} hot terms")
        out.append(ps)
        at += count
    if at != n:
        raise ValueError(f"a term-presence header with {n - at} values left over")
    return out


def split(hot: np.ndarray, ps: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """A document's header as hot ids present and hot ids absent (both ascending)."""
    mask = np.zeros(len(hot), dtype=bool)
    mask[list(ps)] = True
    return hot[mask], hot[~mask]
