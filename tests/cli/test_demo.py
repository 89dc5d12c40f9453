"""The bundled sample corpus is what its recipe generates (it is generated text, not data)."""

from support.repo import ROOT

from cqengine.demo import SAMPLE, SAMPLE_RECIPE, sample_corpus
from cqengine.text.corpus import write_corpus


def test_bundled_sample_is_fresh(tmp_path):
    recipe = dict(SAMPLE_RECIPE)
    n = recipe.pop("n_docs")
    fresh = tmp_path / SAMPLE
    write_corpus(fresh, n, **recipe)
    bundled = ROOT / "cqengine" / "data" / SAMPLE
    assert bundled.read_bytes() == fresh.read_bytes(), "regenerate cqengine/data/sample.trec.gz"
    assert len(sample_corpus()) == n
