"""SAMark's detection statistics (paper Alg. 2) and their calibrated p-value.

All functions are vectorised over many pivot sets at once: the secret key's and K public
null sets. Every statistic here is a symmetric function of the sentences, so it does not
depend on their order.

Why a p-value by exchangeability: the paper's z is not calibrated (sentences of one text
are correlated, so majority-voted flags inflate it on human text). Under H0 the text does
not depend on the key, and the key's pivots are Haar-random, so they are exchangeable with
K fresh Haar pivot sets: the rank of the key's statistic among all K+1 values is uniform,
and ``p = (1 + #{T_k >= T_key}) / (K + 1)`` is a valid p-value for *any* statistic T.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Statistic = Literal["z", "alignment", "scan"]  # SAMarkDetection.statistic: the default
STATISTICS: tuple[str, ...] = ("z", "alignment", "scan")

#: the scan statistic looks at the best-scoring subsets of at least this share of sentences
SCAN_MIN_SHARE = 0.25


def channel_responses(embeddings: np.ndarray, pivots: np.ndarray) -> np.ndarray:
    """Cosines ``C[k, i, j] = cos(E_i, v_kj)``.

    ``embeddings`` (n, d) with unit rows; ``pivots`` (c, d) or (K, c, d) with unit rows.
    Returns (K, n, c) (K = 1 for a single pivot set).
    """
    piv = pivots[None] if pivots.ndim == 2 else pivots
    k, c, d = piv.shape
    flat = embeddings @ piv.reshape(k * c, d).T  # (n, K*c): one BLAS call
    return np.ascontiguousarray(flat.reshape(-1, k, c).transpose(1, 0, 2))


def inferred_flags(responses: np.ndarray) -> np.ndarray:
    """Majority-vote flags ``r_hat[k, j] = sgn(sum_i C[k, i, j])`` (ties -> +1), (K, c)."""
    return np.where(responses.sum(axis=1) >= 0, 1.0, -1.0)


def alignment(responses: np.ndarray, kappa: float, use_tanh: bool = True) -> np.ndarray:
    """Evidence ``A[k, i, j] = tanh(kappa * C[k, i, j] * r_hat[k, j])`` (or without tanh)."""
    signed = responses * inferred_flags(responses)[:, None, :]
    return np.tanh(kappa * signed) if use_tanh else signed


def paper_z(evidence: np.ndarray) -> np.ndarray:
    """The paper's z = mean(A) * sqrt(nc) / std(A) per pivot set, shape (K,).

    A zero spread (all entries equal) gives +inf for a positive mean, 0 otherwise.
    """
    k = evidence.shape[0]
    flat = evidence.reshape(k, -1)
    mean = flat.mean(axis=1)
    std = flat.std(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = mean * np.sqrt(flat.shape[1]) / std
    return np.where(std > 1e-12, z, np.where(mean > 0, np.inf, 0.0))


def mean_alignment(evidence: np.ndarray) -> np.ndarray:
    """Mean evidence over sentences and channels per pivot set, shape (K,).

    Bounded per sentence, so -- unlike z, whose spread shrinks when a text repeats itself --
    it does not reward repetition.
    """
    k = evidence.shape[0]
    return evidence.reshape(k, -1).mean(axis=1)


def sentence_scores(evidence: np.ndarray) -> np.ndarray:
    """Each sentence's evidence: its weakest channel, shape (K, n).

    Alg. 1 keeps a candidate only if it lies on the flag side of *every* channel, so a
    marked sentence shows positive evidence on all of them, while an unmarked one matches
    all c flags by chance only (1 in 2^c). The minimum over channels says exactly that.
    """
    return evidence.min(axis=2)


def scan(evidence: np.ndarray, min_share: float = SCAN_MIN_SHARE) -> np.ndarray:
    """A scan over marked subsets, for text mixed with human writing, shape (K,).

    ``max_k sum(top k sentence scores) / sqrt(k)`` over ``k >= ceil(min_share * n)``: the
    standardised evidence of the best-scoring k sentences, maximised over k. When every
    sentence is marked it is the full sum (k = n); when half are, it ignores the other half.
    The null pivot sets are scanned the same way, so the p-value pays for the search.
    """
    scores = -np.sort(-sentence_scores(evidence), axis=1)  # descending per pivot set
    lo = scan_min_count(scores.shape[1], min_share)
    return _top_k_curve(scores)[:, lo - 1 :].max(axis=1)


def _top_k_curve(descending: np.ndarray) -> np.ndarray:
    """``sum(top k) / sqrt(k)`` for k = 1..n of scores sorted in descending order."""
    return np.cumsum(descending, axis=-1) / np.sqrt(np.arange(1, descending.shape[-1] + 1))


def scan_min_count(n: int, min_share: float = SCAN_MIN_SHARE) -> int:
    """The fewest sentences the scan may keep out of ``n``."""
    return max(1, int(np.ceil(min_share * n)))


def scan_subset(evidence: np.ndarray, min_share: float = SCAN_MIN_SHARE) -> np.ndarray:
    """The sentences the key's scan keeps (row 0 of ``evidence``): a boolean mask (n,)."""
    own = sentence_scores(evidence[:1])[0]
    order = np.argsort(-own, kind="stable")
    lo = scan_min_count(own.size, min_share)
    k = lo + int(np.argmax(_top_k_curve(own[order])[lo - 1 :]))
    mask = np.zeros(own.size, dtype=bool)
    mask[order[:k]] = True
    return mask


def sentence_p_values(evidence: np.ndarray) -> np.ndarray:
    """Per-sentence p-values, shape (n,): sentence i's score under the key's pivots (row 0)
    ranked among its scores under the null pivot sets, ``(1 + #{s_k >= s_key}) / (K + 1)``.

    Exact for every sentence of a text that does not depend on the key (the same
    exchangeability argument as the text's p-value). In a marked text mixed with human
    sentences the flags come from the marked ones; a human sentence's key score then has
    no preferred sign while each null set's flags lean towards it, so its p-value is
    conservative (measured in docs/statistics.md).
    """
    s = sentence_scores(evidence)
    return (1 + np.count_nonzero(s[1:] >= s[:1] - 1e-12, axis=0)) / s.shape[0]


def statistic_values(evidence: np.ndarray, statistic: Statistic) -> np.ndarray:
    if statistic == "z":
        return paper_z(evidence)
    if statistic == "alignment":
        return mean_alignment(evidence)
    if statistic == "scan":
        return scan(evidence)
    raise ValueError(f"unknown statistic {statistic!r}; choose one of {STATISTICS}")


def exchangeable_p_value(observed: float, null: np.ndarray) -> float:
    """``(1 + #{null >= observed}) / (K + 1)``: exact (conservative under ties)."""
    return float((1 + np.count_nonzero(null >= observed - 1e-12)) / (null.size + 1))


def sequential_p_value(observed: float, null: np.ndarray, exceedances: int, total: int) -> float:
    """Besag and Clifford's sequential Monte Carlo p-value (Biometrika 78, 1991): null
    values are drawn in order until ``exceedances`` of them reach ``observed``, at most
    ``total``. ``null``: the values drawn, in draw order (at least up to that stop).

    Stopped at the h-th exceedance after l draws, ``p = h / l``; never stopped (all
    ``total`` drawn, g < h of them at or above), ``p = (g + 1) / (total + 1)``, the fixed
    p-value. Valid, P(p <= u) <= u under H0, for any h >= 1: a text far from significance
    stops after about h / p draws instead of ``total``, and a p-value below
    ``h / total`` is the fixed one exactly. Ties count against the key, as everywhere."""
    if exceedances < 1:
        raise ValueError("exceedances must be at least 1")
    hits = np.flatnonzero(null >= observed - 1e-12)
    if hits.size >= exceedances:
        return float(exceedances / (hits[exceedances - 1] + 1))
    if null.size < total:
        raise ValueError(
            f"{null.size} of {total} null values drawn and only {hits.size} exceedances: "
            "the sequence stopped too early"
        )
    return float((hits.size + 1) / (total + 1))


def ring_max_p_value(ring: np.ndarray, null: np.ndarray) -> float:
    """The p-value of ``max(ring)`` among exchangeable values: exact for "some key of the
    ring marked this text" when the K ring values and the M null values are exchangeable
    under H0 (K keys and M public null pivot sets, all drawn from one law).

    Under H0 the ring's K values sit at a uniformly random K-subset of the K + M ranks.
    With ``j`` values (ring and null) at or above the ring's best, the p-value is the
    chance that a random K-subset reaches the top ``j``:
    ``1 - C(K + M - j, K) / C(K + M, K)``. For K = 1 it is
    :func:`exchangeable_p_value`. Ties count against the ring (conservative).
    """
    k, m = ring.size, null.size
    if k < 1:
        raise ValueError("a ring needs at least one key")
    top = float(ring.max())
    j = int(np.count_nonzero(ring >= top - 1e-12) + np.count_nonzero(null >= top - 1e-12))
    miss = 1.0
    for i in range(k):
        miss *= max(0, m + k - j - i) / (m + k - i)
    return float(min(1.0, 1.0 - miss))
