"""Texts written token by token in the candidate engine: the token-level rows (the
unwatermarked reference, KGW, SynthID, Unigram, MorphMark, EXP, UPV).

They sample through the same engine as SAMark's candidates (its prefill, shared-prefix
decoding, batching of several prompts and per-request random stream), at the same
settings. Each step applies transformers' own logits processors in the order of its
``generate``: the suppressed tokens, temperature, top-p, then the watermark's processor,
so the watermark sees the distribution that is sampled, as it does in ``generate``; the
test suite checks the processed scores against ``generate``'s step by step.

A text stops at its token budget, at a stop token when it has any, or, when asked for
``sentences``, as soon as the segmenter sees sentence ``sentences + 1`` begin (so the
first ``sentences`` are complete, by the candidate engine's rule): tokens past that point
would be cut anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    SuppressTokensLogitsProcessor,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)

from samark.segment import SENTENCE_END_HINTS, split_sentences


@dataclass(frozen=True, eq=False)
class WriteRequest:
    """One text to write after ``prefix``.

    ``watermark`` is a fresh logits processor owned by this request (transformers' may keep
    state across the steps of one text, as SynthID's does); ``suppress`` are token ids never
    sampled; a ``stop`` token ends the text (it is not part of it).
    """

    prefix: str
    max_new_tokens: int
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None
    watermark: LogitsProcessor | None = None
    suppress: tuple[int, ...] = ()
    stop: frozenset[int] = frozenset()
    sentences: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be > 0 and top_p in (0, 1]")
        if self.sentences is not None and self.sentences < 1:
            raise ValueError("sentences must be >= 1")

    def processors(self) -> LogitsProcessorList:
        """transformers' processors for this request, in ``generate``'s order."""
        out = LogitsProcessorList()
        if self.suppress:
            out.append(SuppressTokensLogitsProcessor(list(self.suppress), device="cpu"))
        if self.temperature != 1.0:
            out.append(TemperatureLogitsWarper(self.temperature))
        if self.top_p < 1.0:
            out.append(TopPLogitsWarper(self.top_p))
        if self.watermark is not None:
            out.append(self.watermark)
        return out


@dataclass(frozen=True)
class Written:
    """A text the engine wrote: its token ids (no stop token) and how it ended."""

    tokens: tuple[int, ...]
    tokens_sampled: int  # every token drawn, a final stop token included
    prompt_tokens: int
    seconds: float  # the batch's decoding time shared evenly among its texts
    #: "sentences" (the asked sentences are complete), "stop" (a stop token) or "length"
    finish_reason: str


@dataclass
class Writing:
    """One request's row while a batch decodes (the engine's row owner for a written
    text, beside the candidate draws); ``decode`` turns token ids into text."""

    request: WriteRequest
    ids: list[int]
    decode: Callable[[list[int]], str]
    generator: torch.Generator = field(init=False)
    processors: LogitsProcessorList = field(init=False)
    rows: list[int] = field(default_factory=lambda: [0])
    tokens: list[int] = field(default_factory=list)
    sampled: int = 0
    finish_reason: str = "length"
    _pending: bool = False  # a sentence end was sampled and not yet confirmed

    def __post_init__(self) -> None:
        seed = self.request.seed
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self.generator = torch.Generator().manual_seed(seed)
        self.processors = self.request.processors()

    @property
    def n(self) -> int:
        return 1

    @property
    def max_new_tokens(self) -> int:
        return self.request.max_new_tokens

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """The processed scores of the next token, shape (1, vocab): what is sampled. They
        are computed on the CPU whatever device the model runs on (one row a step), so a
        seeded text is the same on every device up to the model's float rounding."""
        ids = torch.LongTensor([self.ids + self.tokens])
        out: torch.Tensor = self.processors(ids, logits.float().cpu())
        return out

    def advance(self, step: int, logits: torch.Tensor) -> tuple[list[int], torch.Tensor]:
        """Sample this row's next token from ``logits`` (1, vocab); returns ([0], token)
        while it writes on, ([], token) once it has ended."""
        probs = torch.softmax(self.scores(logits), dim=-1)
        nxt = torch.multinomial(probs, 1, generator=self.generator)[:, 0]
        self.sampled += 1
        tok = int(nxt[0])
        if tok in self.request.stop:
            self.finish_reason = "stop"
            return self._end(nxt)
        self.tokens.append(tok)
        if self._sentences_done(tok):
            self.finish_reason = "sentences"
            return self._end(nxt)
        if len(self.tokens) >= self.request.max_new_tokens:
            return self._end(nxt)
        return [0], nxt

    def _end(self, nxt: torch.Tensor) -> tuple[list[int], torch.Tensor]:
        self.rows = []
        return [], nxt

    def _sentences_done(self, tok: int) -> bool:
        """Whether sentence ``sentences + 1`` has begun (checked on the first word after
        a sentence end, when the segmenter can tell an abbreviation from an end)."""
        want = self.request.sentences
        if want is None:
            return False
        piece = self.decode([tok])
        if any(h in piece for h in SENTENCE_END_HINTS):
            self._pending = True
            return False
        if not (self._pending and piece[:1].isspace()):
            return False
        self._pending = False
        return len(split_sentences(self.decode(self.tokens))) > want

    def result(self, seconds: float) -> Written:
        return Written(tuple(self.tokens), self.sampled, len(self.ids), seconds, self.finish_reason)
