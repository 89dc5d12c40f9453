"""A published document as the engine keeps it: analyzed, its snippet cut from its body."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cqengine.core.basis.errors import EngineError
from cqengine.core.basis.limits import SNIPPET
from cqengine.core.frame.documents import prepare, snippet
from cqengine.text.analysis import analyze

texts = st.text(alphabet=st.sampled_from("ab \t\n\u00a0é"), max_size=3 * SNIPPET) | st.builds(
    lambda w, n: (w + "  \n") * n, st.text(alphabet="xyz ", max_size=9), st.integers(0, 300)
)


@given(texts)
def test_the_snippet_is_the_start_of_the_whole_body_normalized(body):
    assert snippet(body) == " ".join(body.split())[:SNIPPET]


def test_a_document_is_analyzed_with_its_title_and_refused_when_too_big_or_not_utf8():
    doc = prepare("D1", b"Floods  hit\nthe coast", "Storm", 1000)
    assert doc.terms == analyze("Storm\nFloods hit the coast")
    assert doc.snippet == "Floods hit the coast"
    with pytest.raises(EngineError, match="limit"):
        prepare("D2", b"x" * 1001, "", 1000)
    with pytest.raises(EngineError, match="UTF-8"):
        prepare("D3", b"\xff", "", 1000)
