"""MarkLLM 0.1.5's own SynonymSubstitution editor as an attack of our harness
(``pip install --no-deps markllm==0.1.5``; WordNet from Debian's ``wordnet-base``, as
``samark models install`` fetches it, never nltk's downloader).

It differs from our ``word-substitute``: MarkLLM looks a whitespace-separated word up as it
stands (punctuation and capitals included), and replaces ``int(ratio * words)`` of those
with a synset of two or more lemmas by a random other lemma of a random synset, with no
part-of-speech check ("a" can become "angstrom unit"). Its fidelity is measured as every
attack's is, and is lower than ours at the same ratio.
"""

from __future__ import annotations

from samark.evaluation.attacks.base import Attack, check_ratio, register_attack
from samark.evaluation.markllm_offline import offline, seeded_edit


@register_attack("markllm-synonym")
class MarkLLMSynonymSubstitution(Attack):
    """MarkLLM's ``SynonymSubstitution(ratio)`` (its robustness example uses 0.5)."""

    name = "markllm-synonym"
    summary = "MarkLLM 0.1.5's SynonymSubstitution: WordNet lemmas, no part-of-speech check"

    def __init__(self, ratio: float = 0.5) -> None:
        self.ratio = check_ratio(ratio)
        with offline():  # its constructor calls nltk.download("wordnet")
            from markllm.evaluation.tools.text_editor import SynonymSubstitution

            self.editor = SynonymSubstitution(ratio=self.ratio)

    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        return [seeded_edit(self.editor, t, s) for t, s in zip(texts, seeds, strict=True)]
