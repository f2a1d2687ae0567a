"""KGW (Kirchenbauer et al. 2023) through transformers' own implementation:
``WatermarkingConfig`` for generation, ``WatermarkDetector`` (a one-proportion z-test on
green tokens) for detection. The hashing key derives one-way from the run's
:class:`~samark.keys.WatermarkKey` secret, or is the reference integer key the key carries
(``samark keygen --scheme kgw --hash-key 15485863``).

Two seedings of a context's green list: ``lefthash`` (transformers', as the authors'
``simple_1``: the generator seeded with ``hash_key * prev``) and ``markllm`` (MarkLLM
0.1.5's KGW: ``(hash_key * prf[prev]) mod V``, where ``prf`` is a permutation of the
vocabulary drawn with ``hash_key``). With ``seeding="markllm"``, the same ``gamma``,
``ignore_repeated_ngrams=False`` and a key that carries MarkLLM's ``hash_key``, the z-score
is MarkLLM's to the last bit (``tests/test_markllm_crosscheck.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import numpy as np
import torch
from transformers import WatermarkDetector, WatermarkingConfig, WatermarkLogitsProcessor
from transformers.generation.watermarking import WatermarkDetectorOutput

from samark.detection_result import Detection
from samark.keys import WatermarkKey
from samark.schemes.base import check, register_scheme
from samark.schemes.lm_generate import (
    Device,
    ProcessorWatermarking,
    TokenRowModels,
    TokenWatermark,
    TokenWatermarkConfig,
    WatermarkingSource,
    token_ids,
    vocab_size,
)


@dataclass(frozen=True)
class KGWConfig(TokenWatermarkConfig):
    """The green list's share ``gamma`` and the logit bias ``delta`` (the paper's
    gamma = 0.25, delta = 2); ``ignore_repeated_ngrams`` scores each (context, token) pair
    once; ``seeding`` is ``lefthash`` (transformers') or ``markllm`` (MarkLLM 0.1.5's)."""

    gamma: float = 0.25
    delta: float = 2.0
    ignore_repeated_ngrams: bool = True
    seeding: str = "lefthash"

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 < self.gamma < 1 and self.delta > 0, "need 0 < gamma < 1 and delta > 0")
        check(
            self.seeding in SEEDINGS,
            f"seeding must be one of {', '.join(SEEDINGS)}, got {self.seeding!r}",
        )


#: the green list's seedings: transformers' (the default) and MarkLLM 0.1.5's
SEEDINGS = ("lefthash", "markllm")


class MarkLLMSeededProcessor(WatermarkLogitsProcessor):
    """transformers' KGW processor with MarkLLM 0.1.5's left-hash seeding: the generator
    that permutes the vocabulary is seeded with ``(hash_key * prf[prev]) mod V``, ``prf`` a
    permutation of the ``V`` token ids drawn by torch's generator seeded with ``hash_key``
    (MarkLLM's ``KGWUtils``, ``f_scheme="time"``, ``prefix_length=1``)."""

    def __init__(
        self, vocab_size: int, device: Device, greenlist_ratio: float, bias: float, hashing_key: int
    ) -> None:
        super().__init__(
            vocab_size, device, greenlist_ratio=greenlist_ratio, bias=bias, hashing_key=hashing_key
        )
        rng = torch.Generator(device=device)
        rng.manual_seed(self.hash_key)
        self.prf = torch.randperm(vocab_size, device=device, generator=rng)

    def set_seed(self, input_seq: torch.LongTensor) -> None:
        prev = int(input_seq[-1].item()) % self.vocab_size
        # in Python's integers, as MarkLLM's ``_f`` hands over an int (no int64 wrap)
        self.rng.manual_seed((self.hash_key * int(self.prf[prev])) % self.vocab_size)


@register_scheme("kgw")
class KGW(TokenWatermark):
    """KGW (green list, lefthash, context 1) with transformers' generator and detector."""

    name = "kgw"
    config_class = KGWConfig
    config: KGWConfig

    def __init__(
        self, key: WatermarkKey, config: KGWConfig | None = None, **models: Unpack[TokenRowModels]
    ) -> None:
        super().__init__(key, config, **models)
        c = self.config
        (derived,) = self.derived_keys(1)
        hashing_key = derived if key.hash_key is None else key.hash_key
        #: transformers' own config, built from ours
        self.watermarking = WatermarkingConfig(
            greenlist_ratio=c.gamma,
            bias=c.delta,
            hashing_key=hashing_key,
            seeding_scheme="lefthash",
        )
        self._detector: WatermarkDetector | None = None

    def processor(self, size: int, device: Device = "cpu") -> WatermarkLogitsProcessor:
        """The logits processor of this key and seeding over ``size`` token ids."""
        if self.config.seeding == "lefthash":
            built: WatermarkLogitsProcessor = self.watermarking.construct_processor(size, device)
            return built
        w = self.watermarking
        return MarkLLMSeededProcessor(
            size, device, greenlist_ratio=w.greenlist_ratio, bias=w.bias, hashing_key=w.hashing_key
        )

    def watermarking_config(self) -> WatermarkingSource:
        if self.config.seeding == "lefthash":
            return self.watermarking
        return ProcessorWatermarking(self.processor)

    def detector_id(self) -> str:
        w = self.watermarking
        rep = int(self.config.ignore_repeated_ngrams)
        seeding = w.seeding_scheme if self.config.seeding == "lefthash" else self.config.seeding
        return f"kgw/g{w.greenlist_ratio}/{seeding}/rep{rep}"

    def detect(self, text: str) -> Detection:
        self.require_text(text)
        if self._detector is None:
            self._detector = WatermarkDetector(
                self.lm.model.config,
                "cpu",
                self.watermarking,
                ignore_repeated_ngrams=self.config.ignore_repeated_ngrams,
            )
            if self.config.seeding != "lefthash":
                self._detector.processor = self.processor(vocab_size(self.lm))
        ids = token_ids(self.lm, text)
        if ids.shape[1] < 2:
            raise self.too_short(2)
        out = self._detector(ids, z_threshold=4.0, return_dict=True)
        fields = (
            (out.z_score, out.p_value, out.num_tokens_scored, out.green_fraction)
            if isinstance(out, WatermarkDetectorOutput)
            else (None,)
        )
        if any(f is None for f in fields):  # return_dict: a full output, always
            raise TypeError(f"the KGW detector returned no scores: {type(out).__name__}")
        z_score, p_value, scored, green = (np.asarray(f) for f in fields)
        z = float(z_score[0])
        return Detection(
            scheme=self.name,
            p_value=float(p_value[0]),
            alpha=self.alpha,
            z=z,
            statistic="kgw_z",
            score=z,
            n_units=int(scored[0]),
            unit="token",
            details={"green_fraction": float(green[0])},
        )
