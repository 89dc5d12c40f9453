"""Message sizes worked out without building the messages equal the bytes of the
messages the engine sends, for a batch of one document."""

from hypothesis import given
from hypothesis import strategies as st

from cqengine.core.alerts.batches import alert_batch
from cqengine.core.resolution.matches import report
from cqengine.core.resolution.resolution import pack_bits
from cqengine.core.terms.bloom import BloomFilter
from cqengine.evaluation.measuring.wire import (
    alert_batch_size,
    bloom_sizes,
    dialogue_sizes,
    matched_size,
)
from cqengine.proto import cqengine_pb2 as pb

doc_keys = st.one_of(st.just(0), st.integers(1, 2**64 - 1))  # a zero key is on the wire too


@given(doc_keys, st.integers(1, 2100), st.integers(0, 2**64 - 1))
def test_a_dialogue_round_takes_the_bytes_its_messages_take(doc_key, n, some_id):
    """n crosses the points where the ids' and the answer's length prefixes grow a byte
    (8n >= 128 and 16,384; n/8 >= 128)."""
    request = pb.DialogueRequest(doc_keys=[doc_key], ids=[(some_id + i) % 2**64 for i in range(n)])
    reply = pb.DialogueReply(found=[True], present=pack_bits([i % 3 == 0 for i in range(n)]))
    assert dialogue_sizes(n) == (request.ByteSize(), reply.ByteSize())


@given(doc_keys, st.integers(1, 2048), st.sets(st.integers(0, 2**64 - 1), max_size=20))
def test_a_bloom_filter_takes_the_bytes_its_messages_take(doc_key, size, ids):
    bits = 8 * size
    reply = pb.BloomReply(found=[True], bits=BloomFilter.of(ids, bits, 3).to_bytes())
    assert bloom_sizes(bits) == (pb.BloomRequest(doc_keys=[doc_key]).ByteSize(), reply.ByteSize())


texts = st.text(max_size=200)  # any Unicode: sizes are of UTF-8 bytes
sub_ids = st.one_of(st.just(0), st.integers(1, 2**64 - 1))


homes = st.one_of(texts, st.sampled_from(["10.0.0.1:7000", "10.0.0.2:7000"]))  # some alike


@given(doc_keys, st.lists(st.tuples(sub_ids, homes), max_size=40))
def test_a_report_of_matches_takes_the_bytes_its_message_takes(doc_key, matches):
    """In whichever form the QN sends it (cqengine.core.resolution.matches.report)."""
    request = pb.MatchedRequest(doc_keys=[doc_key])
    report(request, [[pb.QueryEntry(subscription_id=s, home=h) for s, h in matches]], True)
    assert matched_size(matches) == request.ByteSize()


@given(texts, texts, st.text(max_size=400), st.lists(sub_ids, max_size=40))
def test_an_alert_batch_takes_the_bytes_its_message_takes(docno, title, snippet, subs):
    batch = alert_batch([((docno, title, snippet), subs)])
    assert alert_batch_size(docno, title, snippet, len(subs)) == batch.ByteSize()
