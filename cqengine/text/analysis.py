"""The one text analyzer: queries, documents and Spark jobs all turn text into terms here.

A query matches a document when every query term is among the document's terms, so both
sides must go through exactly the same pipeline or matches are silently lost:

1. lowercase (``str.lower``) and turn curly apostrophes (’ ‘) into ``'``;
2. tokenize: runs of unicode letters and digits (no underscore), allowing internal
   apostrophes, so "O'Brien's" is one token and "don't" can meet the stop list as written;
3. drop stop words from SMART's list (571 words, from python-rake) — the list the paper
   used, so term statistics are comparable with its experiments;
4. remove apostrophes, drop tokens longer than 40 characters (noise such as URLs glued
   together or base64, which would only bloat the index);
5. stem with Snowball's English stemmer (PyStemmer), then drop the term if stemming made
   it empty or a stop word.

Numbers are kept ("1989" is a fine query term). Terms are unique, in first-seen order.

Speed: this runs over every document of a corpus, so the per-token work (stop check,
apostrophe removal, stemming) is cached per distinct token; the stemmer is created on
first use so that importing the module (for instance by a Spark worker unpickling
`analyze`) carries no native state.
"""

from __future__ import annotations

import re
from functools import lru_cache

# python-rake ships no type stubs (nor a py.typed marker)
from RAKE.stoplists.SmartStopList import wordlist as _smart_wordlist  # type: ignore[import-untyped]

from chord.protocol.ids import hash_id

__all__ = ["STOP_WORDS", "MAX_TOKEN_LEN", "analyze", "analyze_sequence", "term_id"]

STOP_WORDS: frozenset[str] = frozenset(_smart_wordlist)
MAX_TOKEN_LEN = 40

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_CURLY = str.maketrans({"\u2019": "'", "\u2018": "'"})
_stemmer = None  # Stemmer.Stemmer, created on first use (see module docstring)


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        # PyStemmer is a C extension with no type stubs
        import Stemmer  # type: ignore[import-not-found]

        _stemmer = Stemmer.Stemmer("english")
    stem: str = _stemmer.stemWord(word)
    return stem


@lru_cache(maxsize=1 << 18)  # ~50 MB at most; a news vocabulary fits
def _term(token: str) -> str:
    """The term for one lowercase token, or "" when the token yields none."""
    if token in STOP_WORDS:
        return ""
    word = token.replace("'", "")
    if len(word) > MAX_TOKEN_LEN:
        return ""
    stem = _stem(word)
    return "" if stem in STOP_WORDS else stem


def analyze_sequence(text: str) -> list[str]:
    """The term sequence of `text`: its tokens' terms in order, repeats kept, tokens that
    yield no term left out (so "the levee held" is levee, held: what a phrase matches)."""
    terms = map(_term, _TOKEN.findall(text.lower().translate(_CURLY)))
    return [t for t in terms if t]


def analyze(text: str) -> list[str]:
    """Unique terms of `text`, in first-seen order (see the module docstring)."""
    return list(dict.fromkeys(analyze_sequence(text)))


@lru_cache(maxsize=1 << 18)  # every document and query hashes the same vocabulary again
def term_id(term: str) -> int:
    """The term's key on the ring: the unsigned 64-bit mmh3 of the term."""
    return hash_id(term)
