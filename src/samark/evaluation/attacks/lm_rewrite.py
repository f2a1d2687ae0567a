"""Doc-P: paragraph-level rewrite by a chat model with the paper's prompt I or II.

Through an OpenAI-compatible endpoint (GPT-4.1-mini) this is the paper's exact attack. With
the local default, SmolLM2-135M-Instruct, it is *not* a paraphrase: it drops and merges
sentences and invents facts (sentence-aligned similarity about 0.63); reports label it by
its measured fidelity. For a faithful local paraphrase use ``doc-p-local``.
"""

from __future__ import annotations

from typing import Any

from samark.errors import SamarkError
from samark.evaluation.attacks.base import Attack, register_attack

DOC_P_PROMPTS = {
    "I": "Please rewrite the following text:",
    "II": "Please rewrite the following text, avoiding using the same words or phrases "
    "in the original text:",
}


@register_attack("doc-p")
class Paraphrase(Attack):
    """Doc-P: paragraph-level paraphrase by a chat model with the paper's prompt I or II."""

    name = "doc-p"
    paraphrase = True
    summary = "rewrite by a chat model, paper prompt I/II (faithful only with a strong model)"

    def __init__(
        self,
        prompt: str = "I",
        model: dict[str, Any] | str | None = None,
        max_tokens: int = 384,
        temperature: float = 0.7,
    ) -> None:
        if prompt not in DOC_P_PROMPTS:
            raise SamarkError(f"doc-p prompt must be one of {sorted(DOC_P_PROMPTS)}")
        self.instruction = DOC_P_PROMPTS[prompt]
        from samark.evaluation.chat import chat_model  # torch: only when used

        self.model = chat_model(model)
        self.max_tokens = max_tokens
        self.temperature = temperature

    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        convs = [[{"role": "user", "content": f"{self.instruction}\n\n{t}"}] for t in texts]
        return self.model.chat(
            convs, max_tokens=self.max_tokens, temperature=self.temperature, seeds=seeds
        )
