"""EXP, the exponential-minimum (Gumbel) watermark of Aaronson (2022), as MarkLLM names it:
at each step a key-seeded uniform vector ``r`` over the vocabulary, drawn from the previous
``context`` tokens, picks the token ``argmax r_i ** (1 / p_i)`` of the distribution ``p``
that would be sampled. Over the key, that pick is a sample from ``p`` (no distortion per
step); given the key and the context, it is fixed.

Detection sums ``-log(1 - r_x)`` over the text's tokens ``x``. For a text that does not
depend on the key, each ``r_x`` is uniform and those of distinct (context, token) pairs are
independent, so over the distinct pairs the sum is Gamma(n, 1): the p-value is exact.
Repeated pairs are scored once, as they carry no new evidence (and would break the
independence).

Kuditipudi et al.'s EXP-edit (edit-distance alignment against a fixed key sequence) is more
robust to insertions and deletions but costs a permutation test per text; this row is the
Aaronson form the paper's table and MarkLLM run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Unpack

import numpy as np
import torch
from scipy.stats import gamma as gamma_dist
from transformers import LogitsProcessor

from samark.detection_result import Detection
from samark.keys import WatermarkKey, keyed_rng
from samark.schemes.base import check, register_scheme
from samark.schemes.lm_generate import (
    ProcessorWatermarking,
    TokenRowModels,
    TokenWatermark,
    TokenWatermarkConfig,
    WatermarkingSource,
    token_ids,
    vocab_size,
)


class UniformTable:
    """The key's uniform vector for a context: numpy's PCG64 seeded by a hash of the key
    and the context's token ids (the same numbers on every platform)."""

    def __init__(self, secret: int, size: int) -> None:
        self.secret = secret
        self.size = size

    def vector(self, context: list[int]) -> np.ndarray:
        return keyed_rng(self.secret, context).random(self.size)


class GumbelPick(LogitsProcessor):
    """Leaves one token per row: ``argmax log(r) / p`` over the tokens ``p`` can sample."""

    def __init__(self, table: UniformTable, context: int) -> None:
        self.table = table
        self.context = context

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.context:
            return scores
        probs = torch.softmax(scores.float(), dim=-1)
        out = torch.full_like(scores, -math.inf)
        for row, ids in enumerate(input_ids.tolist()):
            r = torch.from_numpy(self.table.vector(ids[-self.context :]))
            width = min(len(r), probs.shape[-1])
            p = probs[row, :width]
            keys = torch.where(p > 0, torch.log(r[:width]).float() / p, -math.inf)
            out[row, int(torch.argmax(keys))] = 0.0
        return out  # type: ignore[return-value]


@dataclass(frozen=True)
class EXPConfig(TokenWatermarkConfig):
    """The tokens of context that key each step's uniform draws."""

    context: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.context >= 1, "context must be >= 1")


@register_scheme("exp")
class EXP(TokenWatermark):
    """Aaronson's exponential-minimum watermark with an exact Gamma p-value."""

    name = "exp"
    config_class = EXPConfig
    config: EXPConfig

    def __init__(
        self, key: WatermarkKey, config: EXPConfig | None = None, **models: Unpack[TokenRowModels]
    ) -> None:
        super().__init__(key, config, **models)
        (self._secret,) = self.derived_keys(1)

    def watermarking_config(self) -> WatermarkingSource:
        return ProcessorWatermarking(
            lambda size, _device: GumbelPick(UniformTable(self._secret, size), self.config.context)
        )

    def detector_id(self) -> str:
        return f"exp/h{self.config.context}"

    def detect(self, text: str) -> Detection:
        self.require_text(text)
        table = UniformTable(self._secret, vocab_size(self.lm))
        ids = [int(t) for t in token_ids(self.lm, text)[0]]
        h = self.config.context
        pairs = {(tuple(ids[t - h : t]), ids[t]) for t in range(h, len(ids)) if ids[t] < table.size}
        if not pairs:
            raise self.too_short(h + 1)
        score = float(sum(-math.log1p(-table.vector(list(c))[x]) for c, x in pairs))
        n = len(pairs)
        return Detection(
            scheme=self.name,
            p_value=float(gamma_dist.sf(score, n)),
            alpha=self.alpha,
            z=(score - n) / math.sqrt(n),
            statistic="exp_gamma",
            score=score,
            n_units=n,
            unit="token",
            details={"mean_score": score / n},
        )
