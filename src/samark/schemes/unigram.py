"""Unigram-Watermark (Zhao et al. 2023, "Provable Robust Watermarking for AI-Generated
Text"): one green list for the whole vocabulary, independent of the context, so that no
edit of the neighbours moves a token's colour. Generation adds ``delta`` to the green
logits; detection counts the green tokens among the text's *distinct* tokens (the paper's
choice: repeating a token adds no evidence).

A key that carries a reference integer key (``samark keygen --scheme unigram --hash-key
N``, :attr:`~samark.keys.WatermarkKey.hash_key`) takes the reference's green list instead:
the authors' and MarkLLM's ``[True] * gamma V + [False] * (V - gamma V)`` shuffled by numpy's
PCG64 seeded with the first 4 bytes of SHA-256 of ``N`` as a little-endian int64. Keys
without one keep their list (a permutation's first ``gamma V`` ids).

The p-value is exact. The green list is a uniformly random subset of ``gamma * V`` of the
``V`` token ids (a permutation drawn from the secret), so for a text that does not depend
on the key, the number of green tokens among its ``n`` distinct tokens is hypergeometric
(V, gamma * V, n): no normal approximation, no independence assumption.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Unpack

import numpy as np
import torch
from scipy.stats import hypergeom
from transformers import LogitsProcessor

from samark.detection_result import Detection
from samark.keys import WatermarkKey
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


class GreenBias(LogitsProcessor):
    """Adds ``delta`` to the logits of the green tokens (a fixed mask)."""

    def __init__(self, green: torch.Tensor, delta: float) -> None:
        self.bias = green.to(torch.float32) * delta

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return scores + self.bias[: scores.shape[-1]].to(scores.dtype)  # type: ignore[return-value]


def reference_green_mask(hash_key: int, size: int, n_green: int) -> np.ndarray:
    """The Unigram authors' (and MarkLLM's) green list for integer key ``hash_key``: a
    mask of ``n_green`` leading True values shuffled in place by PCG64 seeded with
    ``sha256(int64 hash_key)[:4]`` read little-endian."""
    digest = hashlib.sha256(hash_key.to_bytes(8, "little", signed=True)).digest()
    mask = np.zeros(size, dtype=bool)
    mask[:n_green] = True
    np.random.default_rng(int.from_bytes(digest[:4], "little")).shuffle(mask)
    return mask


@dataclass(frozen=True)
class UnigramConfig(TokenWatermarkConfig):
    """The green list's share ``gamma`` and the logit bias ``delta`` (Zhao et al. 2023)."""

    gamma: float = 0.5
    delta: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 < self.gamma < 1 and self.delta > 0, "need 0 < gamma < 1 and delta > 0")


@register_scheme("unigram")
class Unigram(TokenWatermark):
    """Unigram-Watermark: a fixed green list, a logit bias, an exact hypergeometric test."""

    name = "unigram"
    config_class = UnigramConfig
    config: UnigramConfig

    def __init__(
        self,
        key: WatermarkKey,
        config: UnigramConfig | None = None,
        **models: Unpack[TokenRowModels],
    ) -> None:
        super().__init__(key, config, **models)
        (self._seed,) = self.derived_keys(1)
        self._green: torch.Tensor | None = None

    def green_mask(self, size: int) -> torch.Tensor:
        """The green list as a boolean mask over ``size`` token ids (numpy's PCG64 from the
        derived key, or the reference's from the key's ``hash_key``: the same list on every
        platform)."""
        if self._green is None or len(self._green) != size:
            n_green = int(self.config.gamma * size)
            if self.key.hash_key is not None:
                mask = reference_green_mask(self.key.hash_key, size, n_green)
            else:
                order = np.random.default_rng(self._seed).permutation(size)
                mask = np.zeros(size, dtype=bool)
                mask[order[:n_green]] = True
            self._green = torch.from_numpy(mask)
        return self._green

    def watermarking_config(self) -> WatermarkingSource:
        return ProcessorWatermarking(
            lambda size, _device: GreenBias(self.green_mask(size), self.config.delta)
        )

    def detector_id(self) -> str:
        return f"unigram/g{self.config.gamma}"

    def detect(self, text: str) -> Detection:
        self.require_text(text)
        size = vocab_size(self.lm)
        green = self.green_mask(size).numpy()
        distinct = np.unique(token_ids(self.lm, text)[0].numpy())
        distinct = distinct[distinct < size]
        n = len(distinct)
        if n == 0:
            raise self.too_short(1)
        k = int(green[distinct].sum())
        n_green = int(green.sum())
        p = float(hypergeom.sf(k - 1, size, n_green, n))
        share = n_green / size
        z = (k - share * n) / math.sqrt(n * share * (1 - share))
        return Detection(
            scheme=self.name,
            p_value=min(max(p, 0.0), 1.0),
            alpha=self.alpha,
            z=z,
            statistic="unigram_hypergeom",
            score=float(k),
            n_units=n,
            unit="token",
            details={"green_fraction": k / n},
        )
