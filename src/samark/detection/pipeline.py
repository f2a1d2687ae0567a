"""The one detection pipeline, from text to p-value: ``prepare`` then ``score``.

- :func:`samark.intake.admit`: the intake and each text's sentences, split once: binary
  text refused, and text over the limits (``limits``; None: any size, the CLI's ``--long``,
  files of records and the evaluation harness).
- :func:`prepare`: each admitted text's features (:class:`TextFeatures`): its sentences
  and their embeddings by the detector's embedder, the distinct sentences of all the
  texts embedded in one call.
- :func:`score`: each text's answer from its features against the key or keyring, batch
  first: a :class:`RingDetection`, or the text's own error (refused at intake, or
  nothing to score) in the scheme's own words, never found by scoring it again.

Every door detects this way: ``samark detect`` (a text, ``--keyring``, ``--long``, files of
records), ``POST /v1/detect`` and its page, :class:`RingDetector` itself and the
evaluation harness. The functions hold no state: what a text costs is paid once, in
:func:`prepare`, and scoring is pure arithmetic on its result.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

import numpy as np

from samark.detection.ring_detector import RingDetection, RingDetector
from samark.errors import SamarkError
from samark.intake import SERVER_LIMITS, Limits, TextRefused, admit
from samark.schemes.features import TextFeatures, text_features

#: a text's answer: its detection, or why it has none
Answer = RingDetection | SamarkError


def prepare(
    detector: RingDetector,
    texts: Sequence[str],
    *,
    limits: Limits | None = SERVER_LIMITS,
    sentences: Sequence[Sequence[str]] | None = None,
    known: MutableMapping[str, np.ndarray] | None = None,
) -> list[TextFeatures | TextRefused]:
    """Each text's features for ``detector``, or its refusal at intake. ``sentences``:
    each text's split, where :func:`admit` already made it (then the texts are taken as
    admitted); ``known``: sentence vectors of the detector's embedder already at hand
    (those embedded here are added to it)."""
    out: list[TextFeatures | TextRefused] = []
    admitted: list[int] = []
    split: list[list[str]] = []
    for i, text in enumerate(texts):
        try:
            split.append(admit(text, limits) if sentences is None else list(sentences[i]))
        except TextRefused as exc:
            out.append(exc)
            continue
        out.append(TextFeatures(text, ()))  # replaced below
        admitted.append(i)
    features = text_features(
        [texts[i] for i in admitted], detector.embedder, sentences=split, known=known
    )
    for i, f in zip(admitted, features, strict=True):
        out[i] = f
    return out


def score(detector: RingDetector, prepared: Sequence[TextFeatures | SamarkError]) -> list[Answer]:
    """Each prepared text's answer against ``detector`` (all scored together), or the
    error it already carries. A text given as a string is a caller's mistake, said at once
    (prepare it first), never passed through as its own answer."""
    stray = [type(f).__name__ for f in prepared if not isinstance(f, TextFeatures | SamarkError)]
    if stray:
        raise TypeError(f"score takes prepared texts (pipeline.prepare), got {stray[0]}")
    ready = [f for f in prepared if isinstance(f, TextFeatures)]
    found = iter(detector.detect_prepared(ready))
    return [next(found) if isinstance(f, TextFeatures) else f for f in prepared]


def detect(
    detector: RingDetector, texts: Sequence[str], *, limits: Limits | None = SERVER_LIMITS
) -> list[Answer]:
    """Each text's answer: :func:`prepare` then :func:`score`."""
    return score(detector, prepare(detector, texts, limits=limits))
