"""The attack interface and registry. An attack rewrites texts; it is seeded and
reproducible, and its fidelity (what it kept of the original) is measured by
:mod:`samark.evaluation.fidelity`, never assumed."""

from __future__ import annotations

import abc
import random
from collections.abc import Sequence
from typing import ClassVar, Literal

from samark.errors import SamarkError
from samark.evaluation.attacks.catalog import CATALOG
from samark.registry import Registry


class Attack(abc.ABC):
    """Rewrites texts, each under its own seed: a text's rewrite depends on the text, its
    seed and its human reference, never on the other texts of the batch, so a record can
    be reproduced alone from the seed it stores, whatever batch a resumed run made.
    ``human`` (same length as ``texts``) is each text's human reference, used only by
    attacks that mix human text in.

    Its metadata are class attributes, read from the registered class without building
    an attack (``ATTACKS.get(name).kind``)."""

    #: the name it is registered under
    name: ClassVar[str]
    #: one line for ``samark attack --list``
    summary: ClassVar[str] = ""
    #: rewrites whole paragraphs in other words (the report's robustness-quality plot uses
    #: the last meaning-preserving one of the experiment)
    paraphrase: ClassVar[bool] = False
    #: ``"removal"`` (the mark should survive: a detection is a success) or ``"forgery"``
    #: (text the key did not write, or whose meaning changed, should not be detected: a
    #: detection is the attacker's success; docs/evaluation.md, "Forgery attacks")
    kind: ClassVar[Literal["removal", "forgery"]] = "removal"

    def apply_batch(
        self, texts: list[str], *, seeds: Sequence[int], human: list[str] | None = None
    ) -> list[str]:
        """``texts`` rewritten, the i-th under ``seeds[i]``."""
        if len(seeds) != len(texts) or (human is not None and len(human) != len(texts)):
            raise SamarkError(
                f"attack {self.name!r}: {len(texts)} texts need as many seeds "
                f"(got {len(seeds)}) and human references (got "
                f"{'none' if human is None else len(human)})"
            )
        return self.rewrite(texts, [int(s) for s in seeds], human)

    def apply(self, text: str, *, seed: int = 0, human: str | None = None) -> str:
        return self.apply_batch([text], seeds=[seed], human=None if human is None else [human])[0]

    @abc.abstractmethod
    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        """The attack itself (lengths checked by :meth:`apply_batch`)."""


class PerTextAttack(Attack):
    """An attack that rewrites each text on its own, with a generator seeded by its seed."""

    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        refs: list[str | None] = list(human) if human is not None else [None] * len(texts)
        return [
            self.apply_one(t, random.Random(seed), ref)
            for t, seed, ref in zip(texts, seeds, refs, strict=True)
        ]

    @abc.abstractmethod
    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str: ...


#: the attack classes by name: the built-in ones load from their catalog entry on first use
ATTACKS: Registry[type[Attack]] = Registry("attack", catalog=CATALOG)
register_attack = ATTACKS.register


def create_attack(name: str, **params: object) -> Attack:
    attack_class = ATTACKS.get(name)
    try:
        return attack_class(**params)
    except TypeError as e:
        raise SamarkError(f"attack {name!r}: bad parameters {params}: {e}") from None


def check_ratio(ratio: float, name: str = "ratio") -> float:
    if not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        raise SamarkError(f"{name} must be a number in [0, 1], got {ratio!r}")
    return float(ratio)
