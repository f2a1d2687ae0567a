"""Doc-P (local): a paragraph paraphrase that keeps the meaning, built from faithful parts.

What a paragraph paraphraser does to a text, each operation at a stated rate and seeded:

1. ``split``: ``round(split * n)`` sentences with a clause boundary (", and", ", but",
   ", so", ";" with at least 5 words each side) become two sentences;
2. ``translate``: that share of the sentences is reworded by sentence-wise
   back-translation (English -> Portuguese -> English, guarded against truncation);
3. ``synonyms``: that share of each sentence's words is replaced by WordNet synonyms (off
   by default: WordNet does not know the word's sense in context, so "vice president"
   can become "frailty president"; Word-S measures that attack on its own);
4. ``merge``: ``round(merge * n)`` pairs of adjacent sentences are joined into one;
5. ``reorder``: ``round(reorder * n)`` sentences are moved to another position.

``n`` is the original number of sentences. No step invents content, so the result keeps the
original's meaning: its fidelity (sentence-aligned similarity, sentence count, 4-gram copy)
is measured per record and checked in the tests. A local small LM cannot do this: SmolLM2's
rewrite (``doc-p`` with the local model) drops sentences and invents facts.
"""

from __future__ import annotations

import random
import re

from samark.evaluation.attacks.base import PerTextAttack, check_ratio, register_attack
from samark.evaluation.attacks.translation import PortugueseRoundTrip
from samark.evaluation.attacks.word_edit import WordNetSynonyms
from samark.segment import split_sentences

_BOUNDARY = re.compile(r",\s+(and|but|so)\s+|;\s+")
_OPENERS = {"and": "", "but": "But ", "so": "So "}
#: first words that are lowercased when their sentence is merged into the one before
_COMMON_WORDS = (
    "a an the this that these those he she it they we you his her its their our there "
    "some many most all several both each one two three four five after before when "
    "while as however meanwhile also in on at for from by with without of to no not "
    "other such"
)
_COMMON = frozenset(_COMMON_WORDS.split())
_CONJUNCTIONS = frozenset({"and", "but", "so", "yet"})
_MIN_SIDE_WORDS = 5


def split_at_clause(sentence: str) -> tuple[str, str] | None:
    """The sentence as two sentences at its clause boundary nearest the middle, or None."""
    best: tuple[int, tuple[str, str]] | None = None
    for m in _BOUNDARY.finditer(sentence):
        left, right = sentence[: m.start()].rstrip(), sentence[m.end() :].lstrip()
        if len(left.split()) < _MIN_SIDE_WORDS or len(right.split()) < _MIN_SIDE_WORDS:
            continue
        opener = _OPENERS.get((m.group(1) or "").lower(), "")
        right = opener + (right if opener else right[:1].upper() + right[1:])
        pieces = (left.rstrip(",;:") + ".", right)
        distance = abs(m.start() - len(sentence) // 2)
        if best is None or distance < best[0]:
            best = (distance, pieces)
    return None if best is None else best[1]


def merge_sentences(first: str, second: str) -> str | None:
    """``first`` and ``second`` as one sentence, or None where ``first`` does not end in a
    plain full stop (a question, an exclamation or a quote is left alone)."""
    first = first.rstrip()
    if not first.endswith(".") or first.endswith("..") or not second:
        return None
    head, _, rest = second.partition(" ")
    if head.lower() in _CONJUNCTIONS:
        return f"{first[:-1]}, {head.lower()} {rest}".rstrip()
    if head.lower() in _COMMON:
        return f"{first[:-1]}, and {head.lower()} {rest}".rstrip()
    return f"{first[:-1]}; {second}"


@register_attack("doc-p-local")
class LocalParaphrase(PerTextAttack):
    """Meaning-preserving paragraph paraphrase from local parts (see the module docstring)."""

    name = "doc-p-local"
    paraphrase = True
    summary = "faithful local paraphrase: split, back-translate, synonyms, merge, reorder"

    def __init__(
        self,
        translate: float = 1.0,
        synonyms: float = 0.0,
        merge: float = 0.15,
        split: float = 0.15,
        reorder: float = 0.15,
    ) -> None:
        self.translate = check_ratio(translate, "translate")
        self.synonym_ratio = check_ratio(synonyms, "synonyms")
        self.merge = check_ratio(merge, "merge")
        self.split = check_ratio(split, "split")
        self.reorder = check_ratio(reorder, "reorder")
        self.round_trip = PortugueseRoundTrip() if self.translate else None
        self.synonyms = WordNetSynonyms() if self.synonym_ratio else None

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        sents = split_sentences(text)
        n = len(sents)
        if n == 0:
            return text
        sents = self._split(sents, round(self.split * n), rng)
        if self.round_trip is not None:
            chosen = set(rng.sample(range(len(sents)), round(self.translate * len(sents))))
            sents = [self.round_trip.sentence(s) if i in chosen else s for i, s in enumerate(sents)]
        if self.synonyms is not None:
            sents = [self.synonyms.substitute(s, self.synonym_ratio, rng) for s in sents]
        sents = self._merge(sents, round(self.merge * n), rng)
        sents = self._reorder(sents, round(self.reorder * n), rng)
        return " ".join(sents)

    @staticmethod
    def _split(sents: list[str], k: int, rng: random.Random) -> list[str]:
        splits = {i: p for i, s in enumerate(sents) if (p := split_at_clause(s)) is not None}
        chosen = set(rng.sample(sorted(splits), min(k, len(splits))))
        out: list[str] = []
        for i, s in enumerate(sents):
            out += list(splits[i]) if i in chosen else [s]
        return out

    @staticmethod
    def _merge(sents: list[str], k: int, rng: random.Random) -> list[str]:
        starts = [i for i in range(len(sents) - 1) if merge_sentences(sents[i], sents[i + 1])]
        rng.shuffle(starts)
        chosen: set[int] = set()
        for i in starts:
            if len(chosen) == k:
                break
            if not chosen & {i - 1, i, i + 1}:
                chosen.add(i)
        out: list[str] = []
        i = 0
        while i < len(sents):
            if i in chosen:
                out.append(merge_sentences(sents[i], sents[i + 1]) or "")
                i += 2
            else:
                out.append(sents[i])
                i += 1
        return out

    @staticmethod
    def _reorder(sents: list[str], k: int, rng: random.Random) -> list[str]:
        if len(sents) < 2 or k == 0:
            return sents
        out = sents[:]
        for _ in range(k):
            src = rng.randrange(len(out))
            moved = out.pop(src)
            dst = rng.choice([j for j in range(len(out) + 1) if j != src])
            out.insert(dst, moved)
        if out == sents:  # moves that cancelled out: swap one adjacent pair
            j = rng.randrange(len(out) - 1)
            out[j], out[j + 1] = out[j + 1], out[j]
        return out
