"""The attack interface and registry. An attack rewrites texts; it is seeded and
reproducible, and its fidelity (what it kept of the original) is measured by
:mod:`samark.evaluation.fidelity`, never assumed."""

from __future__ import annotations

import abc
import random
from collections.abc import Callable
from typing import Any

from samark.errors import SamarkError
from samark.registry import Registry


class Attack(abc.ABC):
    """Rewrites texts. ``human`` (same length as ``texts``) is each text's human reference,
    used only by attacks that mix human text in."""

    name: str
    #: one line for ``samark attack --list``
    summary: str = ""
    #: rewrites whole paragraphs in other words (the report's robustness-quality plot uses
    #: the last meaning-preserving one of the experiment)
    paraphrase: bool = False

    @abc.abstractmethod
    def apply_batch(
        self, texts: list[str], *, seed: int, human: list[str] | None = None
    ) -> list[str]: ...

    def apply(self, text: str, *, seed: int = 0, human: str | None = None) -> str:
        return self.apply_batch([text], seed=seed, human=[human] if human is not None else None)[0]


class PerTextAttack(Attack):
    """An attack that rewrites each text on its own, with a generator seeded per text."""

    def apply_batch(
        self, texts: list[str], *, seed: int, human: list[str] | None = None
    ) -> list[str]:
        return [
            self.apply_one(t, random.Random(f"{seed}/{i}"), human[i] if human else None)
            for i, t in enumerate(texts)
        ]

    @abc.abstractmethod
    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str: ...


AttackFactory = Callable[..., Attack]
ATTACKS: Registry[AttackFactory] = Registry("attack")
register_attack = ATTACKS.register


def create_attack(name: str, **params: Any) -> Attack:
    factory = ATTACKS.get(name)
    try:
        return factory(**params)
    except TypeError as e:
        raise SamarkError(f"attack {name!r}: bad parameters {params}: {e}") from None


def attack_summary(name: str) -> str:
    factory = ATTACKS.get(name)
    return str(getattr(factory, "summary", ""))


def attack_is_paraphrase(name: str) -> bool:
    return bool(getattr(ATTACKS.get(name), "paraphrase", False))


def check_ratio(ratio: float, name: str = "ratio") -> float:
    if not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        raise SamarkError(f"{name} must be a number in [0, 1], got {ratio!r}")
    return float(ratio)
