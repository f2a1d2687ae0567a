"""PMark (Huo et al. 2026), online variant: multi-channel constraints with medians
estimated from the model's own candidates, so that the constraint halves the next-sentence
distribution channel by channel (distortion-free in the limit of many candidates).

Per step ``t``: draw ``N`` candidate sentences and embed them. For channel ``j`` (a
key-derived unit pivot ``v_j``), the candidates still in play are split at the median of
their projections on ``v_j``, and those on the side of the key's bit ``r[t, j]`` stay;
after ``c`` channels about ``N / 2**c`` remain, and one of them is taken at random. The
bits depend on the step index and the key only (no context hashing), which is why a
reordering of sentences moves them out of step.

Detection re-samples: for each sentence after the first, ``N`` candidates are drawn from
the generator given the text before it, the same halving is replayed, and the sentence's
side of each channel's median is compared with the key's bit. For a text that does not
depend on the key the bits are fair coins, independent of the text, so the number of
agreements over ``(n - 1) * c`` channel-steps is Binomial(., 1/2): the p-value is exact
over keys. The price is the generator at detection: as many candidates per sentence as
generation draws (the paper's Table 5 puts it at 130x SAMark's detection).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from samark.detection_result import Detection
from samark.embed import Embedder
from samark.errors import EmptyTextError
from samark.keys import WatermarkKey, keyed_rng
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import Engine
from samark.schemes.base import check, register_scheme
from samark.schemes.sentence_loop import (
    Draw,
    Pick,
    SentenceLevelWatermark,
    SentenceSamplingConfig,
)
from samark.segment import split_sentences


@dataclass
class _Step:
    t: int
    rng: np.random.Generator


@dataclass(frozen=True)
class PMarkConfig(SentenceSamplingConfig):
    """PMark's ``channels`` (key bits per step) and ``candidates`` per step."""

    channels: int = 4
    candidates: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            1 <= self.channels <= 8 and self.candidates >= 2,
            "need 1 <= channels <= 8 and candidates >= 2",
        )


@register_scheme("pmark")
class PMark(SentenceLevelWatermark["_Step"]):
    """PMark, online: per-step key bits, medians from the model's candidates."""

    name = "pmark"
    config_class = PMarkConfig
    config: PMarkConfig

    def __init__(
        self,
        key: WatermarkKey,
        config: PMarkConfig | None = None,
        *,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        c = config if config is not None else PMarkConfig()
        super().__init__(key, c, embedder=embedder, engine=engine, generator=generator)
        pivot_seed, self._bit_seed = key.derive_ints(self.name, 2)
        pivots = np.random.default_rng(pivot_seed).standard_normal((c.channels, self.embedder.dim))
        self.pivots = pivots / np.linalg.norm(pivots, axis=1, keepdims=True)

    def detector_id(self) -> str:
        return f"{self.name}/c{self.config.channels}/n{self.config.candidates}/{self.embedder.name}"

    def bits(self, t: int) -> np.ndarray:
        """The key's target side (+1 above the median, -1 below) per channel at step t."""
        return keyed_rng(self._bit_seed, [t]).choice([-1.0, 1.0], size=self.config.channels)

    def survivors(
        self, pool: np.ndarray, t: int, sentence: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[bool]]:
        """Halve ``pool`` channel by channel towards the step's bits: the indices left,
        and, for ``sentence``, whether it sat on the bit's side of each channel's median."""
        keep = np.arange(len(pool))
        agree: list[bool] = []
        for pivot, bit in zip(self.pivots, self.bits(t), strict=True):
            proj = pool[keep] @ pivot
            median = float(np.median(proj))
            if sentence is not None:
                agree.append(bool(np.sign(float(sentence @ pivot) - median) == bit))
            side = keep[np.sign(proj - median) == bit]
            keep = side if len(side) else keep
        return keep, agree

    # ---------- the sentence loop's hooks ----------
    def begin(self, prompt: str, seeder: np.random.Generator) -> _Step:
        return _Step(t=0, rng=np.random.default_rng(seeder.integers(2**63)))

    def draws(self, state: _Step) -> list[Draw]:
        return [Draw(self.config.candidates)]

    def pick(self, state: _Step, texts: list[str], pool: np.ndarray) -> Pick | None:
        keep, _ = self.survivors(pool, state.t)
        return Pick(int(state.rng.choice(keep)), "matched", len(keep))

    def enough(self, state: _Step, pick: Pick, draw: Draw, drawn: int) -> bool:
        return True

    def chosen(
        self, state: _Step, sentence: str, embedding: np.ndarray, pool: np.ndarray, pick: Pick
    ) -> dict[str, object]:
        state.t += 1
        return {"kind": pick.kind, "candidates": len(pool), "survivors": pick.detail}

    # ---------- detection (re-sampling) ----------
    def detect(self, text: str) -> Detection:
        sentences = split_sentences(text)
        if len(sentences) < 2:
            raise EmptyTextError(f"{self.name}: needs two sentences (the first is context)")
        emb = self.embedder.encode(sentences)
        agree = steps = sampled = 0
        for t in range(1, len(sentences)):
            context = " ".join(sentences[:t]) + " "
            seed = int.from_bytes(hashlib.sha256(context.encode()).digest()[:8], "little")
            batch = self.engine.sample(context, self.config.candidates, self.sampling, seed=seed)
            sampled += batch.tokens_sampled
            texts = batch.complete
            if len(texts) < 2:
                continue  # no median to replay: this step carries no evidence
            _, sides = self.survivors(self.embed_unique(texts), t, emb[t])
            agree += sum(sides)
            steps += 1
        if not steps:
            raise EmptyTextError(f"{self.name}: the generator gave no candidates to replay")
        trials = steps * self.config.channels
        p = float(binom.sf(agree - 1, trials, 0.5))
        return Detection(
            scheme=self.name,
            p_value=p,
            alpha=self.alpha,
            z=(agree - trials / 2) / (trials / 4) ** 0.5,
            statistic="pmark_binomial",
            score=float(agree),
            n_units=steps,
            unit="sentence",
            details={"agreement": agree / trials, "tokens_resampled": float(sampled)},
        )
