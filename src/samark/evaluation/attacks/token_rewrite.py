"""Token rewrite: the same meaning in other tokens, to show where a token-level mark fails
and a semantic one holds.

Each sentence goes through ``rounds`` English -> Portuguese -> English round trips
(offline, sentence by sentence, guarded against truncation as Doc-T is), then a share
``synonyms`` of its words is replaced by WordNet synonyms. One round trip keeps about half
of a text's 4-grams (Doc-T, sentence-wise); every further round and every synonym breaks
more of the n-grams a token mark's green lists hang on, while sentence order and count
stay, so the sentence-aligned similarity stays high. Fidelity is measured per record, as
for every attack (sentence-aligned similarity, sentences kept, 4-gram copy).
"""

from __future__ import annotations

import random

from samark.evaluation.attacks.base import PerTextAttack, check_ratio, register_attack
from samark.evaluation.attacks.translation import PortugueseRoundTrip
from samark.evaluation.attacks.word_edit import WordNetSynonyms
from samark.segment import split_sentences


@register_attack("token-rewrite")
class TokenRewrite(PerTextAttack):
    """Sentence-wise back-translation ``rounds`` times, then WordNet synonyms."""

    name = "token-rewrite"
    summary = "meaning kept, tokens rewritten: repeated sentence-wise back-translation + synonyms"

    def __init__(self, rounds: int = 2, synonyms: float = 0.1) -> None:
        if not 1 <= rounds <= 4:
            raise ValueError(f"rounds must be in [1, 4], got {rounds}")
        self.rounds = rounds
        self.synonym_ratio = check_ratio(synonyms, "synonyms")
        self.round_trip = PortugueseRoundTrip()
        self.synonyms = WordNetSynonyms() if self.synonym_ratio else None

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        out = []
        for sentence in split_sentences(text):
            for _ in range(self.rounds):
                sentence = self.round_trip.sentence(sentence)
            if self.synonyms is not None:
                sentence = self.synonyms.substitute(sentence, self.synonym_ratio, rng)
            out.append(sentence)
        return " ".join(out)
