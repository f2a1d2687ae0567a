"""One key's false-positive rate on human text of the operator's own domain.

The p-value is exact over keys: a random key flags a human text with probability alpha.
One fixed key can still lean towards the mean direction of a domain that none of its
avoided directions covers, and then flag more of that domain's texts than alpha (measured
on technical prose in docs/statistics.md). Before a key marks text of a
known domain, score human text of that domain with it: the count of p < alpha must stay
within the binomial bound, and the p-values must not be stochastically smaller than
uniform.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from scipy import stats

from samark.detection.record_files import BatchDetector
from samark.errors import SamarkError
from samark.keys import WatermarkKey

if TYPE_CHECKING:
    from samark.embed import Embedder

#: the fewest human texts a check accepts; its power grows with their number (at
#: alpha = 1%, 500 texts bound the count at 13, 2.6%; 20 texts only at 3, 15%)
MIN_TEXTS = 20


class KeyCheckFields(TypedDict):
    """:meth:`KeyCheck.to_dict`: a key's check on human texts as JSON."""

    texts: int
    flagged: int
    fpr: float
    fpr_95: list[float]
    alpha: float
    confidence: float
    bound: int
    ks_pvalue: float
    holds: bool


@dataclass(frozen=True)
class KeyCheck:
    """What one key did on ``texts`` human texts (those with at least one sentence)."""

    texts: int
    flagged: int  # texts with p < alpha
    alpha: float
    confidence: float
    bound: int  # the one-sided binomial bound on ``flagged`` at ``confidence``
    ks_pvalue: float  # one-sided KS: p-values stochastically smaller than uniform?

    @property
    def fpr(self) -> float:
        return self.flagged / self.texts

    @property
    def fpr_interval(self) -> tuple[float, float]:
        """A two-sided 95% (Clopper-Pearson) interval for this key's false-positive rate
        on the domain the texts come from: what one key gives there, with its uncertainty."""
        k, n = self.flagged, self.texts
        low = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
        high = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
        return low, high

    @property
    def holds(self) -> bool:
        """Within the bound, and no sign that p is smaller than uniform (at 1 - confidence)."""
        return self.flagged <= self.bound and self.ks_pvalue > 1.0 - self.confidence

    @classmethod
    def of(cls, p_values: np.ndarray, alpha: float = 0.01, confidence: float = 0.999) -> KeyCheck:
        """The check of one key's p-values on human texts (one per text)."""
        p = np.asarray(p_values, dtype=float)
        return cls(
            texts=len(p),
            flagged=int(np.sum(p < alpha)),
            alpha=alpha,
            confidence=confidence,
            bound=int(stats.binom.ppf(confidence, len(p), alpha)),
            ks_pvalue=float(stats.kstest(p, "uniform", alternative="greater").pvalue),
        )

    def to_dict(self) -> KeyCheckFields:
        return {
            "texts": self.texts,
            "flagged": self.flagged,
            "fpr": self.fpr,
            "fpr_95": list(self.fpr_interval),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "bound": self.bound,
            "ks_pvalue": self.ks_pvalue,
            "holds": self.holds,
        }


def check_key(
    detector: BatchDetector,
    texts: Sequence[str],
    *,
    alpha: float = 0.01,
    confidence: float = 0.999,
) -> KeyCheck:
    """Score human ``texts`` with ``detector`` (a SAMark scheme or detector holding the
    key) and compare its count of p < ``alpha`` with the one-sided binomial bound at
    ``confidence``. Texts without a sentence are left out; at least ``MIN_TEXTS`` must
    remain."""
    if not 0 < alpha < 1 or not 0 < confidence < 1:
        raise ValueError(f"alpha and confidence must be in (0, 1), got {alpha}, {confidence}")
    results = [r for r in detector.detect_many(list(texts)) if r is not None]
    if len(results) < MIN_TEXTS:
        raise ValueError(
            f"a key check needs at least {MIN_TEXTS} human texts with a sentence, "
            f"got {len(results)}"
        )
    return KeyCheck.of(np.array([r.p_value for r in results]), alpha, confidence)


def screen_key(
    draw: Callable[[], WatermarkKey],
    audit: Callable[[WatermarkKey], Sequence[KeyCheck]],
    *,
    max_draws: int = 20,
) -> tuple[WatermarkKey, int]:
    """A key from ``draw`` whose every check by ``audit`` holds, redrawn until one does;
    returns it and the number of keys refused before it.

    Screening conditions the key law: the p-value, exact over keys drawn without it,
    becomes conservative on the screened domains (a screened key leans less towards them
    than the null pivot sets do) and stays as it was elsewhere (docs/operators.md).
    """
    if max_draws < 1:
        raise ValueError("max_draws must be >= 1")
    for refused in range(max_draws):
        key = draw()
        if all(check.holds for check in audit(key)):
            return key, refused
    raise SamarkError(
        f"{max_draws} keys in a row failed the screen: the screening text is probably too "
        "different from human text of one domain, or too short (see `samark check-key`)"
    )


def screening_detector(key: WatermarkKey, embedder: Embedder) -> BatchDetector:
    """The detector a new key is screened with (``keyring new --screen``): SAMark's on the
    key's static pivots, with its default statistic, the pivots a leaning key tilts."""
    from samark.schemes import create_scheme

    return create_scheme("samark", key=key, embedder=embedder)
