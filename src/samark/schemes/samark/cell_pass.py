"""Texts scored under K keys' semantic cells and the detector's public null cell draws, in
one pass over the draws (:class:`~samark.schemes.samark.cells.NullCellDraws`).

A keyring with keyed cells needs ``ring_null_count`` draws (7,999 for 8 keys at alpha 1%),
more than memory holds at 576 KiB a draw (64 cells): the draws beyond the held block are regenerated
in deterministic chunks and each chunk's statistics are kept, never the chunk. Per text
the pass keeps the K keys' signed cosines and statistics, the M null statistics and, for
each key and sentence, how many null draws score that sentence at least as well (its
sentence p-value): O(K n + M) numbers, whatever M is.

Under H0 (a text that depends on no key of the ring) the keys' cells and the null draws
are i.i.d. from one public law (anchors Haar on the sphere, each cell's pivots from the
keys' pivot law, fair flags), so the K + M statistics are exchangeable: the same
max-statistic and per-key p-values as static pivots' ring pass.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from samark.schemes.samark.cells import CellFrames, NullCellDraws, cell_evidence
from samark.schemes.samark.null_projection import ProjectedNullCells
from samark.schemes.samark.statistics import (
    Statistic,
    sentence_scores,
    sequential_p_value,
    statistic_values,
)

#: ties count against the key, as in every exchangeable p-value here
_TIE = 1e-12

#: sentences scored against one block of null draws at once (texts are grouped up to this
#: many; a longer text alone): with the block's size it bounds the cosines of one step,
#: 1,024 x 256 draws x 64 cells x 2 channels = 128 MiB of float32, whatever a call's size
_ROWS = 1024


@dataclass(frozen=True)
class CellScores:
    """One text under K keys' cells and M null draws."""

    #: the keys' flag-signed cosines to each sentence's own cell's pivots (K, n, c)
    signed: np.ndarray
    #: the keys' evidence (K, n, c), aligned by each key's majority-voted text sign
    evidence: np.ndarray
    #: the keys' statistic (K,)
    values: np.ndarray
    #: the null draws' statistic (M,)
    null: np.ndarray
    #: per key and sentence, the null draws whose sentence score is at least the key's (K, n)
    exceed: np.ndarray
    #: sequential draws (``score_in_cells``' ``stop_after``): the exceedances each key's
    #: p-value waits for, and the draws there would have been; None: every draw was made
    stop_after: int | None = None
    total: int = 0

    def p_values(self) -> list[float]:
        """Each key's own p-value, its statistic ranked among the null draws' (with
        sequential draws, Besag and Clifford's p-value: ``statistics.sequential_p_value``)."""
        if self.stop_after is not None:
            return [
                sequential_p_value(float(v), self.null, self.stop_after, self.total)
                for v in self.values
            ]
        m = self.null.size
        return [float((1 + np.count_nonzero(self.null >= v - _TIE)) / (m + 1)) for v in self.values]

    def sentence_p_values(self, k: int) -> np.ndarray:
        """Key ``k``'s per-sentence p-values (as ``statistics.sentence_p_values``), over
        the draws made."""
        return (1 + self.exceed[k]) / (self.null.size + 1)


def score_in_cells(
    keys: CellFrames,
    draws: NullCellDraws | ProjectedNullCells,
    texts: Sequence[np.ndarray],
    *,
    kappa: float,
    use_tanh: bool,
    statistic: Statistic,
    stop_after: int | None = None,
) -> list[CellScores]:
    """Every text (unit sentence embeddings (n, d), centred already, n >= 1) under the K
    keys of ``keys`` and every null draw of ``draws``: d-dimensional draws generated once
    for all the texts (one pass over them), or draws in each text's own span, text by
    text.

    ``stop_after`` (draws in each text's span only): a text's draws stop after the block
    in which every key's statistic has been reached by ``stop_after`` null draws, and its
    p-values are Besag and Clifford's sequential ones. A text no key marked stops after a
    few blocks; a marked text draws them all, and its p-values are the fixed ones."""
    if not texts or any(t.ndim != 2 or t.shape[0] == 0 for t in texts):
        raise ValueError("every text needs at least one sentence embedding, shape (n, dim)")
    if stop_after is not None and (stop_after < 1 or not isinstance(draws, ProjectedNullCells)):
        raise ValueError("stop_after needs draws in each text's span and must be at least 1")
    bounds = np.cumsum([0, *(t.shape[0] for t in texts)])
    stacked = np.concatenate(texts).astype(np.float32)
    spans = list(itertools.pairwise(int(b) for b in bounds))
    key_signed = keys.signed(stacked)  # (K, N, c)
    own = []
    for a, b in spans:
        evidence = cell_evidence(key_signed[:, a:b], kappa, use_tanh)
        own.append((evidence, statistic_values(evidence, statistic), sentence_scores(evidence)))
    null_values: list[list[np.ndarray]] = [[] for _ in texts]
    exceed = [np.zeros(s.shape, dtype=np.int64) for _, _, s in own]

    def tally(i: int, signed: np.ndarray) -> None:
        """Text ``i``'s null statistics and sentence exceedances from a block of draws'
        signed cosines (B, n, c)."""
        evidence = cell_evidence(signed, kappa, use_tanh)
        null_values[i].append(statistic_values(evidence, statistic))
        scores = sentence_scores(evidence)  # (B, n)
        exceed[i] += np.count_nonzero(scores[None] >= own[i][2][:, None] - _TIE, axis=1)

    if isinstance(draws, ProjectedNullCells):
        for i, text in enumerate(texts):
            reached = np.zeros(len(own[i][1]), dtype=np.int64)  # per key
            for signed in draws.signed(text):
                tally(i, signed)
                if stop_after is not None:
                    reached += np.count_nonzero(
                        null_values[i][-1][None, :] >= own[i][1][:, None] - _TIE, axis=1
                    )
                    if reached.min() >= stop_after:
                        break
    else:
        groups = _groups(spans, _ROWS)
        for block in draws.blocks():
            for lo, hi, members in groups:
                signed = block.signed(stacked[lo:hi])  # (B, rows, c)
                for i in members:
                    a, b = spans[i]
                    tally(i, signed[:, a - lo : b - lo])
    return [
        CellScores(
            key_signed[:, a:b],
            evidence,
            values,
            np.concatenate(null_values[i]),
            exceed[i],
            stop_after,
            draws.count,
        )
        for i, ((a, b), (evidence, values, _)) in enumerate(zip(spans, own, strict=True))
    ]


def _groups(spans: list[tuple[int, int]], rows: int) -> list[tuple[int, int, list[int]]]:
    """Consecutive texts (their sentence ``spans``) grouped up to ``rows`` sentences, a
    longer text alone: each group's first and end sentence and its texts."""
    groups: list[tuple[int, int, list[int]]] = []
    for i, (a, b) in enumerate(spans):
        if groups and b - groups[-1][0] <= rows:
            lo, _, members = groups[-1]
            groups[-1] = (lo, b, [*members, i])
        else:
            groups.append((a, b, [i]))
    return groups
