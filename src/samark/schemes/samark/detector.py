"""SAMark detection (paper Alg. 2) with a calibrated p-value.

segment -> embed -> channel cosines -> majority-vote flags -> tanh alignment -> statistic,
and the same statistic under ``n_null`` public Haar pivot sets for an exact p-value (see
:mod:`samark.schemes.samark.statistics`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from samark.detection_result import Detection
from samark.embed import Embedder
from samark.errors import EmptyTextError
from samark.keys import WatermarkKey
from samark.schemes.samark.cells import CellFrames, cell_evidence, key_cells, null_cells, text_signs
from samark.schemes.samark.pivots import PivotLaw
from samark.schemes.samark.statistics import (
    STATISTICS,
    Statistic,
    alignment,
    channel_responses,
    exchangeable_p_value,
    inferred_flags,
    paper_z,
    sentence_p_values,
    statistic_values,
)
from samark.schemes.samark.topic_centring import NeighbourCentring
from samark.segment import split_sentences

#: the most null cell sets (n_null x cells) a detector with keyed cells builds: 999 x 64
#: cells is about 0.6 GB of float32 pivots and anchors (16 cells: 140 MB)
MAX_NULL_CELLS = 64_000


@functools.lru_cache(maxsize=8)
def _cached_null_pivots(
    law: PivotLaw, count: int, dim: int, channels: int, seed: int
) -> np.ndarray:
    return law.null_pivots(count, dim, channels, seed)


class SAMarkDetector:
    """Detects SAMark watermarks made with ``key`` and ``embedder``.

    Parameters mirror :class:`samark.schemes.samark.config.SAMarkConfig`'s detection fields.
    """

    def __init__(
        self,
        key: WatermarkKey,
        embedder: Embedder,
        *,
        channels: int = 2,
        kappa: float = 30.0,
        tanh_detection: bool = True,
        statistic: Statistic = "z",
        n_null: int = 999,
        null_seed: int = 0,
        alpha: float = 0.01,
        centring: NeighbourCentring | None = None,
        cells: int = 0,
    ) -> None:
        key.check_embedder(embedder.identity)
        if cells == 1 or cells < 0:
            raise ValueError("cells must be 0 (static pivots) or at least 2")
        if cells and n_null * cells > MAX_NULL_CELLS:
            raise ValueError(
                f"keyed cells hold n_null x cells pivot sets in memory: n_null {n_null} with "
                f"{cells} cells exceeds {MAX_NULL_CELLS:,} (a keyring's max-statistic needs "
                "more null sets than cells can hold; not supported yet)"
            )
        if centring is not None and centring.dim != embedder.dim:
            raise ValueError(
                f"the centring reference is {centring.dim}-d, the embedder {embedder.dim}-d"
            )
        if statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {statistic!r}; choose one of {STATISTICS}")
        if n_null < 19:
            raise ValueError("n_null must be at least 19 (p-values cannot go below 1/(n_null+1))")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.embedder = embedder
        self.channels = channels
        self.kappa = kappa
        self.tanh_detection = tanh_detection
        self.statistic: Statistic = statistic
        self.n_null = n_null
        self.null_seed = null_seed
        self.alpha = alpha
        #: topic centring applied to every text before any pivot sees it (topic_centring)
        self.centring = centring
        #: the scheme name its detections carry (``samark-dagger`` sets its own)
        self.label = "samark"
        #: keyed semantic cells (samark.schemes.samark.cells); 0: static pivots
        self.cells = cells
        self._pivots = key.samark.pivots(embedder.dim, channels)
        self._law = key.samark.pivot_law(embedder.dim)
        self._cells = key_cells(key, embedder.dim, cells, channels) if cells else None

    def __repr__(self) -> str:
        return (
            f"SAMarkDetector(embedder={self.embedder.name!r}, channels={self.channels}, "
            f"kappa={self.kappa}, statistic={self.statistic!r}, n_null={self.n_null}"
            + (f", cells={self.cells})" if self.cells else ")")
        )

    @property
    def key_cells(self) -> CellFrames | None:
        """The key's cells (generation scores candidates on them), or None: static pivots."""
        return self._cells

    def detect(self, text: str) -> Detection:
        """Score one text. Raises :class:`EmptyTextError` if it has no sentence."""
        sentences = split_sentences(text)
        if not sentences:
            raise EmptyTextError("the text has no sentence to score")
        return self.score_embeddings(self.embedder.encode(sentences), sentences)

    def detect_many(self, texts: Sequence[str]) -> list[Detection | None]:
        """Score many texts with one embedding call over all their sentences (the
        embedder batches across texts, which is where the time goes): the results of
        ``detect`` on each, in order, with ``None`` for a text without a sentence. Equal up
        to float rounding: padding in a batch changes embeddings in their last bits, so a
        near-tie among the null sets can move a p-value by one step of 1/(n_null+1)."""
        return [
            self.score_embeddings(emb, sentences) if sentences else None
            for sentences, emb in embed_sentences(self.embedder, texts)
        ]

    def same_null(self, other: SAMarkDetector) -> bool:
        """True when ``other``'s statistic under its key is exchangeable with this one's
        null pivot sets: the same pivot law, embedder and detection settings. Keys of one
        ring that agree so share one null pool (:func:`ring_statistics`)."""
        return (
            self._law == other._law
            and self.embedder.identity.fingerprint == other.embedder.identity.fingerprint
            and (self.channels, self.kappa, self.tanh_detection, self.statistic, self.cells)
            == (other.channels, other.kappa, other.tanh_detection, other.statistic, other.cells)
            and (self.n_null, self.null_seed) == (other.n_null, other.null_seed)
            and _centring_id(self.centring) == _centring_id(other.centring)
        )

    def score_embeddings(
        self, embeddings: np.ndarray, sentences: list[str] | None = None
    ) -> Detection:
        """Score precomputed unit sentence embeddings, shape (n, dim)."""
        if embeddings.ndim != 2 or embeddings.shape[0] == 0:
            raise EmptyTextError("the text has no sentence to score")
        if self.centring is not None:
            embeddings = self.centring(embeddings)
        if self._cells is not None:
            return self._score_in_cells(embeddings, sentences)
        nulls = _cached_null_pivots(
            self._law, self.n_null, self.embedder.dim, self.channels, self.null_seed
        )
        all_pivots = np.concatenate([self._pivots[None], nulls], axis=0)
        responses = channel_responses(embeddings, all_pivots)
        evidence = alignment(responses, self.kappa, self.tanh_detection)
        values = statistic_values(evidence, self.statistic)
        return self._detection(responses[0], evidence, values, sentences)

    def _score_in_cells(self, embeddings: np.ndarray, sentences: list[str] | None) -> Detection:
        """Keyed cells: every sentence on its own cell's pivots, under the key and the null
        cell sets (samark.schemes.samark.cells), on embeddings already centred."""
        assert self._cells is not None
        nulls = null_cells(
            self._law, self.n_null, self.embedder.dim, self.cells, self.channels, self.null_seed
        )
        signed = np.concatenate([self._cells.signed(embeddings), nulls.signed(embeddings)])
        evidence = cell_evidence(signed, self.kappa, self.tanh_detection)
        values = statistic_values(evidence, self.statistic)
        own = signed[0] * text_signs(signed[:1])[0]
        return self._detection(own, evidence, values, sentences)

    def _detection(
        self,
        responses: np.ndarray,
        evidence: np.ndarray,
        values: np.ndarray,
        sentences: list[str] | None,
    ) -> Detection:
        """The detection from the key's cosines (n, c), the evidence under the key's
        pivots and the null sets (row 0: the key's), and the statistic's values."""
        z = float(paper_z(evidence[:1])[0]) if self.statistic != "z" else float(values[0])
        own = evidence[0]
        flags = inferred_flags(responses[None])[0]
        signed = responses * flags[None, :]
        return Detection(
            scheme=self.label,
            p_value=exchangeable_p_value(float(values[0]), values[1:]),
            alpha=self.alpha,
            z=z,
            statistic=self.statistic,
            score=float(values[0]),
            n_units=int(responses.shape[0]),
            sentences=tuple(sentences or ()),
            sentence_p_values=tuple(float(p) for p in sentence_p_values(evidence)),
            details={
                # share of (sentence, channel) cosines on the majority-voted flag side
                "flag_side_share": float((signed > 0).mean()),
                "mean_signed_cosine": float(signed.mean()),
                "n_null": self.n_null,
                "flags": tuple(int(f) for f in flags),
                # tanh alignment per (sentence, channel), and its means
                "evidence": tuple(tuple(float(x) for x in row) for row in own),
                "sentence_evidence": tuple(float(x) for x in own.mean(axis=1)),
                "channel_evidence": tuple(float(x) for x in own.mean(axis=0)),
            },
        )


def _centring_id(centring: NeighbourCentring | None) -> str | None:
    return None if centring is None else centring.sha256


def embed_sentences(embedder: Embedder, texts: Sequence[str]) -> list[tuple[list[str], np.ndarray]]:
    """Each text's sentences and their unit embeddings (n, dim), every text's sentences
    embedded in one call (the embedder batches across texts)."""
    split = [split_sentences(text) for text in texts]
    embeddings = embedder.encode([s for sentences in split for s in sentences])
    bounds = np.cumsum([0, *map(len, split)])
    return [(sentences, embeddings[bounds[i] : bounds[i + 1]]) for i, sentences in enumerate(split)]


class RingPass:
    """One text scored under the K keys of a ring and their shared null pivot sets, in one
    pass over the K + n_null sets: each key's statistic (``own``, shape (K,)), the null
    sets' (``null``), each key's own exact p-value and full detection. The detectors must
    agree (:meth:`SAMarkDetector.same_null`)."""

    def __init__(
        self,
        detectors: Sequence[SAMarkDetector],
        embeddings: np.ndarray,
        sentences: list[str] | None = None,
    ) -> None:
        self.detectors = detectors
        self.sentences = sentences
        self._responses, self._evidence, values = _ring_evidence(detectors, embeddings)
        self.own = values[: len(detectors)]
        self.null = values[len(detectors) :]
        self._values = values

    def p_values(self) -> list[float]:
        """Each key's own p-value (its statistic ranked among the null sets')."""
        return [exchangeable_p_value(float(v), self.null) for v in self.own]

    def detection(self, k: int) -> Detection:
        """Key ``k``'s own detection, as its detector gives it."""
        rows = np.r_[k, np.arange(len(self.detectors), self._values.size)]
        return self.detectors[k]._detection(
            self._responses[k], self._evidence[rows], self._values[rows], self.sentences
        )


def _ring_evidence(
    detectors: Sequence[SAMarkDetector], embeddings: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Responses, evidence and statistic values under the K keys' pivots, then the shared
    null sets' (the detectors must agree: :meth:`SAMarkDetector.same_null`)."""
    first = detectors[0]
    if not all(first.same_null(d) for d in detectors[1:]):
        raise ValueError("the detectors of a ring must share their pivot law and settings")
    if first.cells:
        raise ValueError("keyed cells have no ring pass (each key is scored on its own)")
    if embeddings.ndim != 2 or embeddings.shape[0] == 0:
        raise EmptyTextError("the text has no sentence to score")
    nulls = _cached_null_pivots(
        first._law, first.n_null, first.embedder.dim, first.channels, first.null_seed
    )
    own = np.stack([d._pivots for d in detectors])
    if first.centring is not None:
        embeddings = first.centring(embeddings)
    # responses, not pivots, are joined: a large ring's null pool is not copied per text
    responses = np.concatenate(
        [channel_responses(embeddings, own), channel_responses(embeddings, nulls)], axis=0
    )
    evidence = alignment(responses, first.kappa, first.tanh_detection)
    return responses, evidence, statistic_values(evidence, first.statistic)
