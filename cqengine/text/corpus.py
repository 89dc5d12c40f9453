"""A synthetic TREC corpus with the statistics that matter to the engine.

The paper's experiments depend on how many distinct terms a document has and on how
skewed term frequencies are (a few terms are in most documents, most terms in few). This
generator reproduces both without shipping a real collection:

* a vocabulary of pronounceable pseudo-words (consonant+vowel syllables). Words end in
  a, i, o or u — never e, s or y — so Snowball leaves almost all of them alone, and any
  word whose analyzed term is a stop word or collides with an earlier word's term is
  replaced, so every vocabulary word is exactly one distinct term;
* term popularity Zipfian over vocabulary rank (weight 1 / rank**zipf_s);
* the number of distinct terms per document log-normal with the requested mean (real
  document lengths are right-skewed: many short articles, a few long ones).

Only the standard library is used (the engine does not depend on numpy), and the output
is a pure function of the arguments.
"""

from __future__ import annotations

import math
import random
from bisect import bisect
from collections.abc import Callable, Iterator
from itertools import accumulate, islice
from os import PathLike
from pathlib import Path

from cqengine.text.analysis import analyze
from cqengine.text.trec import TrecDoc, write_trec

__all__ = ["generate_corpus", "make_vocabulary", "write_corpus"]

_CONSONANTS = "bdfghjklmnprstvz"
_VOWELS = "aiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]
_SIGMA = 0.5  # spread of log(length): sd of the length is about 53% of its mean
_REPEAT = 0.4  # extra word occurrences per distinct word, so text reads like text


def make_vocabulary(size: int, rng: random.Random) -> list[str]:
    """`size` pseudo-words that analyze to `size` distinct non-stop-word terms."""
    if size > 2_000_000:
        raise ValueError(f"vocab_size {size} is too large for the syllable scheme")
    words: list[str] = []
    terms: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choices(_SYLLABLES, k=rng.choice((2, 3, 3, 4))))
        analyzed = analyze(word)
        if len(analyzed) == 1 and analyzed[0] not in terms:
            terms.add(analyzed[0])
            words.append(word)
    return words


def _draw_length(rng: random.Random, mean: float, limit: int) -> int:
    """Distinct terms in one document: log-normal with the given mean, in [1, limit]."""
    mu = math.log(mean) - _SIGMA * _SIGMA / 2
    return max(1, min(limit, round(rng.lognormvariate(mu, _SIGMA))))


def _draw_terms(rng: random.Random, k: int, vocab: list[str], cum: list[float]) -> list[str]:
    """k distinct words, each draw Zipf-weighted (bisect over cumulative weights)."""
    total = cum[-1]
    last = len(cum) - 1
    chosen: dict[str, None] = {}
    rand = rng.random
    while len(chosen) < k:
        chosen[vocab[min(bisect(cum, rand() * total), last)]] = None
    return list(chosen)


def _render_text(rng: random.Random, words: list[str]) -> str:
    """Sentences of 5-15 words using every word once plus some repeats."""
    tokens = words + rng.choices(words, k=int(len(words) * _REPEAT))
    rng.shuffle(tokens)
    sentences = []
    i = 0
    while i < len(tokens):
        n = rng.randint(5, 15)
        sentence = " ".join(tokens[i : i + n])
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        i += n
    # a paragraph break now and then, as in news text
    lines = [" ".join(sentences[j : j + 4]) for j in range(0, len(sentences), 4)]
    return "\n".join(lines)


def generate_corpus(
    n_docs: int,
    seed: int = 1,
    vocab_size: int = 46654,
    mean_terms: float = 178.0,
    zipf_s: float = 1.0,
) -> Iterator[TrecDoc]:
    """`n_docs` documents GEN-000001, GEN-000002, ...; the same arguments give the same docs.

    Each document has about `mean_terms` distinct analyzed terms on average (log-normal
    spread), drawn Zipf(`zipf_s`) from a `vocab_size`-word vocabulary, and a 3-8 word
    title made of its own words.
    """
    if n_docs < 0 or vocab_size < 1 or mean_terms <= 0:
        raise ValueError("n_docs must be >= 0, vocab_size >= 1 and mean_terms > 0")
    rng = random.Random(seed)
    vocab = make_vocabulary(vocab_size, rng)
    cum = list(accumulate(1.0 / (rank**zipf_s) for rank in range(1, vocab_size + 1)))
    # Long tails beyond half the vocabulary would make distinct draws crawl; real
    # documents never come near that anyway.
    limit = max(1, vocab_size // 2)
    for i in range(1, n_docs + 1):
        words = _draw_terms(rng, _draw_length(rng, mean_terms, limit), vocab, cum)
        title = rng.sample(words, min(len(words), rng.randint(3, 8)))
        yield TrecDoc(
            docno=f"GEN-{i:06d}",
            text=_render_text(rng, words),
            title=" ".join(w.capitalize() for w in title),
        )


def write_corpus(path: str | PathLike[str], n_docs: int, seed: int = 1, **kw: float) -> int:
    """Generate a corpus straight into a TREC file (gzip for .gz); returns the count."""
    return write_trec(generate_corpus(n_docs, seed=seed, **kw), path)  # type: ignore[arg-type]


def write_corpus_files(
    directory: str | PathLike[str],
    n_docs: int,
    files: int,
    seed: int = 1,
    progress: Callable[[int], None] | None = None,
    **kw: float,
) -> list[Path]:
    """The same corpus split over `files` gzip TREC files (part-00000.trec.gz, ...), so a
    Spark job can read them in parallel; `progress` hears the documents written so far."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    docs = generate_corpus(n_docs, seed=seed, **kw)
    paths, written = [], 0
    for k in range(files):
        share = n_docs // files + (k < n_docs % files)
        path = out / f"part-{k:05d}.trec.gz"
        written += write_trec(islice(docs, share), path)
        paths.append(path)
        if progress:
            progress(written)
    return paths
