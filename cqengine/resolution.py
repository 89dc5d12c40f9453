"""Query resolution at a QN (paper section 6), free of I/O.

Term Dialogue: the QN asks the publishing node about term ids, the DN answers with a bit
vector. Asking is done in rounds: each round every unresolved query contributes its next
`batch` unanswered ids, in the block's asking order (cqengine.postings: rarest first when
document frequencies are known, else by id). An answer of "absent" drops a query; a query
whose ids are all present is matched.
Bloom filters: the DN's filter over all its term ids drops every query with an id the
filter rules out; the survivors finish by Term Dialogue, since a filter can err "present".
Resolutions told every answer at once (`Truth`) settle without asking, all together
(`Stack`): each goes through the rounds its dialogue would, and says how many ids each
round would have asked.
"""

from __future__ import annotations

from functools import cached_property
from typing import Iterator, Sequence

import numpy as np

from cqengine.bloom import BloomFilter
from cqengine.announce import Knowledge, known_in_parts
from cqengine.postings import Block, any_per_query, member, ranges, union_terms
from cqengine.proto import cqengine_pb2 as pb


FEW = 32  # ids up to which plain Python beats numpy's per-call cost (most questions)


def pack_bits(flags: Sequence[bool]) -> bytes:
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


def unpack_bits(data: bytes, n: int) -> Sequence[bool]:
    """The first n flags of a bit vector: a list for a few, else an array."""
    _answers(data, n)
    if n > FEW:
        return np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=n, bitorder="little").astype(bool)
    value = int.from_bytes(data, "little")
    return [bool(value >> i & 1) for i in range(n)]


def unpack_many(vectors: Sequence[bytes], counts: Sequence[int]) -> np.ndarray:
    """unpack_bits of each bit vector, the first counts[i] flags of the i-th, one after
    another: a round's answers to many QNs, unpacked at once."""
    for data, n in zip(vectors, counts):
        _answers(data, n)
    bits = np.unpackbits(np.frombuffer(b"".join(vectors), dtype=np.uint8), bitorder="little").view(bool)
    sizes = np.array([len(data) for data in vectors], dtype=np.intp)
    return bits[ranges(8 * (np.cumsum(sizes) - sizes), counts)]


SMALL = 16  # candidates up to which plain Python beats numpy's per-call cost


def resolution(block: Block, present: np.ndarray, batch: int = 1) -> "Resolution | SmallResolution":
    """A QN's resolution of its candidates, knowing which of the block's terms are present
    (a mask over block.terms): in bulk, or for the few candidates most QNs hold, the same
    rules on Python lists (asking the same questions in the same order)."""
    return (SmallResolution if len(block) <= SMALL else Resolution)(block, present, batch)


def _unknown_lists(block: Block, entries: list, codes: np.ndarray, unknown: np.ndarray) -> list:
    """Each of these queries (codes: a column each) with its unknown ids in asking order.
    Of a big block only the terms they hold are read."""
    if len(block.terms) <= 2 * codes.size:  # reading them all costs less than finding those
        ids, open_ = block.terms.tolist(), unknown.tolist()
    else:
        used = np.unique(codes)
        at = used.tolist()
        ids, open_ = dict(zip(at, block.terms[used].tolist())), dict(zip(at, unknown[used].tolist()))
    return [(e, [ids[c] for c in dict.fromkeys(column) if open_[c]]) for e, column in zip(entries, codes.T.tolist())]


class SmallResolution:
    """Resolution's rules on lists: each query's unknown ids in asking order, answers by id."""

    def __init__(self, block: Block, present: np.ndarray, batch: int = 1) -> None:
        self.batch = max(1, batch)
        self.block = block
        self.answers: dict[int, bool] = {}
        lists = _unknown_lists(block, block.entries.tolist(), block.codes, ~present)
        self.matched: list[pb.QueryEntry] = [e for e, unknown in lists if not unknown]
        self.rows: list[tuple[pb.QueryEntry, list[int]]] = [(e, unknown) for e, unknown in lists if unknown]

    @property
    def pending(self) -> int:
        return len(self.rows)

    def apply_bloom(self, bloom: BloomFilter) -> int:
        before = len(self.rows)
        ids = sorted({y for _, unknown in self.rows for y in unknown})
        if ids:  # the block's terms are tested once, at the filter positions it holds
            terms = self.block.terms
            passes = self.block.passes(bloom)
            held = dict(zip(ids, passes[terms.searchsorted(np.array(ids, dtype=np.uint64))].tolist()))
            self.rows = [(e, unknown) for e, unknown in self.rows if all(held[y] for y in unknown)]
        return before - len(self.rows)

    def question(self) -> list[int]:
        ask: set[int] = set()
        for _, ids in self.rows:
            ask.update([y for y in ids if y not in self.answers][:self.batch])
        return sorted(ask)

    def answer(self, ids: Sequence[int], present: Sequence[bool]) -> None:
        self.answers.update(zip(ids, map(bool, present)))
        rows = []
        for e, unknown in self.rows:
            told = [self.answers.get(y) for y in unknown]
            if False in told:
                continue
            if None in told:
                rows.append((e, unknown))
            else:
                self.matched.append(e)
        self.rows = rows


class Resolution:
    """One QN's resolution of a block of candidates.

    What is known of each distinct term (asked? absent?) lives in arrays over the block's
    terms; `rows` are the queries still undecided.
    """

    def __init__(self, block: Block, present: np.ndarray, batch: int = 1) -> None:
        self.batch = max(1, batch)
        self.block = block
        self.unknown = ~present  # per term: not known present
        self.waiting = self.unknown.copy()  # per term: unknown and not asked yet
        self.asked = np.zeros(len(block.terms), dtype=bool)
        self.absent = np.zeros(len(block.terms), dtype=bool)
        open_rows = any_per_query(self.unknown[block.codes])
        self.matched: list[pb.QueryEntry] = block.entries[~open_rows].tolist()  # all known present
        self.rows = open_rows.nonzero()[0]
        self.codes = block.codes.compress(open_rows, axis=1)
        self._asking, self._question = np.zeros(0, dtype=np.intp), None

    @property
    def pending(self) -> int:
        return len(self.rows)

    def apply_bloom(self, bloom: BloomFilter) -> int:
        """Drop queries the filter rules out; returns how many went."""
        return self.rule_out(self.block.passes(bloom))

    def rule_out(self, passes: np.ndarray) -> int:
        """Drop queries with an unknown term that `passes` (a mask over the block's terms)
        rules out; returns how many went."""
        self.absent |= self.unknown & ~passes
        out = any_per_query(self.absent[self.codes])
        self._keep(~out)
        return int(np.count_nonzero(out))

    def question(self) -> list[int]:
        """The ids to ask about this round, sorted: each pending query's next `batch`
        unasked unknown ids; empty when every query is decided."""
        self._asking = self._next()
        self._question = self.block.terms[self._asking].tolist()
        return self._question

    def answer(self, ids: Sequence[int], present: Sequence[bool]) -> None:
        at = self._asking if ids is self._question else \
            np.searchsorted(self.block.terms, np.array(ids, dtype=np.uint64))
        self.learn(at, np.asarray(present, dtype=bool))

    def rounds(self, present: np.ndarray) -> Iterator[np.ndarray]:
        """Resolve to the end, told the answers (`present`, a mask over the block's terms)
        instead of asking them: where in the terms each round's ids are."""
        while len(self.rows):
            at = self._next()
            yield at
            self.learn(at, present[at])

    def _next(self) -> np.ndarray:
        """Where (in the block's terms) this round's ids are."""
        codes = self.codes
        waiting = self.waiting[codes]  # a pending query always has one
        ask = np.zeros(len(self.block.terms), dtype=bool)
        if self.batch == 1:  # the common case, without a cumulative sum
            ask[codes[waiting.T.argmax(axis=1), np.arange(codes.shape[1])]] = True
        else:
            ask[codes[waiting & (np.cumsum(waiting, axis=0) <= self.batch)]] = True
        return ask.nonzero()[0]

    def learn(self, at: np.ndarray, present: np.ndarray) -> None:
        """The answers for the terms at `at` (places in its terms, ascending): decide the
        queries they decide."""
        self.asked[at] = True
        self.waiting[at] = False
        self.absent[at[~present]] = True
        codes = self.codes
        dropped = any_per_query(self.absent[codes])
        done = ~dropped & ~any_per_query(self.waiting[codes])
        self.matched += self.block.entries[self.rows[done]].tolist()
        self._keep(~dropped & ~done)

    def _keep(self, keep: np.ndarray) -> None:
        self.rows = self.rows[keep]
        self.codes = self.codes.compress(keep, axis=1)  # the pending queries' codes, in step with rows


def first_asked(columns: np.ndarray, at: np.ndarray, offset: np.ndarray | int, unknown: np.ndarray,
                batch: int) -> tuple[np.ndarray, np.ndarray]:
    """What a first round asks of the queries in these columns (their codes plus `offset`
    are places in `unknown`): pairs of query (its place in `at`) and code, each query's first
    `batch` unknown codes in asking order (a short query's padding, which repeats its first
    code, counting as Resolution counts it). Read a row of codes at a time: asked rarest
    first, the first unknown code is mostly in the first row or two, so few queries are
    read whole. A query that asks nothing has every term known present."""
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


class InStep:
    """Resolutions of several QNs' blocks asked in step (a shell running many QNs: the
    simulator, cqengine.engine.resolve_together): their blocks side by side, each part's
    terms apart from every other's, so the rounds go together and in each a part asks
    just what its own Resolution would, and is answered by its own DN. Pruning too is
    done for all parts at once: a part's candidates are its block's queries without a
    term it knows absent (cqengine.announce.may_match). One round of thousands of
    queries costs about what one of a few does.

    As in Stack, the first round is worked out from each query's first unknown ids alone
    (first_asked), and a filter's rule-outs read a row at a time; only the queries left
    after the first round's answers are resolved whole, by one Resolution."""

    def __init__(self, parts: Sequence[tuple[Sequence[Block], Knowledge]], batch: int = 1) -> None:
        """Parts: a QN's blocks, those of its inverted lists under its local ids in key order
        (InvertedIndex.lists: its queries as one block of them would hold them), and what it
        knows of the document. A part's terms are its blocks' merged."""
        merged = [union_terms(lists) if len(lists) > 1 else (lists[0].terms, None) for lists, _ in parts]
        self.term_start = np.concatenate([[0], np.cumsum([len(terms) for terms, _ in merged])])
        self.terms = np.concatenate([terms for terms, _ in merged])
        queries = np.array([sum(map(len, lists)) for lists, _ in parts])
        self.query_start = np.concatenate([[0], np.cumsum(queries)])
        self.parts, self.batch = len(parts), max(1, batch)
        width = max(b.codes.shape[0] for lists, _ in parts for b in lists)
        columns = np.empty((width, int(self.query_start[-1])), dtype=np.intp)  # theirs side by side
        self.lists: list[list[tuple[Block, np.ndarray | slice]]] = []  # per part: each block, its terms' places
        # every block, and the column its queries begin at: a match is read off its block,
        # not off all the parts' entries joined (thousands, where a document matches hundreds)
        self.blocks: list[Block] = []
        starts, at = [], 0
        for (lists, _), (_, inverse), t in zip(parts, merged, self.term_start.tolist()):
            mine, start = [], 0
            for b in lists:
                end, w = at + len(b), b.codes.shape[0]
                if inverse is None:
                    places: np.ndarray | slice = slice(t, t + len(b.terms))
                    np.add(b.codes, t, out=columns[:w, at:end])  # the part's codes among all terms
                else:
                    places = inverse[start:start + len(b.terms)] + t
                    columns[:w, at:end] = places[b.codes]
                    start += len(b.terms)
                columns[w:, at:end] = columns[0, at:end]  # padded as a block pads a short query: its first code again
                mine.append((b, places))
                self.blocks.append(b)
                starts.append(at)
                at = end
            self.lists.append(mine)
        self.block_start, self.queries = np.array(starts + [at]), at
        absent, self.present = known_in_parts(self.terms, self.term_start, [know for _, know in parts])
        kept = ~any_per_query(absent[columns]) if absent.any() else np.ones(columns.shape[1], dtype=bool)
        self.candidates = np.bincount(np.repeat(np.arange(self.parts), queries)[kept], minlength=self.parts)
        self.columns = columns
        kept = kept.nonzero()[0]
        self.asker, self.code = first_asked(columns, kept, 0, ~self.present, self.batch)
        self.asker = kept[self.asker]  # as places among the parts' queries
        open_ = np.zeros(self.queries, dtype=bool)
        open_[self.asker] = True
        self.open = open_.nonzero()[0]  # the queries left to ask about, before the first round
        self.unasked = kept[~open_[kept]]  # every term known present: matched without asking
        self.res: Resolution | None = None  # the queries left after the first round

    def passes(self, filters: Sequence[tuple[int, BloomFilter | None]]) -> np.ndarray:
        """Over the parts' terms: which the filter each of these parts received holds
        (None: none came, so none; a part not given: all). The parts that heard the
        same filter (a document's QNs all do) test all their blocks' terms at once."""
        out = np.ones(len(self.terms), dtype=bool)
        heard: dict[int, tuple[BloomFilter, list[int]]] = {}
        for p, bloom in filters:
            if bloom is None:
                out[self.term_start[p]:self.term_start[p + 1]] = False
            else:
                heard.setdefault(id(bloom), (bloom, []))[1].append(p)
        for bloom, parts in heard.values():
            blocks = [(b, places) for p in parts for b, places in self.lists[p]]
            positions = np.concatenate([b.bloom_positions(bloom.bits, bloom.hashes) for b, _ in blocks], axis=1)
            places = np.concatenate([np.arange(at.start, at.stop) if isinstance(at, slice) else at for _, at in blocks])
            out[places] = bloom.holds_positions(positions)  # a term of several blocks: the same answer each time
        return out

    def pending(self) -> np.ndarray:
        """Per part: its queries still undecided."""
        rows = self.open if self.res is None else self.res.block.entries[self.res.rows]
        return np.diff(rows.searchsorted(self.query_start))

    def rule_out(self, passes: np.ndarray) -> None:
        """Before the first round: drop queries with an unknown term that `passes` (over the
        parts' terms side by side) rules out. No term known present fails a filter."""
        self.open = self.open[~fail_any(self.columns, self.open, 0, ~passes)]
        keep = np.zeros(self.queries, dtype=bool)
        keep[self.open] = True
        self.code = self.code[keep[self.asker]]
        self.asker = self.asker[keep[self.asker]]

    def questions(self) -> list[tuple[int, np.ndarray, list[int]]]:
        """This round's questions, per part that asks: the part, where its ids are among
        the parts' terms, and the ids (sorted: what its Resolution's question() says)."""
        if self.res is None:
            ask = np.zeros(len(self.terms), dtype=bool)
            ask[self.code] = True
            at = ask.nonzero()[0]
        else:
            at = self.res._next() if self.res.pending else np.zeros(0, dtype=np.intp)
        cut = at.searchsorted(self.term_start).tolist()
        ids = self.terms[at].tolist()
        return [(p, at[a:b], ids[a:b]) for p, (a, b) in enumerate(zip(cut, cut[1:])) if b > a]

    def learn(self, at: np.ndarray, present: np.ndarray) -> None:
        """The answers for the terms at `at` (ascending, among the parts' terms)."""
        if self.res is not None:
            self.res.learn(at, present)
            return
        told = np.zeros(len(self.terms), dtype=bool)  # answered absent
        told[at[~present]] = True
        ended = np.zeros(self.queries, dtype=bool)
        ended[self.asker[told[self.code]]] = True  # heard one of its own first ids is absent
        rest = self.open[~ended[self.open]]
        # its entries are places among the parts' queries, so that its matches say whose they are
        self.res = Resolution(Block(rest, self.terms, self.columns[:, rest]), self.present, self.batch)
        self.res.learn(at, present)

    def matched(self) -> list[list]:
        """Per part, the entries it matched so far, in the order its Resolution matches them."""
        places = np.concatenate([self.unasked, np.array(self.res.matched if self.res else [], dtype=np.intp)])
        part = self.query_start.searchsorted(places, side="right") - 1
        block = self.block_start.searchsorted(places, side="right") - 1
        out: list[list] = [[] for _ in range(self.parts)]
        for p, b, row in zip(part.tolist(), block.tolist(), (places - self.block_start[block]).tolist()):
            out[p].append(self.blocks[b].entries[row])
        return out


def fail_any(columns: np.ndarray, at: np.ndarray, offset: np.ndarray | int, fails: np.ndarray) -> np.ndarray:
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
