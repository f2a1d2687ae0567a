"""MorphMark (Wang et al. 2025, "MorphMark: Flexible Adaptive Watermarking for Large
Language Models"): KGW's context-seeded green lists, with a strength that adapts to the
step. Where the green tokens already hold probability mass ``P_G`` of at least ``p0``, a
share ``r(P_G)`` of the red mass moves to the green tokens, in proportion to their own
probabilities (``r = exp(k * P_G) - 1``, capped at 1, the paper's exponential form with
MarkLLM's defaults); below ``p0`` the step is left alone. Strong where the green list can
take it without cost in quality, absent where it cannot.

Detection is KGW's: the green lists are transformers' own (lefthash, context 1), so
transformers' ``WatermarkDetector`` scores them (one-proportion z-test over the distinct
bigrams).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Unpack

import torch
from transformers import WatermarkingConfig
from transformers.generation.logits_process import WatermarkLogitsProcessor

from samark.keys import WatermarkKey
from samark.schemes.base import check, register_scheme
from samark.schemes.kgw import KGW, KGWConfig
from samark.schemes.lm_generate import (
    Device,
    ProcessorWatermarking,
    TokenRowModels,
    WatermarkingSource,
)


class MorphProcessor(WatermarkLogitsProcessor):
    """transformers' KGW green lists; MorphMark's adaptive reweighting instead of a bias."""

    def __init__(
        self, vocab_size: int, device: Device, config: WatermarkingConfig, k: float, p0: float
    ):
        super().__init__(
            vocab_size,
            device,
            greenlist_ratio=config.greenlist_ratio,
            hashing_key=config.hashing_key,
            seeding_scheme=config.seeding_scheme,
            context_width=config.context_width,
        )
        self.k = k
        self.p0 = p0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.context_width:
            return scores
        out = scores.clone()
        for row, seq in enumerate(input_ids):
            probs = torch.softmax(scores[row].float(), dim=-1)
            green = torch.zeros_like(probs, dtype=torch.bool)
            green[self._get_greenlist_ids(seq)] = True
            mass = float(probs[green].sum())
            if mass < self.p0 or mass >= 1.0:
                continue
            moved = min(math.exp(self.k * mass) - 1.0, 1.0) * (1.0 - mass)
            new = torch.where(
                green, probs * (1 + moved / mass), probs * (1 - moved / (1.0 - mass))
            ).clamp(min=0.0)
            out[row] = torch.log(new / new.sum()).to(scores.dtype)
        return out  # type: ignore[return-value]


@dataclass(frozen=True)
class MorphMarkConfig(KGWConfig):
    """KGW's green lists (gamma 0.5; ``delta`` unused) reweighted by the green mass:
    strength ``k``, no change below green mass ``p0``."""

    gamma: float = 0.5
    k: float = 1.3
    p0: float = 0.15

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.k > 0 and 0 <= self.p0 < 1, "need k > 0 and 0 <= p0 < 1")


@register_scheme("morphmark")
class MorphMark(KGW):
    """MorphMark: adaptive green-list reweighting, KGW's detector."""

    name = "morphmark"
    config_class = MorphMarkConfig
    config: MorphMarkConfig

    def __init__(
        self,
        key: WatermarkKey,
        config: MorphMarkConfig | None = None,
        **models: Unpack[TokenRowModels],
    ) -> None:
        super().__init__(key, config, **models)

    def detector_id(self) -> str:
        return "morphmark/" + super().detector_id().split("/", 1)[1]  # its own green lists

    def watermarking_config(self) -> WatermarkingSource:
        return ProcessorWatermarking(
            lambda size, device: MorphProcessor(
                size, device, self.watermarking, self.config.k, self.config.p0
            )
        )
