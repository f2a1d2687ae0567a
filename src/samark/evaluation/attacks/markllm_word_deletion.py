"""MarkLLM 0.1.5's own WordDeletion editor as an attack of our harness
(``pip install --no-deps markllm==0.1.5``).

It differs from our ``word-delete``: MarkLLM drops each whitespace-separated word with
probability ``ratio`` (a share that varies from text to text), where ours drops exactly
``round(ratio * words)``. Its fidelity is measured as every attack's is.
"""

from __future__ import annotations

from samark.evaluation.attacks.base import Attack, check_ratio, register_attack
from samark.evaluation.markllm_offline import offline, seeded_edit


@register_attack("markllm-word-delete")
class MarkLLMWordDeletion(Attack):
    """MarkLLM's ``WordDeletion(ratio)`` (its robustness example uses 0.3)."""

    name = "markllm-word-delete"
    summary = "MarkLLM 0.1.5's WordDeletion: each word dropped with probability ratio"

    def __init__(self, ratio: float = 0.3) -> None:
        self.ratio = check_ratio(ratio)
        with offline():
            from markllm.evaluation.tools.text_editor import WordDeletion

        self.editor = WordDeletion(ratio=self.ratio)

    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        return [seeded_edit(self.editor, t, s) for t, s in zip(texts, seeds, strict=True)]
