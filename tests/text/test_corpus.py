"""The synthetic corpus: deterministic, Zipfian, the requested document size, valid TREC."""

import random
import statistics
from collections import Counter

import pytest

from cqengine.text.analysis import STOP_WORDS, analyze
from cqengine.text.corpus import generate_corpus, make_vocabulary, write_corpus
from cqengine.text.trec import iter_trec


@pytest.fixture(scope="module")
def sample():
    """300 documents with the default parameters, and their analyzed terms."""
    docs = list(generate_corpus(300, seed=7))
    return docs, [analyze(d.text) for d in docs]


def test_same_seed_same_documents_different_seed_different():
    a = list(generate_corpus(20, seed=3, vocab_size=2000))
    assert a == list(generate_corpus(20, seed=3, vocab_size=2000))
    b = list(generate_corpus(20, seed=4, vocab_size=2000))
    assert [d.text for d in a] != [d.text for d in b]


def test_docnos_and_sizes():
    docs = list(generate_corpus(25, vocab_size=500, mean_terms=20))
    assert [d.docno for d in docs] == [f"GEN-{i:06d}" for i in range(1, 26)]
    assert list(generate_corpus(0)) == []
    for d in docs:
        assert min(3, len(analyze(d.text))) <= len(d.title.split()) <= 8
        assert set(analyze(d.title)) <= set(analyze(d.text))  # title words come from the doc


def test_vocabulary_analyzes_to_distinct_non_stop_terms():
    vocab = make_vocabulary(46654, random.Random(1))
    assert len(set(vocab)) == len(vocab) == 46654
    terms = [t for w in vocab for t in analyze(w)]
    assert len(set(terms)) >= 0.95 * len(vocab)
    assert not STOP_WORDS & set(terms)


def test_mean_unique_terms_near_target(sample):
    _, terms = sample
    mean = statistics.mean(len(t) for t in terms)
    assert abs(mean - 178.0) <= 0.1 * 178.0
    assert min(len(t) for t in terms) >= 1
    assert statistics.pstdev(len(t) for t in terms) > 30  # lengths vary, as in real text


def test_document_frequencies_are_zipfian(sample):
    _, terms = sample
    df = sorted(Counter(t for doc in terms for t in doc).values(), reverse=True)
    median = df[len(df) // 2]
    assert df[0] >= 50 * median
    assert df[0] > 0.9 * len(terms)  # the top term is in nearly every document


def test_text_repeats_words_and_reads_as_sentences(sample):
    docs, terms = sample
    doc = docs[0]
    assert len(doc.text.split()) > len(terms[0])
    assert doc.text.endswith(".") and doc.text[0].isupper()


def test_write_corpus_round_trips(tmp_path):
    path = tmp_path / "gen.trec.gz"
    assert write_corpus(path, 30, seed=5, vocab_size=3000, mean_terms=40) == 30
    back = [(d.docno, d.title, d.text) for d in iter_trec(path)]
    again = generate_corpus(30, seed=5, vocab_size=3000, mean_terms=40)
    assert back == [(d.docno, d.title, d.text) for d in again]
