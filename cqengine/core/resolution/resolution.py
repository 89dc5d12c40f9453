"""Query resolution (paper section 6), free of I/O: one resolver for many parts at once.

A *part* is one QN's candidate queries for one document: the queries of its inverted
lists under the document's ids there, less those with a term it knows absent (pruning,
cqengine.core.resolution.knowledge). A resolver resolves any number of parts together: a live QN's
documents of a batch, or every QN's of one document in the simulator. Parts share no
term, so each asks in each round just what it would alone, and a round of thousands of
queries costs about what one of a few does.

Term Dialogue: the QN asks the publishing node (DN) about term ids, the DN answers with a
bit vector. Asking goes in rounds: each round every undecided query asks its next `batch`
ids not yet known, in its asking order (cqengine.core.state.postings: rarest first when document
frequencies are known, else by id). An answer of "absent" drops a query; a query whose
ids are all present is matched.
Bloom filters: before the first round the DN's filter of the document drops every query
with an id the filter rules out; the survivors finish by Term Dialogue, since a filter
can err "present".

The first round is worked out from each query's first unknown ids alone (`first_asked`),
read a row of codes at a time: asked rarest first, they are mostly absent, which ends most
queries there. Only the queries left after it are resolved whole (`Rounds`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from cqengine.core.resolution.knowledge import Knowledge, known_in_parts
from cqengine.core.state.postings import (
    FEW,
    Block,
    any_per_query,
    expand,
    members_of,
    ranges,
    widen,
)
from cqengine.core.terms.bloom import BloomFilter
from cqengine.proto import cqengine_pb2 as pb

Flags = list[bool] | NDArray[np.bool_]  # per term id, say: a list for a few, an array for more
# per column of a resolution, where a merged one's members' columns begin and how many
# (cqengine.core.state.merging)
Members = tuple[np.ndarray, np.ndarray]


def pack_bits(flags: Flags) -> bytes:
    """Bit i (little-endian within bytes) = flags[i]."""
    if len(flags) > FEW:
        return np.packbits(np.asarray(flags, dtype=bool), bitorder="little").tobytes()
    value = 0
    for i, flag in enumerate(flags):
        if flag:
            value |= 1 << i
    return value.to_bytes((len(flags) + 7) // 8, "little")


def _answers(data: bytes, n: int) -> None:
    if len(data) * 8 < n:
        raise ValueError(f"bit vector of {len(data) * 8} bits answers {n} ids")


def unpack_bits(data: bytes, n: int) -> Flags:
    """The first n flags of a bit vector: a list for a few, else an array."""
    _answers(data, n)
    if n > FEW:
        return np.unpackbits(
            np.frombuffer(data, dtype=np.uint8), count=n, bitorder="little"
        ).astype(bool)
    value = int.from_bytes(data, "little")
    return [bool(value >> i & 1) for i in range(n)]


def unpack_many(vectors: Sequence[bytes], counts: Sequence[int]) -> NDArray[np.bool_]:
    """unpack_bits of each bit vector, the first counts[i] flags of the i-th, one after
    another: a round's answers to many requests, unpacked at once."""
    for data, n in zip(vectors, counts):
        _answers(data, n)
    bits = np.unpackbits(np.frombuffer(b"".join(vectors), dtype=np.uint8), bitorder="little").view(
        np.bool_
    )
    sizes = np.array([len(data) for data in vectors], dtype=np.intp)
    return bits[ranges(8 * (np.cumsum(sizes) - sizes), counts)]


def first_asked(
    columns: np.ndarray, at: np.ndarray, offset: np.ndarray | int, unknown: np.ndarray, batch: int
) -> tuple[np.ndarray, np.ndarray]:
    """What a first round asks of the queries in these columns (their codes plus `offset`
    are places in `unknown`): pairs of query (its place in `at`) and code, each query's
    first `batch` unknown codes in asking order (a short query's padding, which repeats its
    first code, counting as Rounds counts it). Read a row of codes at a time: the first
    unknown code is mostly in the first row or two, so few queries are read whole. A
    query that asks nothing has every term known present."""
    asked: list[tuple[np.ndarray, np.ndarray]] = []
    count = np.zeros(len(at), dtype=np.intp)
    todo = np.arange(len(at))
    for row in columns:
        if not len(todo):
            break
        codes = row[at] + offset
        u = unknown[codes]
        asked.append((todo[u], codes[u]))
        if batch == 1:
            more = ~u
        else:
            count[todo[u]] += 1
            more = count[todo] < batch
        todo, at = todo[more], at[more]
        if not isinstance(offset, int):
            offset = offset[more]
    if not asked:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    return np.concatenate([q for q, _ in asked]), np.concatenate([c for _, c in asked])


def fail_any(
    columns: np.ndarray, at: np.ndarray, offset: np.ndarray | int, fails: np.ndarray
) -> np.ndarray:
    """Per query in these columns (its codes plus `offset` are places in `fails`): does one
    of its terms fail? Read a row of codes at a time, since the first term, asked first
    for being rarest, mostly fails already."""
    out = np.zeros(len(at), dtype=bool)
    todo = np.arange(len(at))
    for row in columns:
        if not len(todo):
            break
        failed = fails[row[at] + offset]
        out[todo[failed]] = True
        todo, at = todo[~failed], at[~failed]
        if not isinstance(offset, int):
            offset = offset[~failed]
    return out


def alive(
    columns: np.ndarray,
    at: np.ndarray,
    offset: np.ndarray | int,
    fails: np.ndarray,
    merged: Members | None = None,
) -> np.ndarray:
    """Per query in these columns: does none of its terms fail? A merged column (`merged`:
    per column, where its members' columns begin and how many; cqengine.core.state.merging) is
    alive while one of its members is: its own terms are but their common first ones, and
    it must ask nothing that none of them would."""
    out = ~fail_any(columns, at, offset, fails)
    if merged is None:
        return out
    first, count = merged
    grouped = out & (count[at] > 0)
    if grouped.any():
        k = count[at[grouped]]
        inner = ranges(first[at[grouped]], k)
        shifted = offset if isinstance(offset, int) else np.repeat(offset[grouped], k)
        ok = ~fail_any(columns, inner, shifted, fails)
        out[grouped] = np.logical_or.reduceat(ok, np.cumsum(k) - k)
    return out


def with_members(
    columns: np.ndarray, blocks: Sequence[Block], starts: np.ndarray, places: np.ndarray
) -> tuple[np.ndarray, list[Block], Members | None]:
    """The blocks' columns, then their merged queries' members' (cqengine.core.state.merging),
    codes among every part's terms; the members' blocks; and per column where a merged
    one's members begin and how many (None: the blocks merge none)."""
    inner: list[tuple[Block, int, int]] = []  # a merged query's block, its part's start, column
    first_col = 0
    for b, start in zip(blocks, starts.tolist()):
        if b.groups is not None:
            for i, g in enumerate(b.groups.tolist()):
                if g is not None:
                    inner.append((g, start, first_col + i))
        first_col += len(b)
    if not inner:
        return columns, [], None
    subs = [g for g, _, _ in inner]
    more = places[side_by_side(subs, np.array([s for _, s, _ in inner], dtype=np.intp))]
    width = max(columns.shape[0], more.shape[0])
    count = np.zeros(first_col + more.shape[1], dtype=np.intp)
    sizes = np.array([len(g) for g in subs], dtype=np.intp)
    first = np.zeros_like(count)
    at = np.array([c for _, _, c in inner], dtype=np.intp)
    count[at] = sizes
    first[at] = first_col + np.cumsum(sizes) - sizes
    return np.hstack([widen(columns, width), widen(more, width)]), subs, (first, count)


def side_by_side(blocks: Sequence[Block], offsets: np.ndarray | int) -> np.ndarray:
    """The blocks' columns of codes side by side, each block's plus its offset, in as many
    rows as the widest has: a shorter query repeats its first code (which changes nothing),
    as a block pads its own. Laid out for all blocks at once: a resolution may take
    thousands."""
    rows = np.array([b.codes.shape[0] for b in blocks], dtype=np.intp)
    queries = np.array([b.codes.shape[1] for b in blocks], dtype=np.intp)
    width, total = int(rows.max()), int(queries.sum())
    first = np.cumsum(queries) - queries  # each block's first column
    flat = np.concatenate([b.codes.ravel() for b in blocks])  # each block row by row
    if not isinstance(offsets, int):
        flat = flat + np.repeat(offsets, rows * queries)
    elif offsets:
        flat = flat + offsets
    row = ranges(np.zeros(len(blocks), dtype=np.intp), rows)  # each block's rows 0..w-1
    row_of = np.repeat(row, np.repeat(queries, rows))  # per element: its row
    col_of = ranges(np.repeat(first, rows), np.repeat(queries, rows))  # per element: its column
    out = np.empty((width, total), dtype=np.intp)
    out[row_of, col_of] = flat
    height = np.repeat(rows, queries)  # per column: its block's rows
    short = np.arange(width)[:, None] >= height[None, :]
    if short.any():
        out[short] = np.broadcast_to(out[0], out.shape)[short]
    return out


class Rounds:
    """The rounds of Term Dialogue of some queries, each a column of codes into the terms:
    what is known of each term (asked? absent?) lives in arrays over the terms, `rows`
    are the queries still undecided (their names, as given), `matched` those matched."""

    def __init__(
        self, names: np.ndarray, codes: np.ndarray, present: np.ndarray, batch: int
    ) -> None:
        self.batch = batch
        self.waiting = ~present  # per term: unknown and not asked yet
        self.absent = np.zeros(len(present), dtype=bool)
        open_rows = any_per_query(self.waiting[codes])
        self.matched: list[int] = names[~open_rows].tolist()  # all known present
        self.rows = names[open_rows]
        self.codes = codes.compress(open_rows, axis=1)

    def next(self) -> np.ndarray:
        """Where among the terms this round's ids are, ascending: each undecided query's
        next `batch` ids not yet asked (a pending query always has one)."""
        codes = self.codes
        waiting = self.waiting[codes]
        ask = np.zeros(len(self.waiting), dtype=bool)
        if self.batch == 1:  # the common case, without a cumulative sum
            ask[codes[waiting.T.argmax(axis=1), np.arange(codes.shape[1])]] = True
        else:
            ask[codes[waiting & (np.cumsum(waiting, axis=0) <= self.batch)]] = True
        return ask.nonzero()[0]

    def learn(self, at: np.ndarray, present: np.ndarray) -> None:
        """The answers for the terms at `at`: decide the queries they decide."""
        self.waiting[at] = False
        self.absent[at[~present]] = True
        codes = self.codes
        dropped = any_per_query(self.absent[codes])
        done = ~dropped & ~any_per_query(self.waiting[codes])
        self.matched += self.rows[done].tolist()
        keep = ~dropped & ~done
        self.rows = self.rows[keep]
        self.codes = codes.compress(keep, axis=1)

    def add(self, names: np.ndarray, codes: np.ndarray) -> None:
        """More queries (a merged query's members, split): decided at once by what is
        known, or left to ask."""
        dropped = any_per_query(self.absent[codes])
        done = ~dropped & ~any_per_query(self.waiting[codes])
        self.matched += names[done].tolist()
        keep = ~dropped & ~done
        self.rows = np.concatenate([self.rows, names[keep]])
        self.codes = np.hstack([self.codes, codes.compress(keep, axis=1)])


class Resolver:
    """The resolution of many parts at once, each part's terms apart from every other's.

    Made `knowing` what each QN knows of its document: the queries are columns of codes
    (`columns`, their entries beside them), and a candidate is a (part, column) pair whose
    codes, plus its offset, are places among every part's terms. Then, each step for all
    parts at once: `pending`, a filter's rule-outs (`passes`, `rule_out`), rounds of
    `questions` and answers (`learn`), `matched`.
    """

    batch: int
    parts: int
    columns: np.ndarray  # (width, columns) codes
    entries: np.ndarray  # per column, its query's entry
    members: np.ndarray | None  # per column, a merged query's entries (Block.members)
    term_start: (
        np.ndarray
    )  # per part, where its terms begin among every part's (and where they end)
    terms: np.ndarray  # every part's terms, each part's sorted, one part after another
    _sources: (
        list[list[tuple[Block, np.ndarray]]] | None
    )  # per part: its blocks, their terms' places
    # what `sources` is made from: the blocks, each one's part, where its terms begin among
    # the blocks' side by side and how many, and their places among every part's
    _occurrences: tuple[list[Block], np.ndarray, np.ndarray, np.ndarray, np.ndarray]

    def __init__(
        self,
        columns: np.ndarray,
        entries: np.ndarray,
        term_start: np.ndarray,
        part: np.ndarray,
        col: np.ndarray,
        offset: np.ndarray | int,
        present: np.ndarray,
        batch: int = 1,
    ) -> None:
        """The candidates (part, column, offset of its codes) of parts whose terms begin
        at `term_start`, `present` the terms known present, and what the first round asks
        of them."""
        self.batch, self.parts = max(1, batch), len(term_start) - 1
        self.columns, self.entries, self.term_start = columns, entries, term_start
        self.members: np.ndarray | None = None
        # per column, where a merged one's members' columns begin and how many (None: none)
        self.merged: Members | None = None
        self.fails = np.zeros(len(present), dtype=bool)  # per term: known absent, ruled out
        self.part, self.col, self.offset, self.present = part, col, offset, present
        self.candidates = np.bincount(part, minlength=self.parts)  # per part
        self.asker, self.code = first_asked(self.columns, col, offset, ~present, self.batch)
        open_ = np.zeros(len(part), dtype=bool)
        open_[self.asker] = True
        self.open = open_.nonzero()[0]  # the candidates left to ask about, before the first round
        self.unasked = (~open_).nonzero()[0]  # every term known present: matched without asking
        self.rounds: Rounds | None = None  # the candidates left after the first round

    @classmethod
    def knowing(
        cls, parts: Sequence[tuple[Sequence[Block], Knowledge]], batch: int = 1
    ) -> Resolver:
        """Parts as QNs hold them: a QN's inverted lists under a document's local ids, in
        key order (InvertedIndex.lists), and what it knows of the document; a part's terms
        are its lists' merged (for all parts by one sort), its candidates its queries
        without a term it knows absent (Observations 1-2, Algorithm 4)."""
        blocks = [b for lists, _ in parts for b in lists]
        owner = np.repeat(
            np.arange(len(parts)), [len(lists) for lists, _ in parts]
        )  # per block: its part
        sizes = np.array([len(b.terms) for b in blocks], dtype=np.intp)
        terms = np.concatenate([b.terms for b in blocks])  # every block's, side by side
        term_part = np.repeat(owner, sizes)
        order = np.lexsort((terms, term_part))  # by part, then term: each part's merged
        ranked, ranked_part = terms[order], term_part[order]
        first = np.empty(len(order), dtype=bool)
        first[:1] = True
        first[1:] = (ranked[1:] != ranked[:-1]) | (ranked_part[1:] != ranked_part[:-1])
        places = np.empty(len(order), dtype=np.intp)  # of every block's terms among every part's
        places[order] = np.cumsum(first) - 1
        merged = ranked[first]
        term_start = np.searchsorted(ranked_part[first], np.arange(len(parts) + 1)).astype(np.intp)
        starts = np.cumsum(sizes) - sizes
        columns = places[side_by_side(blocks, starts)]
        absent, present = known_in_parts(merged, term_start, [know for _, know in parts])
        part = np.repeat(owner, [len(b) for b in blocks])
        col = np.arange(len(part))
        columns, inner, split = with_members(columns, blocks, starts, places)
        if absent.any():
            kept = alive(columns, col, 0, absent, split)
            part, col = part[kept], col[kept]
        entries = np.concatenate([b.entries for b in blocks + inner])
        self = cls(columns, entries, term_start, part, col, 0, present, batch)
        self.members = members_of(blocks + inner)
        self.terms = merged
        if split is not None:
            self.merged, self.fails = split, absent
            self._split_unasked(split)
        self._occurrences = (blocks, owner, starts, sizes, places)
        self._sources = None  # made when a filter asks (sources())
        return self

    def sources(self) -> list[list[tuple[Block, np.ndarray]]]:
        """Per part, its blocks and the places of their terms among every part's. Made
        when first asked: only filters need them, and a batch's parts hold thousands."""
        if self._sources is None:
            blocks, owner, starts, sizes, places = self._occurrences
            self._sources = [[] for _ in range(self.parts)]
            for b, p, at, n in zip(blocks, owner.tolist(), starts.tolist(), sizes.tolist()):
                self._sources[p].append((b, places[at : at + n]))
        return self._sources

    def ids(self, at: np.ndarray) -> list[int]:
        """The term ids at these places among every part's terms."""
        ids: list[int] = self.terms[at].tolist()
        return ids

    def _offset(self, queries: np.ndarray) -> np.ndarray | int:
        return self.offset if isinstance(self.offset, int) else self.offset[queries]

    def pending(self) -> np.ndarray:
        """Per part: its candidates still undecided."""
        rows = self.open if self.rounds is None else np.asarray(self.rounds.rows, dtype=np.intp)
        return np.bincount(self.part[rows], minlength=self.parts)

    def passes(self, filters: Sequence[tuple[int, BloomFilter | None]]) -> np.ndarray:
        """Over every part's terms: which the filter each of these parts received holds
        (None: none came, so none; a part not given: all). The blocks of the parts that
        heard the same filter (a document's QNs all do) are tested at once, each once."""
        out = np.ones(int(self.term_start[-1]), dtype=bool)
        heard: dict[int, tuple[BloomFilter, list[int]]] = {}
        for p, bloom in filters:
            if bloom is None:
                out[self.term_start[p] : self.term_start[p + 1]] = False
            else:
                heard.setdefault(id(bloom), (bloom, []))[1].append(p)
        for bloom, parts in heard.values():
            every = self.sources()
            sources = [source for p in parts for source in every[p]]
            blocks = list({id(b): b for b, _ in sources}.values())
            held = bloom.holds_positions(
                np.concatenate(
                    [b.bloom_positions(bloom.bits, bloom.hashes) for b in blocks], axis=1
                )
            )
            ends = np.cumsum([len(b.terms) for b in blocks])
            of = {id(b): h for b, h in zip(blocks, np.split(held, ends[:-1]))}
            # a term of several of a part's blocks gets the same answer each time
            out[np.concatenate([places for _, places in sources])] = np.concatenate(
                [of[id(b)] for b, _ in sources]
            )
        return out

    def rule_out(self, passes: np.ndarray) -> None:
        """Before the first round: drop candidates with an unknown term that `passes`
        (over every part's terms) rules out. No term known present fails a filter."""
        if self.rounds is not None:
            raise ValueError("a filter rules out before the first round")
        at = self.open
        out = ~alive(self.columns, self.col[at], self._offset(at), ~passes, self.merged)
        self.fails = self.fails | ~passes  # for the members of merged queries split later
        gone = np.zeros(len(self.part), dtype=bool)
        gone[self.open[out]] = True
        self.open = self.open[~out]
        kept = ~gone[self.asker]
        self.asker, self.code = self.asker[kept], self.code[kept]

    def asking(self) -> np.ndarray:
        """Where among every part's terms this round's ids are, ascending (none when every
        candidate is decided)."""
        if self.rounds is None:
            ask = np.zeros(int(self.term_start[-1]), dtype=bool)
            ask[self.code] = True
            return ask.nonzero()[0]
        return self.rounds.next() if len(self.rounds.rows) else np.zeros(0, dtype=np.intp)

    def questions(self) -> list[tuple[int, np.ndarray, list[int]]]:
        """This round's questions, per part that asks: the part, where its ids are among
        every part's terms, and the ids (ascending)."""
        at = self.asking()
        cut = at.searchsorted(self.term_start).tolist()
        ids = self.ids(at)
        return [(p, at[a:b], ids[a:b]) for p, (a, b) in enumerate(zip(cut, cut[1:])) if b > a]

    def learn(self, at: np.ndarray, present: np.ndarray) -> None:
        """The answers for the terms at `at` (a round's, ascending, among every part's terms)."""
        before = 0 if self.rounds is None else len(self.rounds.matched)
        if self.rounds is None:
            told = np.zeros(len(self.present), dtype=bool)  # answered absent
            told[at[~present]] = True
            ended = np.zeros(len(self.part), dtype=bool)
            ended[self.asker[told[self.code]]] = True  # heard one of its own first ids is absent
            rest = self.open[~ended[self.open]]
            codes = self.columns[:, self.col[rest]] + self._offset(rest)
            self.rounds = Rounds(rest, codes, self.present, self.batch)
        self.rounds.learn(at, present)
        if self.merged is not None:
            self._split_rounds(self.rounds, self.merged, before)

    def _split(self, found: np.ndarray, merged: Members) -> tuple[np.ndarray, np.ndarray]:
        """Of candidates found matched, the queries; and the members of the merged ones,
        made candidates (their places), less those a term known absent or ruled out by a
        filter drops, as it would have dropped them unmerged."""
        first, count = merged
        k = count[self.col[found]]
        split = k > 0
        if not split.any():
            return found, np.zeros(0, dtype=np.intp)
        groups, k = found[split], k[split]
        col = ranges(first[self.col[groups]], k)
        part = np.repeat(self.part[groups], k)
        offset = self._offset(groups)
        offset = offset if isinstance(offset, int) else np.repeat(offset, k)
        keep = ~fail_any(self.columns, col, offset, self.fails)
        new = np.arange(len(self.part), len(self.part) + int(keep.sum()))
        self.part = np.concatenate([self.part, part[keep]])
        self.col = np.concatenate([self.col, col[keep]])
        if not isinstance(offset, int):
            self.offset = np.concatenate([self.offset, offset[keep]])
        self.candidates = self.candidates + np.bincount(part[keep], minlength=self.parts)
        return found[~split], new

    def _split_unasked(self, merged: Members) -> None:
        """Split the merged queries matched before any round (their common terms known
        present): their members ask in the first round, as they would unmerged."""
        leaves, new = self._split(self.unasked, merged)
        if not len(new):
            return
        unknown = ~self.present
        q, c = first_asked(self.columns, self.col[new], self._offset(new), unknown, self.batch)
        asked = np.zeros(len(new), dtype=bool)
        asked[q] = True
        self.unasked = np.concatenate([leaves, new[~asked]])
        self.open = np.concatenate([self.open, np.unique(new[q])])
        self.asker, self.code = np.concatenate([self.asker, new[q]]), np.concatenate([self.code, c])

    def _split_rounds(self, rounds: Rounds, merged: Members, before: int) -> None:
        """Split the merged queries matched in this round: their members go on asking."""
        found = np.array(rounds.matched[before:], dtype=np.intp)
        leaves, new = self._split(found, merged)
        if len(leaves) == len(found):
            return
        rounds.matched[before:] = leaves.tolist()
        rounds.add(new, self.columns[:, self.col[new]] + self._offset(new))

    def _matched(self) -> np.ndarray:
        return np.concatenate(
            [self.unasked, np.array(self.rounds.matched if self.rounds else [], dtype=np.intp)]
        )

    def matched(self) -> list[list[pb.QueryEntry]]:
        """Per part, the entries it matched so far."""
        found = self._matched()
        part = self.part[found]
        order = np.argsort(part, kind="stable")
        cols = self.col[found][order]
        ends = np.cumsum(np.bincount(part, minlength=self.parts))
        return [expand(self.entries, self.members, at) for at in np.split(cols, ends[:-1])]
