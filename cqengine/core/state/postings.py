"""Inverted lists compiled for bulk work: a block of queries as one matrix of term codes.

A QN prunes and resolves every query under a document's local ids at once. Done a term
at a time in Python that is the simulator's whole cost at paper scale (tens of thousands
of candidates per document), so each key's list is kept, beside its entries, as a block:
the distinct term ids of its queries (`terms`, sorted) and a (width x queries) matrix of
indices into them (`codes`): column i is query i's terms in the order Term Dialogue asks
them (rarest first when document frequencies are known, else by id). Whatever is learnt of
a term is then learnt once, in an array over `terms`, and read for every query by
indexing; a question about every query ("has it an absent term?") is then a reduction
over the few rows, which numpy does as whole-vector operations (over the many columns it
would go query by query). A short query is padded by repeating its own first code, which
changes nothing: a term counts once however often a query holds it. A key's block is
built when its list is first consulted after a change (or, in a simulated ring about to
be forked for many runs, every key's at once: cqengine.evaluation.passes.rings).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from numpy.typing import NDArray

from chord.protocol.store import SortedKeyStore
from cqengine.core.state.journal import Journal
from cqengine.core.terms.bloom import positions_array
from cqengine.core.terms.queries import Signature, entry_slot, signature
from cqengine.proto import cqengine_pb2 as pb

Rarity = Callable[[int, str], float]  # (term id, term) -> document frequency
MERGED = 2  # an index keeps merged blocks of up to this many times the queries it holds
FEW = 32  # ids up to which plain Python beats numpy's per-call cost (most questions)
FEW_KEYS = 16  # keys up to which InvertedIndex.lists looks each up (a QN of a large ring holds few)
# ((bits, hashes), a block's terms' filter positions by hash); (): none worked out yet
BloomPositions = tuple[tuple[int, int], NDArray[np.intp]] | tuple[()]


def ask_order(entry: pb.QueryEntry, rarity: Rarity | None) -> list[int]:
    """The entry's term ids in the order resolution asks them: a rare term is the likeliest
    to be absent, ending the query soonest."""
    if rarity is None:
        return list(entry.term_ids)
    return [y for _, y in sorted((rarity(y, t), y) for y, t in zip(entry.term_ids, entry.terms))]


# Per query (column) of a block's (width x queries) flags: is any set? ndarray.any(axis=0)
# without its Python wrapper, which costs as much as the work on a block's few rows.
any_per_query = partial(np.logical_or.reduce, axis=0)


def member(xs: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Elementwise: is x among sorted_ids? (np.isin's set-up costs more than small sets need.)"""
    if not len(sorted_ids):
        return np.zeros(xs.shape, dtype=bool)
    at = sorted_ids.searchsorted(xs)
    np.minimum(at, len(sorted_ids) - 1, out=at)
    found: np.ndarray = sorted_ids[at] == xs
    return found


def ranges(starts: np.ndarray, lengths: np.ndarray | Sequence[int]) -> NDArray[np.intp]:
    """The ranges [starts[i], starts[i] + lengths[i]) one after another, in one array."""
    lengths = np.asarray(lengths, dtype=np.intp)
    return np.repeat(
        np.asarray(starts, dtype=np.intp) - (np.cumsum(lengths) - lengths), lengths
    ) + np.arange(int(lengths.sum()))


def objects(items: Sequence[object]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = list(items)
    return out


def expand(
    entries: np.ndarray, members: np.ndarray | None, at: np.ndarray | list[int]
) -> list[pb.QueryEntry]:
    """The entries of the queries at these places: each merged query's members."""
    if members is None:
        found: list[pb.QueryEntry] = entries[at].tolist()
        return found
    return [e for group in members[at].tolist() for e in group]


@dataclass
class Block:
    """A key's queries, identical ones merged (cqengine.core.terms.queries.signature): one
    column each, its first entry in `entries`, all of them in `members` (None when no
    two are alike)."""

    entries: np.ndarray  # of pb.QueryEntry
    terms: np.ndarray  # uint64, sorted, distinct
    codes: np.ndarray  # (width, len(entries)) intp into terms: a column per query
    # ((bits, hashes), the terms' filter positions by hash): a key's terms stay put
    _bloom: BloomPositions = ()
    _subscriptions: bytes | None = None
    members: np.ndarray | None = None  # per column, the tuple of its entries
    # per column, None or the Block of the queries merged under it (over these terms), its
    # codes then their common first questions (cqengine.core.state.merging); None: no merges
    groups: np.ndarray | None = None
    # `members` of a block that merged none, once made (singles())
    _singles: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def subscriptions(self) -> bytes:
        """Its queries' subscription ids in order, as bytes: which queries it holds, as a
        key. Indexes of the same subscriptions ranked by the same document frequencies
        (a measurement pass's: cqengine.evaluation.passes.runs) ask each query's terms in the
        same order, so there blocks holding the same queries are the same."""
        if self._subscriptions is None:
            every = self.entries if self.members is None else self.all_entries()
            self._subscriptions = np.fromiter(
                map(entry_slot, every), dtype=np.uint64, count=len(every)
            ).tobytes()
        return self._subscriptions

    def all_entries(self) -> list[pb.QueryEntry]:
        """Every entry, the members of merged queries one after another."""
        if self.groups is not None:
            return [
                e
                for i, g in enumerate(self.groups.tolist())
                for e in (expand(self.entries, self.members, [i]) if g is None else g.all_entries())
            ]
        return expand(self.entries, self.members, np.arange(len(self.entries)))

    def singles(self) -> np.ndarray:
        """Its members: where it merged no queries, each entry alone, made once (a key's
        block outlives many documents, and a resolution beside a merged block needs them:
        made afresh, they were an eighth of a text ring's CPU)."""
        if self.members is not None:
            return self.members
        if self._singles is None:
            self._singles = objects([(e,) for e in self.entries])
        return self._singles

    def held(self) -> int:
        """How many entries it holds (merged queries count each member)."""
        if self.groups is not None:
            return len(self.all_entries())
        return len(self.entries) if self.members is None else sum(map(len, self.members))

    def bloom_positions(self, bits: int, hashes: int) -> NDArray[np.intp]:
        if not self._bloom or self._bloom[0] != (bits, hashes):
            self._bloom = ((bits, hashes), positions_array(self.terms, bits, hashes))
        return self._bloom[1]

    def set_bloom_positions(self, bits: int, hashes: int, positions: NDArray[np.intp]) -> None:
        """Its terms' filter positions for (bits, hashes), worked out for many blocks' terms
        at once (cqengine.evaluation.passes.rings), so that `bloom_positions` need not."""
        self._bloom = ((bits, hashes), positions)

    @classmethod
    def of(
        cls, entries: Sequence[pb.QueryEntry], rarity: Rarity | None = None, merge: bool = True
    ) -> Block:
        return cls.of_rows(objects(entries), [ask_order(e, rarity) for e in entries], merge)

    @classmethod
    def of_rows(cls, entries: np.ndarray, rows: list[list[int]], merge: bool = True) -> Block:
        """The block of these entries, whose term ids in asking order are `rows`; those
        alike merged, unless not to `merge`."""
        members = None
        if merge and len(entries) > 1:
            groups: dict[Signature, list[int]] = {}
            for i, e in enumerate(entries.tolist()):
                groups.setdefault(signature(e), []).append(i)
            if len(groups) < len(entries):
                firsts = [g[0] for g in groups.values()]
                members = objects([tuple(entries[g].tolist()) for g in groups.values()])
                entries, rows = entries[firsts], [rows[i] for i in firsts]
        width = max((len(r) for r in rows), default=1)
        ids = np.array([r + r[:1] * (width - len(r)) for r in rows], dtype=np.uint64)
        terms, codes = np.unique(ids, return_inverse=True)
        codes = np.ascontiguousarray(codes.reshape(len(rows), width).T)
        return cls(entries, terms, codes, members=members)

    @classmethod
    def concat(cls, blocks: Sequence[Block]) -> Block:
        if len(blocks) == 1:
            return blocks[0]
        if any(b.groups is not None for b in blocks):
            raise ValueError("blocks with merged queries are resolved a key at a time")
        terms, inverse = union_terms(blocks)
        width = max(b.codes.shape[0] for b in blocks)
        parts, start = [], 0
        bloom = blocks[0]._bloom
        made = bloom[0] if bloom else None  # (bits, hashes) of the first block's positions
        positions = np.empty((bloom[1].shape[0], len(terms)), dtype=np.intp) if bloom else None
        for b in blocks:
            mine = inverse[start : start + len(b.terms)]
            parts.append(widen(mine[b.codes], width))
            if positions is not None and b._bloom and b._bloom[0] == made:
                positions[:, mine] = b._bloom[1]
            else:
                positions = None
            start += len(b.terms)
        merged = cls(np.concatenate([b.entries for b in blocks]), terms, np.hstack(parts))
        merged.members = members_of(blocks)
        if made is not None and positions is not None:
            merged._bloom = (made, positions)
        held = [b._subscriptions for b in blocks if b._subscriptions is not None]
        if len(held) == len(blocks):
            merged._subscriptions = b"".join(held)
        return merged

    def select(self, keep: np.ndarray) -> Block:
        """The queries a boolean mask keeps (the terms stay: a superset is harmless)."""
        members = None if self.members is None else self.members[keep]
        groups = None if self.groups is None else self.groups[keep]
        codes = self.codes.compress(keep, axis=1)
        return Block(
            self.entries[keep], self.terms, codes, self._bloom, members=members, groups=groups
        )

    def __len__(self) -> int:
        return len(self.entries)


def members_of(blocks: Sequence[Block]) -> np.ndarray | None:
    """The blocks' members side by side (None if none of them merged any)."""
    if all(b.members is None for b in blocks):
        return None
    return np.concatenate([b.singles() for b in blocks])


def union_terms(blocks: Sequence[Block]) -> tuple[np.ndarray, np.ndarray]:
    """The blocks' terms merged (sorted, distinct), and where each of theirs, side by side,
    is among them: np.unique(..., return_inverse=True), but by a stable sort, which merges
    the blocks' already sorted terms instead of sorting them afresh."""
    ids = np.concatenate([b.terms for b in blocks])
    order = ids.argsort(kind="stable")
    ranked = ids[order]
    first = np.empty(len(ranked), dtype=bool)
    first[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=first[1:])
    inverse = np.empty(len(ids), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ranked[first], inverse


def widen(codes: np.ndarray, width: int) -> np.ndarray:
    if codes.shape[0] == width:
        return codes
    return np.vstack([codes, np.repeat(codes[:1], width - codes.shape[0], axis=0)])


class InvertedIndex(SortedKeyStore[pb.QueryEntry]):
    """The engine's inverted lists: key -> QueryEntry, plus each key's compiled block and
    the subscriptions it holds (a popular term's list is long: no scans to find one). Every
    change is told to the journal, if any: whichever way an entry comes or goes (indexed,
    unindexed, re-indexed, handed over), the journal sees it here."""

    def __init__(self, rarity: Rarity | None = None) -> None:
        super().__init__(encode=lambda e: e.SerializeToString(), decode=pb.QueryEntry.FromString)
        self.rarity = rarity
        self.merge = True  # queries alike in a list are one column of its block (Block)
        # (block, key) -> the block kept: cqengine.core.state.merging's, to merge queries that
        # ask the same first question into one column; None: kept as built
        self.merger: Callable[[Block, int], Block] | None = None
        self.journal: Journal | None = None
        self._blocks: dict[int, Block] = {}
        self._subs: dict[int, dict[int, pb.QueryEntry]] = {}  # key -> subscription -> its entry
        self._merged: OrderedDict[tuple[int, ...], tuple[list[Block], Block]] = (
            OrderedDict()
        )  # see blocks
        self._merged_size = 0
        self._held: np.ndarray | None = (
            None  # the keys with lists, as an array (None: to make again)
        )
        self.generation = 0  # changes so far: what is derived from the entries is current

    def block(self, key: int) -> Block | None:
        """The key's list as a block; None when nothing is indexed under it."""
        b = self._blocks.get(key)
        if b is None:
            entries = self._values.get(key)
            if not entries:
                return None
            b = self._blocks[key] = self.compiled(key, Block.of(entries, self.rarity, self.merge))
        return b

    def compiled(self, key: int, block: Block) -> Block:
        """The key's block as it is kept: its queries merged if the index merges them."""
        return block if self.merger is None else self.merger(block, key)

    def lists(self, keys: np.ndarray | Sequence[int]) -> list[Block]:
        """The blocks of the lists under these keys (uint64, ascending) that hold queries, in
        key order. A document's ids at a node mostly have no list there: they are found
        by one search among the keys held, not a lookup each."""
        if len(keys) <= FEW_KEYS:  # a lookup each costs less than the search's set-up
            return [b for b in map(self.block, keys) if b is not None]
        held = self._held
        if held is None:
            held = self._held = np.array(self._keys, dtype=np.uint64)
        keys = np.asarray(keys, dtype=np.uint64)
        if not len(held):
            return []
        at = np.minimum(held.searchsorted(keys), len(held) - 1)
        return [b for b in map(self.block, keys[held[at] == keys].tolist()) if b is not None]

    def blocks(self, keys: Sequence[int]) -> Block | None:
        """The lists under these keys as one block; None when nothing is indexed under any.
        A node sees the same keys together again and again (a document's frequent terms
        land on the same nodes), so merged blocks are kept, the least recently used
        going first once they hold MERGED times the index's queries."""
        lists = self.lists(keys)
        if len(lists) <= 1:
            return lists[0] if lists else None
        key = tuple(map(id, lists))  # the lists are kept with it: no other block takes their ids
        got = self._merged.get(key)
        if got is not None:
            self._merged.move_to_end(key)
            return got[1]
        merged = Block.concat(lists)
        self._merged[key] = (lists, merged)
        self._merged_size += len(merged)
        while self._merged_size > MERGED * len(self):
            _, (_, old) = self._merged.popitem(last=False)
            self._merged_size -= len(old)
        return merged

    def unbuilt(self) -> list[tuple[int, list[pb.QueryEntry]]]:
        """The keys whose lists have no block yet, with their entries: what a build of
        every key's block at once starts from (cqengine.evaluation.passes.rings, before a
        simulated ring is forked), handing each back by `adopt`."""
        return [
            (key, list(entries))
            for key, entries in self._values.items()
            if entries and key not in self._blocks
        ]

    def adopt(self, key: int, block: Block) -> None:
        """Keep a block built elsewhere of the key's list as it stands (see `unbuilt`) as
        the key's block: the block the list would make when first consulted. One of
        another list's size is refused."""
        held = len(self._values.get(key, ()))
        if block.held() != held:
            raise ValueError(f"a block of {block.held()} entries for a list of {held} at {key}")
        self._blocks[key] = block

    def holds(self, key: int, slot: int) -> bool:
        return slot in self._subs.get(key, ())

    def entry(self, key: int, slot: int) -> pb.QueryEntry | None:
        return self._subs.get(key, {}).get(slot)

    def versions_in(self, lo: int, hi: int) -> Iterator[tuple[int, int, int]]:
        """(key, slot, version) of each entry under keys in (lo, hi]."""
        for key in self.keys_in(lo, hi):
            for sub, e in self._subs.get(key, {}).items():
                yield key, sub, e.version

    def replace(self, key: int, entry: pb.QueryEntry) -> None:
        """Index the entry under key, instead of any entry of its slot there."""
        at = entry_slot(entry)
        if self.holds(key, at):
            self.remove(key, lambda old: entry_slot(old) == at)
        self.put(key, entry)

    def put(self, key: int, value: pb.QueryEntry) -> None:
        self.generation += 1
        self._held = None
        self._blocks.pop(key, None)
        self._forget_merged()
        self._subs.setdefault(key, {})[entry_slot(value)] = value
        super().put(key, value)
        if self.journal is not None:
            self.journal.indexed(key, value)

    def put_items(self, items: Iterable[tuple[int, bytes]]) -> None:
        """Entries handed over: one a node already holds (a restarted node's) is replaced."""
        for key, data in items:
            self.replace(key, self.decode(data))

    def remove(self, key: int, match: Callable[[pb.QueryEntry], bool]) -> int:
        journal = self.journal
        # the slots going, for the journal (only where there is one: the matching costs)
        subs = (
            {entry_slot(e) for e in self._values.get(key, ()) if match(e)}
            if journal is not None
            else set()
        )
        gone = super().remove(key, match)
        if gone:
            self._changed(key)
            if journal is not None:  # an entry of the same slot may stay (re-indexing)
                journal.unindexed(key, subs - self._subs.get(key, {}).keys())
        return gone

    def take_range(self, lo: int, hi: int) -> list[tuple[int, bytes]]:
        items = super().take_range(lo, hi)
        for key in {k for k, _ in items}:
            self._changed(key)
            if self.journal is not None:
                self.journal.unindexed(key, None)
        return items

    def _changed(self, key: int) -> None:
        self.generation += 1
        self._held = None
        self._blocks.pop(key, None)
        self._forget_merged()
        left = self._values.get(key)
        if left:
            self._subs[key] = {entry_slot(e): e for e in left}
        else:
            self._subs.pop(key, None)

    def _forget_merged(self) -> None:
        if self._merged:
            self._merged.clear()
            self._merged_size = 0
