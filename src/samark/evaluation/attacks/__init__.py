"""Attacks on watermarked text (a registry): one module per attack, each seeded.

Word-level attacks follow MarkLLM's definitions and, as in the paper, apply to the whole
paragraph. Doc-P through an OpenAI-compatible chat endpoint and Doc-T via Chinese are the
paper's exact attacks; offline, ``doc-t`` back-translates sentence by sentence and
``doc-p-local`` paraphrases from faithful parts. Every attack's fidelity is measured
(:mod:`samark.evaluation.fidelity`).

Each attack's module registers it when first used by name (:mod:`.catalog`), so importing
this package loads none of them.
"""

from samark.evaluation.attacks.base import (
    ATTACKS,
    Attack,
    PerTextAttack,
    create_attack,
    register_attack,
)

__all__ = [
    "ATTACKS",
    "Attack",
    "PerTextAttack",
    "create_attack",
    "register_attack",
]
