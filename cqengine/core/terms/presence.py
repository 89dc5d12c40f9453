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

from collections.abc import Sequence

import numpy as np

from cqengine.text.analysis import term_id

MAX_HEADER_TERMS = 1 << 16
# hot terms per header where the command line gives a ring term statistics and Term
# Dialogue, and `experiment beyond`'s: chosen by measurement (experiments/results/README.md,
# "Beyond the paper"; K = 64 prunes a third as many candidates at paper scale)
DEFAULT_HEADER_TERMS = 256


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
    found: list[int] = at[hot[at] == sorted_ids[inside]].tolist()
    return found


def encode_one(places: Sequence[int]) -> list[int]:
    """A document's header: the count of its hot places, then their gaps (small numbers:
    a byte each, mostly). Made once, by the DN; every hop passes it on as it came."""
    if not len(places):
        return [0]
    ps = np.asarray(places, dtype=np.int64)
    return [len(ps), int(ps[0]), *(np.diff(ps) - 1).tolist()]


def split_docs(values: Sequence[int], docs: int) -> list[list[int]]:
    """A message's headers, one per document, each as encode_one made it; ValueError if
    the values do not hold exactly `docs` of them."""
    out: list[list[int]] = []
    at, n = 0, len(values)
    for _ in range(docs):
        if at >= n:
            raise ValueError(f"a term-presence header of {len(out)} documents of {docs}")
        end = at + 1 + values[at]
        if end > n:
            raise ValueError(f"a term-presence header of {values[at]} terms in {n - at - 1} values")
        out.append(list(values[at:end]))
        at = end
    if at != n:
        raise ValueError(f"a term-presence header with {n - at} values left over")
    return out


def places_of(header: Sequence[int], k: int) -> np.ndarray:
    """One document's header read back: its places among k hot ids, ascending;
    ValueError if one lies past them."""
    ps = np.cumsum(np.asarray(header[1:], dtype=np.int64) + 1) - 1
    if len(ps) and ps[-1] >= k:
        raise ValueError(f"a term-presence header's place {int(ps[-1])} among {k} hot terms")
    return ps


def decode(values: Sequence[int], docs: int, k: int) -> list[list[int]]:
    """encode_one's inverse over a message's headers, `docs` of them among k hot ids;
    ValueError if the values do not make `docs` well-formed headers. (A QN reads one
    header with places_of; an owner checks a message with problem, which agrees.)"""
    return [places_of(h, k).tolist() for h in split_docs(values, docs)]


def problem(values: Sequence[int], docs: int, k: int) -> str | None:
    """Why a message's headers for `docs` documents among k hot ids are malformed; None if
    they are not. One pass over all of them: a header's values (count and gaps) add up to
    its last place plus one."""
    try:
        headers = split_docs(values, docs)
    except ValueError as e:
        return str(e)
    if not docs:
        return None
    starts = np.cumsum([0] + [len(h) for h in headers[:-1]])
    last = np.add.reduceat(np.asarray(values, dtype=np.int64), starts) - 1
    if last.max() >= k:
        return f"a term-presence header's place {int(last.max())} among {k} hot terms"
    return None
