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
from samark.keys.pivots import PivotLaw
from samark.keys.samark_material import check_cells
from samark.schemes.features import TextFeatures, text_features
from samark.schemes.samark.cell_pass import CellScores, score_in_cells
from samark.schemes.samark.cells import (
    CellFrames,
    NullCellDraws,
    cell_evidence,
    key_cells,
    null_cells,
    text_signs,
)
from samark.schemes.samark.config import SAMarkConfig, SAMarkDetection
from samark.schemes.samark.null_projection import ProjectedNullCells
from samark.schemes.samark.statistics import (
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


@functools.lru_cache(maxsize=8)
def _cached_null_pivots(
    law: PivotLaw, count: int, dim: int, channels: int, seed: int
) -> np.ndarray:
    return law.null_pivots(count, dim, channels, seed)


class SAMarkDetector:
    """Detects SAMark watermarks made with ``key`` and ``embedder``, as ``detection`` (a
    validated :class:`~samark.schemes.samark.config.SAMarkDetection`; the defaults if
    left out) says, over ``channels`` channels and ``cells`` keyed cells (0: static
    pivots). ``centring`` is the reference its ``centring`` path names, loaded.
    """

    def __init__(
        self,
        key: WatermarkKey,
        embedder: Embedder,
        detection: SAMarkDetection | None = None,
        *,
        channels: int = SAMarkConfig.channels,
        cells: int = 0,
        centring: NeighbourCentring | None = None,
    ) -> None:
        d = detection or SAMarkDetection()
        key.check_embedder(embedder.identity)
        check_cells(cells)
        # the key's null draws where the config names none
        null_draws = key.samark.null_draws if d.null_draws is None else d.null_draws
        if d.null_stop is not None and not (cells and null_draws == "projected"):
            raise ValueError(
                "null_stop (sequential null draws) needs keyed cells with projected null "
                f"draws; got cells={cells}, null_draws={null_draws!r}"
            )
        if centring is not None and centring.dim != embedder.dim:
            raise ValueError(
                f"the centring reference is {centring.dim}-d, the embedder {embedder.dim}-d"
            )
        self.embedder = embedder
        #: what it detects as (the config's detection part)
        self.detection = d
        self.channels = channels
        self.kappa = d.kappa
        self.tanh_detection = d.tanh_detection
        self.statistic: Statistic = d.statistic
        self.n_null = d.n_null
        self.null_seed = d.null_seed
        self.alpha = d.alpha
        #: topic centring applied to every text before any pivot sees it (topic_centring)
        self.centring = centring
        #: the scheme name its detections carry (``samark-dagger`` sets its own)
        self.label = "samark"
        #: keyed semantic cells (samark.schemes.samark.cells); 0: static pivots
        self.cells = cells
        self._pivots = key.samark.pivots(embedder.dim, channels)
        self._law = key.samark.pivot_law(embedder.dim)
        self._cells = key_cells(key, embedder.dim, cells, channels) if cells else None
        #: with cells, the null draws texts are scored against: "full" (held in memory up to
        #: HELD_NULL_CELLS, regenerated beyond) or "projected" (drawn in each text's span);
        #: static pivots have none ("full" then, whatever was asked)
        self.null_draws = null_draws if cells else "full"
        #: sequential null draws: the exceedances a text's draws stop at (None: all drawn)
        self.null_stop = d.null_stop
        self.null_cell_draws: NullCellDraws | ProjectedNullCells | None = None
        if cells and null_draws == "projected":
            self.null_cell_draws = ProjectedNullCells(
                self._law, d.n_null, embedder.dim, cells, channels, d.null_seed
            )
        elif cells:
            self.null_cell_draws = NullCellDraws(
                self._law, d.n_null, embedder.dim, cells, channels, d.null_seed
            )

    @classmethod
    def from_config(
        cls,
        key: WatermarkKey,
        embedder: Embedder,
        config: SAMarkConfig,
        *,
        cells: int,
        centring: NeighbourCentring | None = None,
    ) -> SAMarkDetector:
        """The detector of ``config``'s detection part and channels, with its keyed
        ``cells`` resolved (the scheme's default where the config leaves them out)."""
        return cls(
            key,
            embedder,
            config.detection,
            channels=config.channels,
            cells=cells,
            centring=centring,
        )

    def __repr__(self) -> str:
        return (
            f"SAMarkDetector(embedder={self.embedder.name!r}, channels={self.channels}, "
            f"kappa={self.kappa}, statistic={self.statistic!r}, n_null={self.n_null}"
            + (f", cells={self.cells}, null_draws={self.null_draws!r}" if self.cells else "")
            + ("" if self.null_stop is None else f", null_stop={self.null_stop}")
            + ")"
        )

    @property
    def key_cells(self) -> CellFrames | None:
        """The key's cells (generation scores candidates on them), or None: static pivots."""
        return self._cells

    def detect(self, text: str) -> Detection:
        """Score one text. Raises :class:`EmptyTextError` if it has no sentence."""
        found = self.detect_prepared(text_features([text], self.embedder))[0]
        if isinstance(found, EmptyTextError):
            raise found
        return found

    def detect_many(self, texts: Sequence[str]) -> list[Detection | None]:
        """``detect`` on each text (``None`` for one without a sentence), every text's
        distinct sentences embedded in one call (:func:`text_features`)."""
        found = self.detect_prepared(text_features(texts, self.embedder))
        return [None if isinstance(d, EmptyTextError) else d for d in found]

    def detect_prepared(self, features: Sequence[TextFeatures]) -> list[Detection | EmptyTextError]:
        """Each prepared text scored (its sentences and embeddings, computed once), or
        its error where it has no sentence. Equal to ``detect`` up to float rounding:
        padding in a batch changes embeddings in their last bits, so a near-tie among the
        null sets can move a p-value by one step of 1/(n_null+1)."""
        embedded = embedded_of(features, self.embedder)
        if self.null_cell_draws is not None and self.null_cell_draws.streamed:
            # one pass over the null cell draws for all the texts, not one per text (draws
            # in each text's span are "streamed" too: drawn per text, never held)
            passes = ring_passes([self], embedded)
            return [_no_sentence() if p is None else p.detection(0) for p in passes]
        return [
            self.score_embeddings(emb, sentences) if sentences else _no_sentence()
            for sentences, emb in embedded
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
            and (self.null_draws, self.null_stop) == (other.null_draws, other.null_stop)
            and (self.n_null, self.null_seed) == (other.n_null, other.null_seed)
            and _centring_id(self.centring) == _centring_id(other.centring)
        )

    def score_embeddings(
        self, embeddings: np.ndarray, sentences: list[str] | None = None
    ) -> Detection:
        """Score precomputed unit sentence embeddings, shape (n, dim)."""
        if embeddings.ndim != 2 or embeddings.shape[0] == 0:
            raise EmptyTextError("the text has no sentence to score")
        if self.null_cell_draws is not None and self.null_cell_draws.streamed:
            (scored,) = ring_passes([self], [(sentences, embeddings)])  # a ring of one key
            assert scored is not None
            return scored.detection(0)
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

    def cell_detection(self, scores: CellScores, k: int, sentences: list[str] | None) -> Detection:
        """Key ``k``'s detection from a pass over keyed cells (``cell_pass``)."""
        own = scores.signed[k] * text_signs(scores.signed[k : k + 1])[0]
        detection = self._detection(
            own,
            scores.evidence[k : k + 1],
            scores.values[k : k + 1],
            sentences,
            p_value=scores.p_values()[k],
            sentence_p=scores.sentence_p_values(k),
        )
        if scores.stop_after is not None:  # sequential draws: how many were made
            detection.details["null_stop"] = scores.stop_after
            detection.details["null_draws_made"] = int(scores.null.size)
        return detection

    def _detection(
        self,
        responses: np.ndarray,
        evidence: np.ndarray,
        values: np.ndarray,
        sentences: list[str] | None,
        *,
        p_value: float | None = None,
        sentence_p: np.ndarray | None = None,
    ) -> Detection:
        """The detection from the key's cosines (n, c), the evidence under the key's
        pivots and the null sets (row 0: the key's), and the statistic's values; a pass
        that keeps no null evidence (``cell_pass``) gives the key's rows only, its
        ``p_value`` and its sentences' p-values ``sentence_p``."""
        z = float(paper_z(evidence[:1])[0]) if self.statistic != "z" else float(values[0])
        own = evidence[0]
        flags = inferred_flags(responses[None])[0]
        signed = responses * flags[None, :]
        if p_value is None:
            p_value = exchangeable_p_value(float(values[0]), values[1:])
        if sentence_p is None:
            sentence_p = sentence_p_values(evidence)
        return Detection(
            scheme=self.label,
            p_value=p_value,
            alpha=self.alpha,
            z=z,
            statistic=self.statistic,
            score=float(values[0]),
            n_units=int(responses.shape[0]),
            sentences=tuple(sentences or ()),
            sentence_p_values=tuple(float(p) for p in sentence_p),
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


def embedded_of(
    features: Sequence[TextFeatures], embedder: Embedder
) -> list[tuple[list[str], np.ndarray]]:
    """Each prepared text's sentences and their unit embeddings by ``embedder``, shape
    (n, dim): those prepared, where ``embedder`` prepared them."""
    return [(list(f.sentences), f.embeddings_by(embedder)) for f in features]


def _no_sentence() -> EmptyTextError:
    return EmptyTextError("the text has no sentence to score")


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
        raise ValueError("keyed cells score a ring with CellRingPass (ring_passes)")
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


class CellRingPass:
    """:class:`RingPass` for keys with semantic cells: one text's scores under the K keys'
    cells and their shared null cell draws (:mod:`samark.schemes.samark.cell_pass`)."""

    def __init__(
        self,
        detectors: Sequence[SAMarkDetector],
        scores: CellScores,
        sentences: list[str] | None = None,
    ) -> None:
        self.detectors = detectors
        self.sentences = sentences
        self.scores = scores
        self.own = scores.values
        self.null = scores.null

    def p_values(self) -> list[float]:
        return self.scores.p_values()

    def detection(self, k: int) -> Detection:
        return self.detectors[k].cell_detection(self.scores, k, self.sentences)


def ring_passes(
    detectors: Sequence[SAMarkDetector],
    embedded: Sequence[tuple[list[str] | None, np.ndarray]],
) -> list[RingPass | CellRingPass | None]:
    """Each text (its sentences and unit embeddings (n, dim); None for one without a
    sentence) scored under a ring's keys and their shared null sets. With keyed cells, one
    pass over the null cell draws for all the texts (those not held are regenerated once)."""
    first = detectors[0]
    scorable = [i for i, (_, emb) in enumerate(embedded) if emb.shape[0]]
    out: list[RingPass | CellRingPass | None] = [None] * len(embedded)
    if not first.cells:
        for i in scorable:
            out[i] = RingPass(detectors, embedded[i][1], embedded[i][0])
        return out
    if not all(first.same_null(d) for d in detectors[1:]):
        raise ValueError("the detectors of a ring must share their pivot law and settings")
    if not scorable:
        return out
    assert first.null_cell_draws is not None
    keys = CellFrames.stack([d.key_cells for d in detectors if d.key_cells is not None])
    texts = [embedded[i][1] for i in scorable]
    if first.centring is not None:
        texts = [first.centring(emb) for emb in texts]
    scored = score_in_cells(
        keys,
        first.null_cell_draws,
        texts,
        kappa=first.kappa,
        use_tanh=first.tanh_detection,
        statistic=first.statistic,
        stop_after=first.null_stop,
    )
    for i, scores in zip(scorable, scored, strict=True):
        out[i] = CellRingPass(detectors, scores, embedded[i][0])
    return out
