"""The fast matcher experiments check against gives the brute-force matcher's answer."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cqengine.evaluation.matcher import match_documents, matches

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
