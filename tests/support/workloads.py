"""Small skewed workloads for the engine on the simulator: a Zipfian corpus of a few
dozen documents over a small vocabulary and queries built so that many match and many
nearly match (pruning and resolution both have work to do), with the matcher's answer."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from functools import cache

from cqengine.core.terms.settings import Settings
from cqengine.evaluation.measuring.sim import EngineSimulator
from cqengine.evaluation.setup.matcher import document_sequence, document_terms, holds, matches
from cqengine.text.analysis import analyze
from cqengine.text.corpus import generate_corpus
from cqengine.text.trec import TrecDoc

# the index strategies and the resolutions: a test over a ring runs each of them
STRATEGIES = ("ri", "oi", "mhi", "sap-mhi")
RESOLUTIONS = ("td", "bf")

# (vocabulary size, mean distinct terms per document, documents, queries) per corpus seed
SHAPES = {0: (60, 10, 24, 50), 1: (120, 25, 30, 60), 2: (300, 40, 24, 60), 3: (90, 18, 30, 70)}


@dataclass(frozen=True)
class Workload:
    docs: tuple[TrecDoc, ...]
    terms: dict[str, frozenset[str]]  # docno -> analyzed terms (the oracle's view)
    queries: tuple[str, ...]  # query texts, as a subscriber types them
    df: dict[str, int]  # document frequency of every analyzed term
    popular: frozenset[str]  # the top 10% most frequent terms

    def oracle(self, subs: dict[int, list[str]], docnos=None) -> set[tuple[int, str]]:
        docs = self.terms if docnos is None else {d: self.terms[d] for d in docnos}
        return matches(subs, docs)


@cache
def workload(corpus_seed: int, query_seed: int = 0) -> Workload:
    vocab_size, mean_terms, n_docs, n_queries = SHAPES[corpus_seed]
    docs = tuple(
        generate_corpus(n_docs, seed=corpus_seed + 11, vocab_size=vocab_size, mean_terms=mean_terms)
    )
    terms = {d.docno: document_terms(d.text, d.title) for d in docs}
    df = Counter(t for have in terms.values() for t in have)
    ranked = [t for t, _ in sorted(df.items(), key=lambda p: (-p[1], p[0]))]
    frequent = ranked[: max(4, len(ranked) // 6)]
    popular = frozenset(ranked[: max(1, len(ranked) // 10)])
    rng = random.Random(query_seed * 7919 + corpus_seed)
    queries = []
    for i in range(n_queries):
        n = rng.randint(1, 4)
        roll = rng.random()
        if roll < 0.55:  # frequent terms: these match often
            words = rng.sample(frequent, min(n, len(frequent)))
        elif roll < 0.9:  # anything in the corpus: mostly near misses
            words = rng.sample(ranked, n)
        else:  # one term no document has: must never match
            words = rng.sample(frequent, n - 1) + [f"zzq{i}x"]
        if rng.random() < 0.1:
            words = [w.upper() for w in words] + ["the", "and"]  # case and stop words vanish
        queries.append(" ".join(words))
    queries += queries[:3]  # the same query twice: two subscriptions, both alerted
    return Workload(docs, terms, tuple(queries), dict(df), popular)


def make_settings(wl: Workload, **kw) -> Settings:
    return Settings(df=wl.df, popular=wl.popular, **kw)


def subscribe_all(sim: EngineSimulator, wl: Workload, via=None) -> dict[int, list[str]]:
    """Subscribe every query; returns subscription id -> analyzed terms (the oracle's view)."""
    subs = {}
    for q in wl.queries:
        reply = sim.subscribe(q, via=via)
        assert list(reply.terms) == analyze(q)
        assert reply.index_term in reply.terms
        assert reply.subscription_id not in subs
        subs[reply.subscription_id] = analyze(q)
    return subs


def subscribe_through_every_node(sim: EngineSimulator, wl: Workload) -> dict[int, list[str]]:
    """Subscribe every query, through each node in turn (as clients spread over a ring
    do); subscription id -> its terms as the node analyzed them."""
    vias = sorted(sim.engines)
    subs = {}
    for i, q in enumerate(wl.queries):
        reply = sim.subscribe(q, via=vias[i % len(vias)])
        subs[reply.subscription_id] = list(reply.terms)
    return subs


def boolean_queries(wl: Workload, seed: int = 0, n: int = 60) -> list[str]:
    """Queries in the query language over the workload's words (boolean_queries_of)."""
    return boolean_queries_of(wl.docs, wl.df, seed, n)


def boolean_queries_of(docs, df, seed: int = 0, n: int = 60) -> list[str]:
    """Queries in the query language over these documents' words: OR, NOT, phrases (runs
    of a document's own words, so that some match), groups, each form as often."""
    rng = random.Random(seed)
    words = sorted({w for d in docs for w in d.text.split()})
    frequent = sorted(df, key=lambda t: (-df[t], t))[:12]

    def phrase() -> str:
        doc = rng.choice(docs).text.split()
        at, k = rng.randrange(len(doc) - 2), rng.randint(2, 3)
        return '"' + " ".join(doc[at : at + k]) + '"'

    def word() -> str:
        return rng.choice(frequent) if rng.random() < 0.6 else rng.choice(words)

    forms = [
        lambda: f"{word()} OR {word()}",
        lambda: f"{word()} -{word()}",
        lambda: f"{word()} NOT {phrase()}",
        lambda: phrase(),
        lambda: f"({word()} | {word()}) {word()}",
        lambda: f"{phrase()} OR {word()} -{word()}",
        lambda: f"{word()} {word()} -({word()} OR {phrase()})",
        lambda: f"{word()} the -and",  # stop words left out
    ]
    out = [forms[i % len(forms)]() for i in range(n)]
    return out + out[:3]  # the same query twice: two subscriptions, both alerted


def boolean_oracle(wl: Workload, subs: dict[int, str], docnos=None) -> set[tuple[int, str]]:
    """(subscription, docno) of every alert the matcher says these queries (by
    subscription id) owe for the workload's documents (all, or these)."""
    return boolean_expected(subs, [d for d in wl.docs if docnos is None or d.docno in docnos])


def boolean_expected(subs: dict[int, str], docs) -> set[tuple[int, str]]:
    """(subscription, docno) of every alert the matcher says these queries owe."""
    return {
        (sub, d.docno)
        for d in docs
        for sub, q in subs.items()
        if holds(q, document_sequence(d.text, d.title))
    }


def live_corpus(docs: int, queries: int, seed: int, vocab: int) -> tuple[list, list[str]]:
    """A small generated corpus and Skew queries (mean size 2) drawn from it, as texts: what
    the live-ring tests subscribe and publish."""
    from cqengine.evaluation.setup.matcher import document_frequencies
    from cqengine.text.corpus import generate_corpus
    from cqengine.text.workload import generate_queries

    corpus = list(generate_corpus(docs, seed=seed, vocab_size=vocab, mean_terms=30))
    df = document_frequencies(corpus)
    drawn = generate_queries(df, queries, "skew", mean_size=2.0, seed=seed)
    return corpus, [" ".join(q) for q in drawn]
