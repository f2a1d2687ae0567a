"""Word-level edits as MarkLLM defines them (Word-D, Word-S): an exact share of the words
of the whole paragraph is deleted or replaced by a WordNet synonym."""

from __future__ import annotations

import random
import re

from samark.evaluation.attacks.base import PerTextAttack, check_ratio, register_attack

_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_WORD = re.compile(r"^(\W*)([A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z])(\W*)$")


@register_attack("word-delete")
class WordDeletion(PerTextAttack):
    """Delete ``round(ratio * words)`` randomly chosen words (MarkLLM's Word-D)."""

    name = "word-delete"
    summary = "delete a share of the words (ratio)"

    def __init__(self, ratio: float = 0.15) -> None:
        self.ratio = check_ratio(ratio)

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        tokens = text.split()
        k = round(self.ratio * len(tokens))
        drop = set(rng.sample(range(len(tokens)), k))
        return " ".join(t for i, t in enumerate(tokens) if i not in drop)


class WordNetSynonyms:
    """Single-word WordNet synonyms of a word (cached); the data comes from Debian's
    ``wordnet-base`` (``samark models install``)."""

    def __init__(self) -> None:
        from samark.evaluation.wordnet import load_wordnet

        self.wordnet = load_wordnet()
        self._cache: dict[str, list[str]] = {}

    def __call__(self, word: str) -> list[str]:
        low = word.lower()
        if low not in self._cache:
            found = {
                lemma.name().replace("_", " ")
                for synset in self.wordnet.synsets(low)
                for lemma in synset.lemmas()
            }
            self._cache[low] = sorted(
                s for s in found if s.lower() != low and _PLAIN_WORD.fullmatch(s)
            )
        return self._cache[low]

    def substitute(self, text: str, ratio: float, rng: random.Random) -> str:
        """Replace ``round(ratio * words)`` words that have a synonym (all of them if fewer
        have one), keeping punctuation and an initial capital."""
        tokens = text.split()
        k = round(ratio * len(tokens))
        if k == 0:
            return text
        slots = [i for i, tok in enumerate(tokens) if (m := _WORD.match(tok)) and self(m[2])]
        for i in rng.sample(slots, min(k, len(slots))):
            lead, word, trail = _WORD.match(tokens[i]).groups()  # type: ignore[union-attr]
            new = rng.choice(self(word))
            if word[0].isupper():
                new = new[0].upper() + new[1:]
            tokens[i] = f"{lead}{new}{trail}"
        return " ".join(tokens)


@register_attack("word-substitute")
class SynonymSubstitution(PerTextAttack):
    """Replace ``round(ratio * words)`` words by a random WordNet synonym (MarkLLM's Word-S).

    Only words with a single-word synonym are candidates; if there are fewer than asked,
    all are replaced (the record's measured overlap shows the real strength).
    """

    name = "word-substitute"
    summary = "replace a share of the words by WordNet synonyms (ratio)"

    def __init__(self, ratio: float = 0.15) -> None:
        self.ratio = check_ratio(ratio)
        self.synonyms = WordNetSynonyms()

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        return self.synonyms.substitute(text, self.ratio, rng)
