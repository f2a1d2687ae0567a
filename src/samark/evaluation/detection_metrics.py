"""Detection metrics from human (negative) and watermarked/attacked (positive) detections.

Empirical-threshold metrics, as in the paper: TP@FP x% uses the threshold that at most x% of
the human texts exceed; AUC is the Mann-Whitney probability (ties count 1/2). Both rank by
the p-value (smaller = more watermarked), ties broken by the detector's z. With n
negatives, FP 1% rests on n/100 texts: a 95% bootstrap interval goes with every figure.

The calibrated view is separate: the share of texts with p < alpha, on humans (the real
false-positive rate of the fixed rule) and on positives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import rankdata


def evidence(p_values: Sequence[float] | np.ndarray, z: Sequence[float] | np.ndarray) -> np.ndarray:
    """One score per text, larger = more watermarked: -log10(p), ties broken by z."""
    p = np.clip(np.asarray(p_values, dtype=float), 1e-300, 1.0)
    zz = np.nan_to_num(np.asarray(z, dtype=float), nan=0.0, posinf=1e6, neginf=-1e6)
    # z only orders texts with equal p: squash it into less than the gap between p levels
    return -np.log10(p) + 1e-6 * np.tanh(zz / 100.0)


def threshold_at_fpr(negatives: np.ndarray, fpr: float) -> float:
    """The smallest negative score t with mean(negatives > t) <= fpr."""
    if negatives.size == 0:
        raise ValueError("no negatives")
    if not 0 < fpr < 1:
        raise ValueError("fpr must be in (0, 1)")
    desc = np.sort(negatives)[::-1]
    k = int(np.floor(fpr * negatives.size))
    return float(desc[min(k, desc.size - 1)])


def tpr_at_fpr(negatives: np.ndarray, positives: np.ndarray, fpr: float) -> float:
    """TP@FP: the share of positives above the empirical FPR threshold."""
    if positives.size == 0:
        return float("nan")
    return float(np.mean(positives > threshold_at_fpr(negatives, fpr)))


def auc(negatives: np.ndarray, positives: np.ndarray) -> float:
    """P(positive > negative) + P(tie)/2."""
    n1, n0 = positives.size, negatives.size
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(np.concatenate([positives, negatives]))
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def bootstrap_interval(
    negatives: np.ndarray,
    positives: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    *,
    samples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval, resampling negatives and positives independently."""
    if positives.size == 0 or negatives.size == 0 or samples < 1:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    values = np.array(
        [
            statistic(
                negatives[rng.integers(0, negatives.size, negatives.size)],
                positives[rng.integers(0, positives.size, positives.size)],
            )
            for _ in range(samples)
        ]
    )
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def rate_below(p_values: Sequence[float], alpha: float) -> float:
    """The share of p-values below ``alpha`` (FPR on humans, TPR on positives)."""
    p = np.asarray(p_values, dtype=float)
    return float(np.mean(p < alpha)) if p.size else float("nan")
