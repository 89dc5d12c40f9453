"""A QN's report of its matches to the DN (MatchedRequest), in either of its two forms.

Columns (feature "columns", protocol 3): the subscriptions matched, in runs of one document
and one home each; per run its length, its document and its home, a place in a table that
names each (home address, home key) once. A match costs its 8-byte subscription id, and the
DN takes a run of them with one slice, where a Match submessage per alert (the form of
protocol 2 and before) costs some 30-40 bytes and a parse, a lookup and an append each. The
Match form stays for rings that still have a node of protocol 2 or before, and for reports
it is smaller for (a few lone matches: each run costs its length, document and home).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cqengine.proto import cqengine_pb2 as pb

Home = tuple[str, int]  # where an alert goes: its home's address and home key


def report(
    request: pb.MatchedRequest, found: Sequence[Sequence[pb.QueryEntry]], columns: bool
) -> None:
    """The matches of each document named in `request.doc_keys` (found[i] for the i-th),
    into the request: as columns if the ring may use them (`columns`) and they are the
    smaller form (a report of lone matches costs a few bytes more so), else one Match
    each."""
    runs: list[tuple[int, Home, list[int]]] = []
    for i, entries in enumerate(found):
        homes: dict[Home, list[int]] = {}
        for e in entries:
            homes.setdefault((e.home, e.home_id), []).append(e.subscription_id)
        runs.extend((i, home, subs) for home, subs in homes.items())
    if columns:
        before = request.ByteSize()
        _columns(request, runs, len(found))
        if request.ByteSize() - before < one_by_one_bytes(runs):
            return
        for name in COLUMNS:
            request.ClearField(name)
    add = request.matches.add  # in place: a built Match would be copied in
    for i, (home, key), subs in runs:
        for sub in subs:
            add(subscription_id=sub, home=home, home_id=key, doc=i)


COLUMNS = ("subscriptions", "counts", "docs", "home_of", "homes", "home_ids")


def _columns(
    request: pb.MatchedRequest, runs: list[tuple[int, Home, list[int]]], docs: int
) -> None:
    """The runs into the request as columns (of `docs` documents)."""
    places: dict[Home, int] = {}
    for _, _, subs in runs:
        request.subscriptions.extend(subs)
    request.counts.extend(len(subs) for _, _, subs in runs)
    if docs > 1:  # of a report of one document, every run is of it
        request.docs.extend(i for i, _, _ in runs)
    request.home_of.extend(places.setdefault(home, len(places)) for _, home, _ in runs)
    request.homes.extend(home for home, _ in places)
    if any(key for _, key in places):  # none without replicas
        request.home_ids.extend(key for _, key in places)


def one_by_one_bytes(runs: Sequence[tuple[int, Home, list[int]]]) -> int:
    """What the runs' matches cost as a Match each (proto3 leaves zeros out), worked out
    a run at a time (also for a report measurement never builds:
    cqengine.evaluation.measuring.wire)."""
    total = 0
    for doc, (home, key), subs in runs:
        size = len(home.encode())
        one = (1 + _varint(size) + size if size else 0) + (1 + _varint(doc) if doc else 0)
        one += 9 if key else 0
        zeros = subs.count(0)  # (an id is never 0; a test's may be)
        total += (len(subs) - zeros) * _framed(one + 9) + zeros * _framed(one)
    return total


def _framed(size: int) -> int:
    return 1 + _varint(size) + size


def _varint(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


def runs(request: pb.MatchedRequest) -> Iterator[tuple[int, Home, list[int]]]:
    """A checked report's matches (either form), as (document's place, home,
    subscriptions) runs."""
    if not request.subscriptions:
        for m in request.matches:
            yield m.doc, (m.home, m.home_id), [m.subscription_id]
        return
    homes = list(zip(request.homes, request.home_ids or [0] * len(request.homes)))
    docs = request.docs or [0] * len(request.counts)
    subscriptions, at = request.subscriptions, 0
    for doc, home, n in zip(docs, request.home_of, request.counts):
        yield doc, homes[home], subscriptions[at : at + n]
        at += n


def problem(request: pb.MatchedRequest, documents: int) -> str | None:
    """What is wrong with a report's columns, if anything (its Match form is checked
    match by match)."""
    runs, subs = len(request.counts), len(request.subscriptions)
    if request.matches and (subs or runs):
        return "matches both as columns and one by one"
    if len(request.home_of) != runs or sum(request.counts) != subs:
        return f"{subs} matches do not split as {runs} runs"
    if not runs:
        return None
    docs = len(request.docs)
    # of a report of one document, the runs' documents go unnamed
    if docs != runs and not (docs == 0 and documents == 1):
        return f"{docs} documents named for {runs} runs of matches of {documents} documents"
    if max(request.docs, default=0) >= documents or max(request.home_of) >= len(request.homes):
        return "a run of a document or home not named"
    if len(request.home_ids) not in (0, len(request.homes)):  # none: no replicas
        return f"{len(request.homes)} homes with {len(request.home_ids)} home keys"
    return None
