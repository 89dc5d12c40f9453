"""The committed stubs are what `make protos` generates from protos/ now."""

from support.repo import ROOT, load_script


def load_generator():
    return load_script("protos/generate.py")


def test_committed_stubs_are_fresh(tmp_path):
    generate = load_generator()
    for fresh in generate.generate(tmp_path):
        committed = ROOT / fresh.relative_to(tmp_path)
        assert committed.exists(), f"{committed} missing: run `make protos`"
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"{committed} is stale: run `make protos`"
        )


def test_staleness_is_detected(tmp_path):
    generate = load_generator()
    for fresh in generate.generate(tmp_path):
        assert fresh.stat().st_size > 0
    # a changed proto gives different stubs, so the check above can fail
    altered = tmp_path / "altered"
    protos = altered / "protos"
    protos.mkdir(parents=True)
    for proto in generate.PROTOS:
        (protos / proto).write_text((ROOT / "protos" / proto).read_text())
    original = (protos / "chord.proto").read_text()
    (protos / "chord.proto").write_text(
        original.replace("bytes value = 2;", "bytes value = 2; uint32 extra = 3;")
    )
    generate.ROOT = altered
    out = generate.generate(altered)
    assert any(p.read_bytes() != (ROOT / p.relative_to(altered)).read_bytes() for p in out)
