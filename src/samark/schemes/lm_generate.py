"""Schemes that write token by token: the unwatermarked LM and the token-level baselines
(KGW and SynthID, whose logits processors transformers implements; Unigram, MorphMark, EXP
and UPV, whose processors are ours).

They write through the candidate engine that samples SAMark's candidates, with its
generator model (one load per process) and its sampling settings, several prompts in one
batch; at each step the engine applies transformers' processors in ``generate``'s order
(:mod:`samark.sampling.token_writing`). Output is cut to whole sentences with the project's
segmenter, so every scheme's text is measured the same way.

By default they write until the asked number of sentences, as SAMark does: the model's
special tokens (EOS, chat-turn markers) are suppressed, so a row never stops early and
carries less evidence than SAMark's for the length alone. Before revision 1 they stopped
at EOS: on the 40-prompt paper run 8 of 40 KGW texts had fewer than 12 sentences and one
was empty. ``stop_at_eos=True`` restores that. Before revision 2 (1 for the rows that had
none) they wrote through transformers' ``model.generate``, left-padded, one random stream
per batch, to the full token budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, Self, TypedDict, cast

import torch
from transformers import LogitsProcessor
from transformers.generation.configuration_utils import BaseWatermarkingConfig

from samark.detection_result import Detection
from samark.errors import EmptyTextError, SamarkError
from samark.keys import WatermarkKey
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import Engine, TextWriter
from samark.sampling.token_writing import WriteRequest
from samark.sampling.transformers_engine import TransformersEngine, load_transformers_engine
from samark.schemes.base import (
    Generation,
    ProgressCallback,
    SchemeConfig,
    SentenceCallback,
    SharedResources,
    Watermark,
    check,
    register_scheme,
)
from samark.segment import whole_sentences

#: where a logits processor runs ("cpu", a torch device; None: its own default)
Device = str | torch.device | None


class TokenRowModels(TypedDict, total=False):
    """What a token row's constructor takes beside its key and config."""

    generator: str


class WatermarkingSource(Protocol):
    """What builds a token watermark's logits processor, as transformers' ``generate``
    builds it: its watermarking configs (KGW's, SynthID's) and :class:`ProcessorWatermarking`."""

    def construct_processor(self, vocab_size: int, device: Device) -> LogitsProcessor: ...


@dataclass(frozen=True)
class LMGenerateConfig(SchemeConfig):
    """The sampling settings of every token row (SAMark's: temperature 0.7, top-p 0.95, 12
    sentences) and its token budget per sentence."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_new_sentences: int = 12
    tokens_per_sentence: int = 48
    stop_at_eos: bool = False

    def __post_init__(self) -> None:
        check(
            self.temperature > 0 and 0 < self.top_p <= 1,
            "temperature must be > 0 and top_p in (0, 1]",
        )
        check(
            self.max_new_sentences >= 1 and self.tokens_per_sentence >= 1,
            "max_new_sentences and tokens_per_sentence must be >= 1",
        )


@dataclass(frozen=True)
class TokenWatermarkConfig(LMGenerateConfig):
    """A token watermark's sampling settings and its detection level."""

    alpha: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 < self.alpha < 1, f"alpha must be in (0, 1), got {self.alpha}")


@register_scheme("unwatermarked")
class LMGenerateScheme(Watermark):
    """Plain nucleus sampling from the generator: the unwatermarked reference row."""

    name = "unwatermarked"
    batch_size = 10
    #: the scheme's config class (its factory builds one from the params)
    config_class: type[LMGenerateConfig] = LMGenerateConfig
    config: LMGenerateConfig

    def __init__(
        self,
        key: WatermarkKey | None = None,
        config: LMGenerateConfig | None = None,
        *,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        self.config = config if config is not None else self.config_class()
        if not isinstance(self.config, self.config_class):
            raise TypeError(
                f"{self.name} needs a {self.config_class.__name__}, got "
                f"{type(self.config).__name__}"
            )
        self.generator = generator
        self._lm: TransformersEngine | None = None

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Self:
        """Every token row: its config's fields and the generator (the shared one unless
        named); a ``TypeError`` for any other parameter."""
        rest = dict(params)
        base = rest.pop("config", None)
        if not (base is None or isinstance(base, cls.config_class)):
            raise TypeError(f"config must be a {cls.config_class.__name__}")
        config, rest = cls.config_class.split(rest, base)
        generator = rest.pop("generator", DEFAULT_GENERATOR if shared is None else shared.generator)
        if rest:
            raise TypeError(f"{cls.name} got unexpected parameter(s): {', '.join(sorted(rest))}")
        if not isinstance(generator, str):
            raise TypeError(f"generator must be a model name, got {type(generator).__name__}")
        return cls(key, config, generator=generator)

    @property
    def max_new_sentences(self) -> int:
        return self.config.max_new_sentences

    @property
    def lm(self) -> TransformersEngine:
        if self._lm is None:
            self._lm = load_transformers_engine(self.generator)
        return self._lm

    @property
    def engine(self) -> Engine:
        """The engine it writes with: the transformers engine (``lm``), whose logits
        processors carry a token watermark."""
        return self.lm

    def count_tokens(self, text: str) -> int:
        """The generator's token count of ``text`` (a scheme that writes elsewhere says
        how its engine counts)."""
        return self.lm.count_tokens(text)

    @property
    def token_counter(self) -> Callable[[str], int]:
        return self.count_tokens

    def watermarking_config(self) -> WatermarkingSource | None:
        """transformers' watermarking config (None: no watermark); its
        ``construct_processor`` builds the processor the engine applies."""
        return None

    def detect(self, text: str) -> Detection:
        raise SamarkError(f"{self.name} has no detector")

    def generate(
        self,
        prompt: str,
        *,
        max_new_sentences: int | None = None,
        seed: int | None = None,
        progress: ProgressCallback | None = None,
        on_sentence: SentenceCallback | None = None,
    ) -> Generation:
        out = self.generate_batch([prompt], max_new_sentences=max_new_sentences, seed=seed)[0]
        if on_sentence is not None:
            for i, sentence in enumerate(out.sentences):
                if on_sentence(sentence, {"index": i}):  # the text ends with this sentence
                    kept = out.sentences[: i + 1]
                    text = " ".join(kept)
                    out = dataclasses.replace(
                        out, text=text, sentences=kept, output_tokens=self.count_tokens(text)
                    )
                    break
        if progress:
            progress(len(out.sentences), max_new_sentences or self.max_new_sentences)
        return out

    def generate_batch(
        self, prompts: list[str], *, max_new_sentences: int | None = None, seed: int | None = None
    ) -> list[Generation]:
        """Continue every prompt in one batch of the candidate engine (the first prompt
        with ``seed``, the next with ``seed + 1``, ...)."""
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise TypeError("prompts must be a non-empty list of str")
        sentences = max_new_sentences or self.max_new_sentences
        c = self.config
        lm = self.lm
        # the model's own end (EOS, a chat turn's end) is not the protocol's end
        suppress = () if c.stop_at_eos else tuple(sorted(special_ids(lm)))
        requests = [
            WriteRequest(
                prompt,
                sentences * c.tokens_per_sentence,
                temperature=c.temperature,
                top_p=c.top_p,
                seed=None if seed is None else seed + i,
                watermark=self.logits_processor(),
                suppress=suppress,
                stop=frozenset(lm.eos_ids) if c.stop_at_eos else frozenset(),
                sentences=sentences,
            )
            for i, prompt in enumerate(prompts)
        ]
        results = []
        writer: TextWriter[WriteRequest] = lm  # the one interface token rows write through
        for prompt, written in zip(prompts, writer.write_many(requests), strict=True):
            text = writer.decode(written.tokens)
            kept = whole_sentences(text, sentences)
            final = " ".join(kept)
            results.append(
                Generation(
                    scheme=self.name,
                    prompt=prompt,
                    text=final,
                    sentences=tuple(kept),
                    tokens_sampled=written.tokens_sampled,
                    output_tokens=writer.count_tokens(final) if final else 0,
                    seconds=written.seconds,
                    sampling_seconds=written.seconds,
                )
            )
        return results

    def logits_processor(self) -> LogitsProcessor | None:
        """A fresh processor of this scheme's watermark (None: no watermark), built as
        transformers' ``generate`` builds it from ``watermarking_config``."""
        config = self.watermarking_config()
        if config is None:
            return None
        processor: LogitsProcessor = config.construct_processor(vocab_size(self.lm), "cpu")
        return processor


def special_ids(lm: TransformersEngine) -> set[int]:
    """Every special token of the generator's tokenizer, and its EOS ids (what a token
    row suppresses when it writes past EOS)."""
    return {int(i) for i in lm.tokenizer.all_special_ids} | set(lm.eos_ids)


class TokenWatermark(LMGenerateScheme):
    """A token-level watermark written in the candidate engine: transformers' own
    processor (KGW, SynthID) or ours in its watermark slot (Unigram, MorphMark, EXP, UPV),
    given by ``watermarking_config``; keys derived one-way from the run's secret."""

    config_class: type[LMGenerateConfig] = TokenWatermarkConfig
    config: TokenWatermarkConfig  # each scheme narrows it to its own subclass
    key: WatermarkKey

    def __init__(
        self,
        key: WatermarkKey | None,
        config: TokenWatermarkConfig | None = None,
        *,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        super().__init__(key, config, generator=generator)
        if not isinstance(key, WatermarkKey):
            raise TypeError(f"{self.name} needs a WatermarkKey, got {type(key).__name__}")
        self.key = key

    @property
    def alpha(self) -> float:
        return float(self.config.alpha)

    def derived_keys(self, count: int) -> list[int]:
        """``count`` 31-bit integer keys for this scheme, derived from the secret."""
        return self.key.derive_ints(self.name, count, bits=31)

    def require_text(self, text: str) -> None:
        """Raise :class:`EmptyTextError` for a text of whitespace only: its tokens carry
        no writing to score."""
        if not text.strip():
            raise EmptyTextError(f"{self.name}: the text is empty")

    def too_short(self, need: int) -> EmptyTextError:
        """The error for a text with fewer than ``need`` scoreable tokens."""
        return EmptyTextError(f"{self.name}: the text has fewer than {need} tokens to score")


class ProcessorWatermarking(BaseWatermarkingConfig):
    """A watermark of ours in the slot transformers keeps for its own (after token
    suppression, temperature and top-p: the processor sees the distribution that is
    sampled, as transformers' KGW and SynthID do). ``build(vocab_size, device)`` returns
    the ``LogitsProcessor``."""

    def __init__(self, build: Callable[[int, Device], LogitsProcessor]) -> None:
        self.build = build

    def validate(self) -> None:
        return None

    def construct_processor(self, vocab_size: int, device: Device = None) -> LogitsProcessor:
        return self.build(vocab_size, device)


def vocab_size(lm: TransformersEngine) -> int:
    """The width of the generator's logits: the vocabulary a watermark partitions."""
    return int(lm.model.config.get_text_config().vocab_size)


def token_ids(lm: TransformersEngine, text: str) -> torch.LongTensor:
    """The generator's token ids of ``text`` (no special tokens), a (1, L) LongTensor."""
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return cast(torch.LongTensor, torch.tensor([ids], dtype=torch.long))
