"""Mix: human sentences interleaved with the watermarked ones (dilution)."""

from __future__ import annotations

import random

from samark.errors import SamarkError
from samark.evaluation.attacks.base import PerTextAttack, register_attack
from samark.segment import split_sentences


@register_attack("human-mix")
class HumanMix(PerTextAttack):
    """Interleave the text's sentences with human ones so that a ``ratio`` share of the
    result is human (the item's own human continuation); both keep their order."""

    name = "human-mix"
    summary = "interleave human sentences so a share (ratio) of the result is human"

    def __init__(self, ratio: float = 0.5) -> None:
        if not isinstance(ratio, int | float) or not 0 <= ratio < 1:
            raise SamarkError(f"ratio must be a number in [0, 1), got {ratio!r}")
        self.ratio = float(ratio)

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        if human is None:
            raise SamarkError("human-mix needs the human reference text")
        mine, theirs = split_sentences(text), split_sentences(human)
        k = min(len(theirs), round(len(mine) * self.ratio / (1 - self.ratio)))
        slots = ["w"] * len(mine) + ["h"] * k
        rng.shuffle(slots)
        it_w, it_h = iter(mine), iter(theirs[:k])
        return " ".join(next(it_w) if s == "w" else next(it_h) for s in slots)
