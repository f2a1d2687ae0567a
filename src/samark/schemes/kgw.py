"""KGW (Kirchenbauer et al. 2023) through transformers' own implementation:
``WatermarkingConfig`` for generation, ``WatermarkDetector`` (a one-proportion z-test on
green tokens) for detection. The hashing key derives one-way from the run's
:class:`~samark.keys.WatermarkKey` secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformers import WatermarkDetector, WatermarkingConfig

from samark.detection_result import Detection
from samark.keys import WatermarkKey
from samark.schemes.base import check, register_scheme
from samark.schemes.lm_generate import (
    TokenWatermark,
    TokenWatermarkConfig,
    token_ids,
)


@dataclass(frozen=True)
class KGWConfig(TokenWatermarkConfig):
    """The green list's share ``gamma`` and the logit bias ``delta`` (the paper's
    gamma = 0.25, delta = 2); ``ignore_repeated_ngrams`` scores each (context, token) pair
    once."""

    gamma: float = 0.25
    delta: float = 2.0
    ignore_repeated_ngrams: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 < self.gamma < 1 and self.delta > 0, "need 0 < gamma < 1 and delta > 0")


@register_scheme("kgw")
class KGW(TokenWatermark):
    """KGW (green list, lefthash, context 1) with transformers' generator and detector."""

    name = "kgw"
    config_class = KGWConfig
    config: KGWConfig

    def __init__(self, key: WatermarkKey, config: KGWConfig | None = None, **kw: Any) -> None:
        super().__init__(key, config, **kw)
        c = self.config
        (hashing_key,) = self.derived_keys(1)
        #: transformers' own config, built from ours
        self.watermarking = WatermarkingConfig(
            greenlist_ratio=c.gamma,
            bias=c.delta,
            hashing_key=hashing_key,
            seeding_scheme="lefthash",
        )
        self._detector: WatermarkDetector | None = None

    def watermarking_config(self) -> Any:
        return self.watermarking

    def detector_id(self) -> str:
        w = self.watermarking
        rep = int(self.config.ignore_repeated_ngrams)
        return f"kgw/g{w.greenlist_ratio}/{w.seeding_scheme}/rep{rep}"

    def detect(self, text: str) -> Detection:
        self.require_text(text)
        if self._detector is None:
            self._detector = WatermarkDetector(
                self.lm.model.config,
                "cpu",
                self.watermarking,
                ignore_repeated_ngrams=self.config.ignore_repeated_ngrams,
            )
        ids = token_ids(self.lm, text)
        if ids.shape[1] < 2:
            raise self.too_short(2)
        out: Any = self._detector(ids, z_threshold=4.0, return_dict=True)
        z = float(out.z_score[0])
        return Detection(
            scheme=self.name,
            p_value=float(out.p_value[0]),
            alpha=self.alpha,
            z=z,
            statistic="kgw_z",
            score=z,
            n_units=int(out.num_tokens_scored[0]),
            unit="token",
            details={"green_fraction": float(out.green_fraction[0])},
        )
