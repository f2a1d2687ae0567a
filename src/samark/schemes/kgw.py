"""KGW (Kirchenbauer et al. 2023) through transformers' own implementation:
``WatermarkingConfig`` for generation, ``WatermarkDetector`` (a one-proportion z-test on
green tokens) for detection. The hashing key derives one-way from the run's
:class:`~samark.keys.WatermarkKey` secret.
"""

from __future__ import annotations

from typing import Any

from transformers import WatermarkDetector, WatermarkingConfig

from samark.detection import Detection
from samark.keys import WatermarkKey
from samark.schemes.base import SharedResources, register_scheme
from samark.schemes.lm_generate import TokenWatermark, token_ids, with_generator


class KGW(TokenWatermark):
    """KGW (green list, lefthash, context 1) with transformers' generator and detector."""

    name = "kgw"

    def __init__(
        self,
        key: WatermarkKey,
        *,
        gamma: float = 0.25,
        delta: float = 2.0,
        ignore_repeated_ngrams: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(key, **kwargs)
        if not 0 < gamma < 1 or delta <= 0:
            raise ValueError("need 0 < gamma < 1 and delta > 0")
        (hashing_key,) = self.derived_keys(1)
        self.config = WatermarkingConfig(
            greenlist_ratio=gamma, bias=delta, hashing_key=hashing_key, seeding_scheme="lefthash"
        )
        self.ignore_repeated_ngrams = ignore_repeated_ngrams
        self._detector: WatermarkDetector | None = None

    def watermarking_config(self) -> Any:
        return self.config

    def detector_id(self) -> str:
        c = self.config
        return f"kgw/g{c.greenlist_ratio}/{c.seeding_scheme}/rep{int(self.ignore_repeated_ngrams)}"

    def detect(self, text: str) -> Detection:
        self.require_text(text)
        if self._detector is None:
            self._detector = WatermarkDetector(
                self.lm.model.config,
                "cpu",
                self.config,
                ignore_repeated_ngrams=self.ignore_repeated_ngrams,
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


@register_scheme("kgw")
def _kgw(key: WatermarkKey, *, shared: SharedResources | None = None, **kwargs: Any) -> KGW:
    return KGW(key, **with_generator(shared, kwargs))
