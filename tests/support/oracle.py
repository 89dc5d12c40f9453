"""The brute-force matcher as the oracle: what subscribers must get, and the check that
they got exactly that, each alert once."""

from collections import Counter, defaultdict

from cqengine.evaluation.setup.matcher import document_terms, matches


def expected(subs, docs) -> set[tuple[int, str]]:
    """(subscription id, docno) of every alert the matcher says these subscriptions (the
    engine's replies: their ids and analyzed terms) owe for these documents."""
    return matches(
        {s.subscription_id: s.terms for s in subs},
        {d.docno: document_terms(d.text, d.title) for d in docs},
    )


def assert_exact(alerts: list[tuple[int, str]], want: set[tuple[int, str]]) -> None:
    """Every alert wanted came, none other, and none more than once."""
    dup = [a for a, n in Counter(alerts).items() if n > 1]
    assert not dup, f"alerted more than once: {dup[:5]}"
    got = set(alerts)
    assert got == want, (
        f"missing {len(want - got)} (e.g. {sorted(want - got)[:3]}), "
        f"wrong {len(got - want)} (e.g. {sorted(got - want)[:3]})"
    )


def assert_numbered(alerts) -> None:
    """Each subscription's alerts are numbered 0, 1, 2, ... without gap or repeat."""
    by_sub = defaultdict(list)
    for a in alerts:
        by_sub[a.subscription_id].append(a.seq)
    for seqs in by_sub.values():
        assert sorted(seqs) == list(range(len(seqs)))


def consecutive(sim, start: str, n: int) -> list[str]:
    """The simulated ring's node at `start` and the n - 1 after it, as the true ring has
    them (failed together: a home and its successors)."""
    nodes = sim.ring.oracle().nodes
    at = [node.address for node in nodes].index(start)
    return [nodes[(at + i) % len(nodes)].address for i in range(n)]
