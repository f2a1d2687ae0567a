"""How the evidence adds up over a text, for ``/v1/detect`` with ``details`` (the page's
cumulative-evidence view and its per-sentence layers).

- ``evidence_trail``: the detector's own p-value of the text's first ``k`` sentences, for
  ``k`` = 1 .. n (at most :data:`MAX_TRAIL_POINTS` values of ``k``, evenly spread, the
  whole text always last). Each point is a real detection of that prefix with the same
  detector (a keyring's: its family-wise p-value), so each is exact in its own right; its
  last point is the text's p-value. A layered mark's points carry its two layers' own
  p-values too (``p_semantic``, ``p_token``).
- what the scheme itself shows of its detection (``Watermark.evidence``; a layered
  mark's ``sentence_layers``: each sentence's part in each layer,
  ``samark.schemes.samark.layered_evidence``). The server never asks a scheme's class.
- ``short_text``: for a text of few sentences, why it is weak evidence
  (:mod:`samark.serving.short_text`).

The prefixes' sentences are the text's, so their features are the text's features cut
(:meth:`TextFeatures.prefix`): nothing is split or embedded again, and a point costs one
scoring against the null draws.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from samark.detection.ring_detector import RingDetection, RingDetector
from samark.detection_result import Detection
from samark.errors import EmptyTextError
from samark.schemes.features import TextFeatures, text_features
from samark.serving.short_text import short_text_note

#: the most prefixes scored for one text's trail
MAX_TRAIL_POINTS = 40


class TrailPoint(TypedDict, total=False):
    """The detection of a text's first ``sentences`` sentences."""

    sentences: int
    p_value: float
    #: a layered mark's layers, each its own p-value (not for a keyring)
    p_semantic: float
    p_token: float


def sentence_evidence(
    detector: RingDetector, text: TextFeatures, found: RingDetection
) -> dict[str, object]:
    """The fields added to a detailed answer: ``evidence_trail`` and what the scheme
    shows of its detection (``Watermark.evidence``: a layered mark's ``sentence_layers``).
    ``detector`` (a key as a ring of one, or a keyring) scored ``text`` (prepared),
    giving ``found`` (a keyring's: its best key's detection and scheme)."""
    out: dict[str, object] = {"evidence_trail": evidence_trail(detector, text, found.detection)}
    out.update(detector.scheme_of(found).evidence(found.detection))
    note = short_text_note(found.detection)
    if note is not None:
        out["short_text"] = note
    return out


def trail_lengths(n: int) -> list[int]:
    """The prefix lengths a text of ``n`` sentences is scored at: every one up to
    :data:`MAX_TRAIL_POINTS`, else that many evenly spread, ``n`` always among them."""
    if n <= MAX_TRAIL_POINTS:
        return list(range(1, n + 1))
    return sorted({int(k) for k in np.rint(np.linspace(1, n, MAX_TRAIL_POINTS))})


def prefixes(text: str, sentences: tuple[str, ...], lengths: list[int]) -> list[str]:
    """The text up to the end of its ``k``-th sentence, for each ``k`` in ``lengths``: cut
    from ``text`` itself where its sentences are found in order in it (so a prefix reads
    as the text does), else the sentences joined by spaces; the whole text for the last."""
    ends: list[int] = []
    at = 0
    for sentence in sentences:
        found = text.find(sentence, at)
        if found < 0:
            break
        at = found + len(sentence)
        ends.append(at)
    whole = len(ends) == len(sentences)
    out = []
    for k in lengths:
        if k == len(sentences):
            out.append(text)
        elif whole:
            out.append(text[: ends[k - 1]])
        else:
            out.append(" ".join(sentences[:k]))
    return out


def evidence_trail(
    detector: RingDetector, text: TextFeatures, detection: Detection
) -> list[TrailPoint]:
    """The p-value as sentences are added (module docstring); a prefix with nothing to
    score is left out. A prefix's features are the text's, cut (nothing is split or
    embedded again) where the detection scored the text's sentences."""
    lengths = trail_lengths(len(detection.sentences))
    if not lengths:
        return []
    texts = prefixes(text.text, detection.sentences, lengths)
    if tuple(detection.sentences) == text.sentences:
        cut = [text.prefix(t, k) for t, k in zip(texts, lengths, strict=True)]
    else:  # a scheme whose units are not the text's sentences: each prefix as a text
        cut = text_features(texts, detector.embedder)
    points: list[TrailPoint] = []
    for k, found in zip(lengths, detector.detect_prepared(cut), strict=True):
        if isinstance(found, EmptyTextError):
            continue
        point: TrailPoint = {"sentences": k, "p_value": float(found.p_value)}
        if found.single_key:  # a keyring's points are family-wise: no layers of their own
            layers = found.detection.details
            p_semantic, p_token = layers.get("p_semantic"), layers.get("p_token")
            if isinstance(p_semantic, float):
                point["p_semantic"] = float(p_semantic)
            if isinstance(p_token, float):
                point["p_token"] = float(p_token)
        points.append(point)
    return points
