"""Shuffle: the sentences in another order (SAMark's detector ignores order by design)."""

from __future__ import annotations

import random

from samark.evaluation.attacks.base import PerTextAttack, register_attack
from samark.segment import split_sentences


@register_attack("shuffle")
class SentenceShuffle(PerTextAttack):
    """Shuffle the order of the sentences (a different order whenever one exists)."""

    name = "shuffle"
    summary = "the same sentences in another order"

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        sents = split_sentences(text)
        if len(set(sents)) < 2:
            return text
        order = sents[:]
        while order == sents:
            rng.shuffle(order)
        return " ".join(order)
