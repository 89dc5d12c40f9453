"""The header-cover benchmark on a small simulated ring: every share it reports is a share,
a larger K answers at least as much under the same ranking, and it records every question
of the rounds the ledger counts."""

import json

from support.repo import load_script


def test_bench_header_cover_small(tmp_path):
    bench = load_script("experiments/bench_header_cover.py")
    out = tmp_path / "c.json"
    args = ["--nodes", "32", "--queries", "600", "--docs", "40", "--ks", "4,16,64,100000"]
    assert bench.main([*args, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["questions_per_doc"] > result["absent_answers_per_doc"] > 0
    rows = result["rankings"]
    for ranking in ("document_frequency", "questions", "absent_answers"):
        shares = [rows[f"{ranking}/{k}"] for k in (4, 16, 64, 100000)]
        for a, b in zip(shares, shares[1:]):
            assert a["questions_answered"] <= b["questions_answered"] <= 1
            assert a["absent_answered"] <= b["absent_answered"] <= 1
    # every term of the corpus is hot: every question is answered
    assert rows["document_frequency/100000"]["questions_answered"] == 1
    assert rows["document_frequency/100000"]["absent_answered"] == 1


def test_only_the_rounds_questions_are_recorded():
    bench = load_script("experiments/bench_header_cover.py")
    from cqengine.proto import cqengine_pb2 as pb

    watch = bench.Questions()
    watch.doc = 3
    reply = pb.DialogueReply(present=bytes([0b01]))
    watch.on_resolution_call(None, None, "TermDialogue", pb.DialogueRequest(ids=[7, 9]), reply)
    watch.on_resolution_call(None, None, "GetBloom", pb.BloomRequest(), pb.BloomReply())
    last = pb.DialogueRequest(ids=[5], phrase_lengths=[2])  # the conditions' round
    watch.on_resolution_call(None, None, "TermDialogue", last, reply)
    assert watch.asked == [(3, 7, True), (3, 9, False)]
