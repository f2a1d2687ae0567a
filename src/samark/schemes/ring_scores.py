"""How a ring of keys answers for one text: Holm's adjustment of the keys' own p-values,
the ring's score of a text (:class:`RingScore`) and a scheme family's joint scoring
(:class:`RingScoring`, what :meth:`Watermark.ring_scoring` returns where a family has one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from samark.detection_result import Detection
from samark.errors import EmptyTextError

if TYPE_CHECKING:
    import numpy as np

    from samark.schemes.features import TextFeatures


#: the ring method that adjusts the keys' own p-values (Holm)
HOLM = "holm"


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest p gets
    ``max_{j <= i} min(1, (K - j + 1) p_(j))``. Rejecting where adjusted < alpha controls
    the family-wise error at alpha for any dependence between the p-values."""
    k = len(p_values)
    order = sorted(range(k), key=lambda i: p_values[i])
    out = [1.0] * k
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p_values[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class RingScore:
    """One text scored by a ring's keys together: the ring's p-value, the index of the key
    with the strongest evidence, that key's own detection, and every key's own p-value."""

    p_value: float
    best: int
    detection: Detection
    key_p_values: tuple[float, ...]

    @staticmethod
    def holm_best(key_p_values: Sequence[float], strength: Sequence[float]) -> tuple[float, int]:
        """Holm's (Bonferroni's) answer for a ring whose keys give their own p-values: the
        ring's p-value ``min(1, K * min p)`` and the key it attributes (the smallest p; of
        equal ones, the largest ``strength``). The one place a ring makes it."""
        best = min(range(len(key_p_values)), key=lambda i: (key_p_values[i], -strength[i]))
        return holm_adjusted(key_p_values)[best], best


class RingScoring(Protocol):
    """A scheme family's joint scoring of a ring (one scheme per key, all of one class):
    what :meth:`Watermark.ring_scoring` returns where the family has one."""

    #: how the ring's p-value is made ("max-statistic", "holm")
    method: str

    def score_prepared(self, features: Sequence[TextFeatures]) -> list[RingScore | EmptyTextError]:
        """Each prepared text against every key, or the error saying why it has nothing
        to score."""
        ...

    def score_embeddings(self, embeddings: np.ndarray, sentences: list[str] | None) -> RingScore:
        """One text's unit sentence embeddings, shape (n, dim), against every key; a family
        whose scores need more than the embeddings raises ``SamarkError`` saying so."""
        ...
