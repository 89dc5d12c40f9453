"""The analyzer: stop words, stemming, tokenization, uniqueness and term ids."""

import pickle

import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.protocol.ids import hash_id
from cqengine.text.analysis import STOP_WORDS, analyze, term_id

STEM = Stemmer.Stemmer("english")


def stems(*words):
    return [STEM.stemWord(w) for w in words]


def unique(items):
    return list(dict.fromkeys(items))


def test_stop_list_is_smart():
    assert len(STOP_WORDS) == 570  # 571 entries, one listed twice
    assert {"the", "and", "a's", "don't", "whereupon", "zero"} <= STOP_WORDS


def test_stop_words_removed_and_rest_stemmed():
    assert analyze("The hurricane and the levees") == stems("hurricane", "levees")


def test_unique_terms_in_first_seen_order():
    assert analyze("levees hurricane levees storms hurricane") == unique(
        stems("levees", "hurricane", "storms")
    )


def test_words_that_stem_alike_give_one_term():
    assert analyze("running runs run") == ["run"]


def test_case_insensitive():
    assert analyze("HURRICANE Katrina") == analyze("hurricane katrina")


def test_punctuation_separates_tokens():
    assert analyze("storm,flood;levee--(breach)!") == stems("storm", "flood", "levee", "breach")
    assert analyze("snake_case") == stems("snake", "case")


def test_apostrophes():
    assert analyze("don't it's") == []  # in the stop list as written
    assert analyze("O'Brien's") == stems("obriens")
    assert analyze("O\u2019Brien\u2018s") == analyze("O'Brien's")  # curly apostrophes
    assert analyze("'quoted'") == stems("quoted")  # not internal: just punctuation


def test_unicode_letters():
    assert analyze("Naïve café ÉCOLE") == stems("naïve", "café", "école")
    assert analyze("東京 Москва") == stems("東京", "москва")


def test_numbers_kept():
    assert analyze("In 1989 there were 42 storms") == stems("1989", "42", "storms")


def test_long_tokens_dropped():
    assert analyze("x" * 41 + " storm " + "z" * 40) == stems("storm", "z" * 40)
    assert analyze("o'" + "b" * 40) == []  # 41 letters once the apostrophe goes
    assert analyze("o'" + "b" * 39) == stems("o" + "b" * 39)  # apostrophe does not count


def test_empty_and_stop_only():
    assert analyze("") == []
    assert analyze("  \n\t ...  ") == []
    assert analyze("The and of whereupon THE") == []


def test_term_id_is_unsigned_64_bit_mmh3():
    for term in ("hurrican", "1989", "école"):
        assert term_id(term) == hash_id(term)
        assert 0 <= term_id(term) < 2**64


def test_analyze_pickles_by_reference():
    assert pickle.loads(pickle.dumps(analyze))("Storms") == stems("storms")


_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.lists(
    st.sampled_from(
        [
            "The",
            "storm",
            "storms",
            "don't",
            "O'Brien",
            "1989",
            "café",
            "_",
            "—",
            "’",
            "'",
            " ",
            "\n",
            "RUNNING",
            "x" * 41,
        ]
    ),
    max_size=20,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(_text)
def test_terms_unique_lowercase_no_stop_words(text):
    terms = analyze(text)
    assert len(terms) == len(set(terms))
    assert not STOP_WORDS & set(terms)
    assert all(t and t == t.lower() and "'" not in t and len(t) <= 40 for t in terms)


@settings(max_examples=300, deadline=None)
@given(_text, _text)
def test_concatenation_is_union_in_order(a, b):
    assert analyze(a + " " + b) == unique(analyze(a) + analyze(b))
