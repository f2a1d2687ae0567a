"""SAMark's keyring pass: every key of a ring scored on one embedding of the text.

The keys' statistics and those of the detector's public null pivot sets come from one pass
(:func:`~samark.schemes.samark.detector.ring_passes`). When the keys share one pivot law and
the detection settings, the K + M statistics are exchangeable under H0, and the rank of
the ring's largest among them is an exact p-value for the ring
(:func:`~samark.schemes.samark.statistics.ring_max_p_value`): the **max-statistic**. Keys
with semantic cells too: their cells and the M public null cell draws are i.i.d. from one
law, the draws streamed in chunks (:mod:`samark.schemes.samark.cell_pass`).
The layered mark's ring (:mod:`samark.schemes.samark.layered`) uses the same pass for its
semantic layer and Holm over the keys' layered p-values.

:mod:`samark.detection.ring_detector` reaches this through :meth:`SAMark.ring_scoring`, never by
name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from samark.errors import EmptyTextError, SamarkError
from samark.schemes.features import TextFeatures
from samark.schemes.ring_scores import HOLM, RingScore
from samark.schemes.samark.detector import (
    CellRingPass,
    RingPass,
    SAMarkDetector,
    embedded_of,
    ring_passes,
)
from samark.schemes.samark.statistics import ring_max_p_value

MAX_STATISTIC = "max-statistic"


def ring_null_count(keys: int, alpha: float, least: int = 999) -> int:
    """Null pivot sets for a ring of ``keys`` SAMark keys. A Monte Carlo p-value cannot go
    below ``1/(M+1)`` for one key, ``K/(M+K)`` for the ring's maximum and ``K/(M+1)`` for
    Holm; so M grows with K until the smallest ring p-value is a tenth of ``alpha``
    (999 for one key at 1%, 63,999 for 64 keys: 0.8 GB of pivots, built once)."""
    return max(least, math.ceil(10 * keys / alpha) - 1)


def share_null(detectors: Sequence[SAMarkDetector]) -> bool:
    """Whether the detectors share one pivot law and detection settings, keyed cells
    included (the condition of one pass over their shared null sets)."""
    return all(detectors[0].same_null(d) for d in detectors[1:])


class MaxStatisticRing:
    """The max-statistic over a ring of SAMark (or SAMark-dagger) keys; Holm over the
    keys' p-values where the draws are sequential (``null_stop``), whose stop depends on
    the keys' statistics, so that the max-statistic's fixed count of draws does not hold."""

    def __init__(self, detectors: Sequence[SAMarkDetector]) -> None:
        self.detectors = list(detectors)
        self.method = MAX_STATISTIC if detectors[0].null_stop is None else HOLM

    def score_prepared(self, features: Sequence[TextFeatures]) -> list[RingScore | EmptyTextError]:
        """Each prepared text against every key, on its one embedding."""
        embedded = embedded_of(features, self.detectors[0].embedder)
        return [
            EmptyTextError("the text has no sentence to score")
            if scored is None
            else self._answer(scored)
            for scored in ring_passes(self.detectors, embedded)
        ]

    def score_embeddings(self, embeddings: np.ndarray, sentences: list[str] | None) -> RingScore:
        """One text's unit sentence embeddings, shape (n, dim), against every key."""
        if embeddings.ndim != 2:
            raise SamarkError("embeddings must have shape (sentences, dim)")
        if embeddings.shape[0] == 0:
            raise EmptyTextError("the text has no sentence to score")
        (scored,) = ring_passes(self.detectors, [(sentences, embeddings)])
        assert scored is not None
        return self._answer(scored)

    def _answer(self, scored: RingPass | CellRingPass) -> RingScore:
        """The ring's answer from one text's pass by the ring's method: its p-value, its
        key and every key's p-value."""
        p = tuple(scored.p_values())
        if self.method == HOLM:
            ring_p, best = RingScore.holm_best(p, [float(x) for x in scored.own])
        else:
            ring_p, best = ring_max_p_value(scored.own, scored.null), int(np.argmax(scored.own))
        return RingScore(ring_p, best, scored.detection(best), p)
