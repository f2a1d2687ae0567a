"""SynthID-Text (Dathathri et al. 2024) through transformers' own implementation:
``SynthIDTextWatermarkingConfig`` for generation (tournament sampling). transformers'
detector needs a Bayesian model trained per key, so detection uses the paper's unweighted
mean score: under H0 every g-value is a fair coin, so the count of ones over the scored
(non-repeated-context) n-grams and depths is Binomial(n, 1/2), and the exact one-sided
binomial tail is the p-value. The keys derive one-way from the run's secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import torch
from scipy.stats import binomtest
from transformers import SynthIDTextWatermarkingConfig
from transformers.generation.logits_process import SynthIDTextWatermarkLogitsProcessor

from samark.detection_result import Detection
from samark.keys import WatermarkKey
from samark.schemes.base import check, register_scheme
from samark.schemes.lm_generate import (
    TokenRowModels,
    TokenWatermark,
    TokenWatermarkConfig,
    WatermarkingSource,
    token_ids,
)


@dataclass(frozen=True)
class SynthIDConfig(TokenWatermarkConfig):
    """The tournament's depth (its number of keys) and the n-gram that seeds each step."""

    depth: int = 30
    ngram_len: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.depth >= 1 and self.ngram_len >= 2, "need depth >= 1 and ngram_len >= 2")


@register_scheme("synthid")
class SynthID(TokenWatermark):
    """SynthID-Text (tournament sampling, depth = number of keys) via transformers."""

    name = "synthid"
    config_class = SynthIDConfig
    config: SynthIDConfig

    def __init__(
        self,
        key: WatermarkKey,
        config: SynthIDConfig | None = None,
        **models: Unpack[TokenRowModels],
    ) -> None:
        super().__init__(key, config, **models)
        c = self.config
        #: transformers' own config, built from ours
        self.watermarking = SynthIDTextWatermarkingConfig(
            keys=self.derived_keys(c.depth), ngram_len=c.ngram_len
        )
        self._processor: SynthIDTextWatermarkLogitsProcessor | None = None

    def watermarking_config(self) -> WatermarkingSource:
        return self.watermarking

    def detector_id(self) -> str:
        return f"synthid/d{len(self.watermarking.keys)}/n{self.watermarking.ngram_len}"

    @torch.inference_mode()
    def detect(self, text: str) -> Detection:
        self.require_text(text)
        if self._processor is None:
            c = self.watermarking
            self._processor = SynthIDTextWatermarkLogitsProcessor(
                ngram_len=c.ngram_len,
                keys=c.keys,
                sampling_table_size=c.sampling_table_size,
                sampling_table_seed=c.sampling_table_seed,
                context_history_size=c.context_history_size,
                device=torch.device("cpu"),
            )
        proc = self._processor
        ids = token_ids(self.lm, text)
        if ids.shape[1] < proc.ngram_len:
            raise self.too_short(proc.ngram_len)
        g = proc.compute_g_values(ids)[0]  # (positions, depth)
        mask = proc.compute_context_repetition_mask(ids)[0].bool()
        g = g[mask]
        n, ones = int(g.numel()), int(g.sum())
        if n == 0:  # every n-gram context repeats an earlier one
            raise self.too_short(proc.ngram_len)
        mean = ones / n
        z = (ones - n / 2) / (n / 4) ** 0.5
        p = float(binomtest(ones, n, 0.5, alternative="greater").pvalue)
        return Detection(
            scheme=self.name,
            p_value=p,
            alpha=self.alpha,
            z=z,
            statistic="synthid_mean",
            score=mean,
            n_units=int(mask.sum()),
            unit="token",
            details={"g_value_mean": mean},
        )
