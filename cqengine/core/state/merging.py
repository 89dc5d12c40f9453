"""Query merging (Crespo et al.'s, for keyword queries): the queries of a key's list whose
first questions agree are indexed as one merged column and split when it matches.

Crespo et al. merge queries whose answers overlap into one query whose answer holds each
of theirs, answer the merged query once and extract each member's answer from it. Here a
list's queries are resolved by Term Dialogue, each asking its terms rarest first
(cqengine.core.state.postings), and a candidate is a column presented to resolution. Queries
whose asking orders begin alike ask the same ids in the same rounds until they part; Term
Dialogue asks an id once whoever shares it, so they cost no more bytes together than one,
yet each is a candidate of its own. Merged, they are one column that asks their common
first questions (the merged query: every member's answer is in its answer), and split
into the members, each then asking the rest of its terms, only once every common
question is answered present. Most candidates fail on their first question, so a merged
column mostly ends as one candidate where its members were many.

Which queries to merge is Crespo's Clustering Algorithm with an exact distance: queries
are "near" when they ask the same first question (the key's own term aside: every
document that reaches the key holds it), and a cluster is merged whole, its merged query
the longest common prefix of their asking orders. Finer merges (Pair Merging or Directed
Search over a cluster's subsets) only add columns: a cluster's members share nothing
before their first question, and after it a merged sub-cluster splits no sooner than its
members would part. A merged column is pruned, or ruled out by a Bloom filter, only when
every member is (cqengine.core.resolution.resolution), so merging asks no id its members would not:
Term Dialogue's bytes stay the same, while candidates fall.
"""

from __future__ import annotations

import numpy as np

from cqengine.core.state.postings import Block, objects


def questions(column: list[int], key_code: int) -> list[int]:
    """A column's codes as it asks them: padding (a repeat of its first) and the key's own
    term left out."""
    return [c for c in dict.fromkeys(column) if c != key_code]


def common_prefix(rows: list[list[int]]) -> list[int]:
    first = rows[0]
    n = len(first)
    for row in rows[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first, row)) if a != b), min(n, len(row)))
    return first[:n]


def code_of(block: Block, key: int) -> int:
    """The key's term's code in the block (-1: none of its queries holds it)."""
    at = int(block.terms.searchsorted(np.uint64(key)))
    return at if at < len(block.terms) and int(block.terms[at]) == key else -1


def clusters(block: Block, key_code: int) -> list[list[int]]:
    """The block's columns by their first question (the key's term aside), in order of
    first appearance; a column that asks nothing but the key's term is alone."""
    by_first: dict[int, list[int]] = {}
    out: list[list[int]] = []
    for i, column in enumerate(block.codes.T.tolist()):
        asks = questions(column, key_code)
        if not asks:
            out.append([i])
        elif asks[0] in by_first:
            by_first[asks[0]].append(i)
        else:
            by_first[asks[0]] = [i]
            out.append(by_first[asks[0]])
    return out


def merged(block: Block, key: int) -> Block:
    """The block with each cluster of two or more columns merged into one (the block
    itself if none is)."""
    key_code = code_of(block, key)
    groups = clusters(block, key_code)
    if len(groups) == len(block):
        return block
    columns = block.codes.T.tolist()
    firsts: list[int] = []
    cores: list[list[int]] = []
    subs: list[Block | None] = []  # per column, the block merged under it (None: alone)
    for g in groups:
        firsts.append(g[0])
        if len(g) == 1:
            cores.append(columns[g[0]])
            subs.append(None)
            continue
        cores.append(common_prefix([questions(columns[i], key_code) for i in g]))
        subs.append(member_block(block, np.array(g)))
    width = max(len(c) for c in cores)
    codes = np.array([c + c[:1] * (width - len(c)) for c in cores], dtype=np.intp).T
    members = None
    if block.members is not None:
        members = block.members[firsts]  # a merged column's is its first member's: unused
    return Block(
        block.entries[firsts],
        block.terms,
        np.ascontiguousarray(codes),
        block._bloom,
        members=members,
        groups=objects(subs),
    )


def member_block(block: Block, columns: np.ndarray) -> Block:
    """The queries at these columns as a block over the same terms."""
    members = None if block.members is None else block.members[columns]
    return Block(
        block.entries[columns],
        block.terms,
        np.ascontiguousarray(block.codes[:, columns]),
        block._bloom,
        members=members,
    )
