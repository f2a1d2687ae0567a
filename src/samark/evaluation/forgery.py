"""How often a detector attributes forged texts to its key: the forgery harness.

A forgery attack (``Attack.kind == "forgery"``: ``piggyback``, ``token-stealing``,
``semantic-stealing``; docs/evaluation.md, "Forgery attacks") writes text the key did not
write, or changes what a marked text says. A detection of its output is the attacker's
success: a false attribution. The share detected at ``p < alpha`` is that success rate;
the median p-value says how far the rest fell short. A forged text with nothing to score
is a forgery nothing detects (p = 1).

An operator measures their own deployment with the detector they serve, on marked texts
their endpoint wrote (the attacker's material)::

    from samark.evaluation.attacks import create_attack
    from samark.evaluation.forgery import measure_forgery

    outcome = measure_forgery(scheme, create_attack("piggyback"), marked_texts)
    print(f"{100 * outcome.detected:.1f}% of {outcome.forgeries} forgeries detected")

``benchmarks/studies/forgery.py`` measures every scheme this way
(docs/results/2026-11-26-forgery/README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from samark.detection import pipeline
from samark.detection.ring_detector import RingDetector
from samark.detection_result import Detection
from samark.errors import SamarkError
from samark.evaluation.attacks.base import Attack
from samark.evaluation.detection_metrics import rate_below
from samark.schemes.base import Watermark

#: the significance level of the forgery results (docs/results/2026-11-26-forgery)
ALPHA = 0.01


#: what detects the forgeries: a scheme (its key as a ring of one) or a keyring's detector
TextDetector = Watermark | RingDetector


@dataclass(frozen=True)
class ForgeryOutcome:
    """What a detector made of ``forgeries`` forged texts."""

    forgeries: int
    #: the share detected at ``p < alpha``: the attacker's success rate (NaN for none)
    detected: float
    #: the median p-value (NaN for none)
    median_p: float
    alpha: float

    @classmethod
    def of(cls, p_values: Sequence[float], alpha: float = ALPHA) -> ForgeryOutcome:
        """The outcome of the forged texts' p-values (one a text)."""
        if not 0.0 < alpha < 1.0:
            raise SamarkError(f"alpha must be in (0, 1), got {alpha!r}")
        p = [float(v) for v in p_values]
        median = float(np.median(p)) if p else float("nan")
        return cls(len(p), rate_below(p, alpha), median, alpha)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "forgeries": self.forgeries,
            "detected": self.detected,
            "median_p": self.median_p,
            "alpha": self.alpha,
        }


def detect_forgeries(detector: TextDetector, texts: Sequence[str]) -> list[Detection | None]:
    """Each forged text's detection through the one detection pipeline (prepared once,
    scored together: :mod:`samark.detection.pipeline`; a keyring's the family-wise one), or
    None where it has nothing to score (a forgery nothing detects)."""
    ring = RingDetector.of_scheme(detector) if isinstance(detector, Watermark) else detector
    answers = pipeline.detect(ring, texts, limits=None)
    return [None if isinstance(a, SamarkError) else a.as_detection() for a in answers]


def forgery_p_values(detections: Sequence[Detection | None]) -> list[float]:
    """The detections' p-values, 1 for a text with nothing to score."""
    return [1.0 if d is None else float(d.p_value) for d in detections]


def measure_forgery(
    detector: TextDetector,
    attack: Attack,
    texts: Sequence[str],
    *,
    seeds: Sequence[int] | None = None,
    alpha: float = ALPHA,
) -> ForgeryOutcome:
    """Forge one text from each of ``texts`` with ``attack`` (a forgery attack; the i-th
    under ``seeds[i]``, by default ``i``) and measure how often ``detector`` attributes the
    forgeries to its key. ``texts`` are the attacker's input: marked texts for
    ``piggyback``, prompts or placeholders for the stealing attacks (which learn from the
    marked texts they were built with)."""
    if attack.kind != "forgery":
        raise SamarkError(
            f"attack {attack.name!r} is a {attack.kind} attack: its detection rate is the "
            "mark's survival, not a forger's success"
        )
    texts = list(texts)
    forged = attack.apply_batch(
        texts, seeds=list(range(len(texts))) if seeds is None else list(seeds)
    )
    return ForgeryOutcome.of(forgery_p_values(detect_forgeries(detector, forged)), alpha)
