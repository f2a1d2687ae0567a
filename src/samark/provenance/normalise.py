"""The normal form of a sentence whose keyed hash the record stores.

Two sentences with the same normal form are "the same sentence served verbatim": the
normal form forgives what copying and re-typesetting change (Unicode compatibility forms
such as full-width letters and ligatures, case, runs of whitespace, quotes and
punctuation around the sentence), never a word.
"""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")


def _is_edge(ch: str) -> bool:
    """Whether ``ch`` is stripped from a sentence's ends: whitespace, punctuation and
    symbols (quotes, brackets, dashes, full stops, bullets), never a letter or digit."""
    return ch.isspace() or unicodedata.category(ch)[0] in "PSZ"


def normalise(sentence: str) -> str:
    """Unicode NFKC, casefolded, whitespace runs collapsed to one space, and
    punctuation, symbols and spaces stripped from both ends."""
    if not isinstance(sentence, str):
        raise TypeError(f"expected str, got {type(sentence).__name__}")
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", sentence).casefold())
    start, end = 0, len(text)
    while start < end and _is_edge(text[start]):
        start += 1
    while end > start and _is_edge(text[end - 1]):
        end -= 1
    return text[start:end]
