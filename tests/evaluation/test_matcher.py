"""The fast matcher experiments check against gives the brute-force matcher's answer."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqengine.evaluation.setup.matcher import (
    document_frequencies,
    document_sequence,
    holds,
    match_documents,
    match_queries,
    matches,
)
from cqengine.text.corpus import generate_corpus
from cqengine.text.workload import boolean_workload

terms = st.sampled_from([f"t{i}" for i in range(12)])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(terms, max_size=5), max_size=25),
    st.lists(st.frozensets(terms, max_size=10), max_size=12),
)
def test_match_documents_equals_brute_force(queries, docs):
    fast = match_documents(queries, docs)
    brute = matches(dict(enumerate(queries)), {d: have for d, have in enumerate(docs)})
    assert {(q, d) for d, hits in enumerate(fast) for q in hits} == brute
    assert all(hits == sorted(hits) for hits in fast)


# ---- the query language, read off its tree ------------------------------------------------

DOC = "The levee held after the storm. Later, the storm passed the levee"  # leve held storm ...


@pytest.mark.parametrize(
    ("query", "matched"),
    [
        ('"levee held"', True),
        ('"the levee, held"', True),  # stop words and punctuation are no part of a phrase
        ('"held storm"', True),  # a phrase across the document's stop words
        ('"passed the levee"', True),  # a phrase at the end of the document
        ('"levee passed"', False),
        ('"storm levee"', False),  # both there, never in a row
        ('levee -"storm held"', True),  # NOT of a phrase that is not there
        ('levee -"held storm"', False),  # NOT of a phrase that is
        ("levee OR typhoon", True),
        ("typhoon OR drought", False),
        ("levee -storm", False),
        ("(typhoon OR storm) -(drought OR flood)", True),
        ("levee NOT the", True),  # a stop word is dropped, NOT with it
        ("e-mail", False),  # a word of several terms is their phrase
    ],
)
def test_the_matcher_reads_a_query_as_the_language_defines_it(query, matched):
    assert holds(query, document_sequence(DOC)) is matched


def test_match_queries_equals_holds_for_each_query_and_document():
    docs = list(generate_corpus(30, seed=3, vocab_size=200, mean_terms=20))
    df = document_frequencies(docs)
    queries = boolean_workload(df, 200, "skew", 2.0, 4, 1.0, [d.text for d in docs])
    words = sorted(df, key=lambda t: -df[t])[:6]
    queries += [  # what needs no term, stop words in every place, groups in groups
        f"-{words[0]}",
        f"the OR {words[1]}",
        f"-({words[0]} {words[1]}) OR ({words[2]} -the)",
        f"({words[3]} OR -{words[4]}) ({words[5]} OR {words[0]})",
        f'"{words[1]} the {words[2]}" OR NOT {words[3]}',
    ]
    sequences = [document_sequence(d.text, d.title) for d in docs]
    fast = match_queries(queries, sequences)
    brute = [[i for i, q in enumerate(queries) if holds(q, s)] for s in sequences]
    assert fast == brute
    assert sum(map(len, brute)) > 50  # not vacuous
