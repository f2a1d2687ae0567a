"""``samark detect`` on one text: the server's intake (:mod:`samark.detection.pipeline`:
the same limits and words), the text split once, and with ``--long`` a text over its
limits checked anyway, its sentences embedded a chunk at a time under a progress bar that
counts sentences (not the embedder's batches)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from samark.cli.common import TextInput, fail, progress
from samark.detection.ring_detector import RingDetector
from samark.intake import SERVER_LIMITS, TextRefused, admit, check_binary, check_chars
from samark.provenance.c2pa_manifest import strip_manifest

#: sentences embedded at a time under ``--long`` (one step of its progress bar)
LONG_CHUNK = 256


@dataclass(frozen=True)
class AdmittedText:
    """A text given to ``samark detect``, admitted: as given (its C2PA manifest, if any,
    still in it), as scored (the manifest removed) and its sentences, split once."""

    given: TextInput
    text: str
    sentences: list[str]


def check_intake(given: TextInput, long: bool) -> AdmittedText:
    """The text admitted; exit 2 where it is binary, or over the server's limits without
    ``long`` (saying so, and how to check it anyway). Read as the server reads a request
    (:func:`samark.serving.admission.admit_request`): its size and bytes as given, its
    sentences without its manifest."""
    limits = None if long else SERVER_LIMITS
    try:
        check_binary(given.text, given.origin)
        if limits is not None:
            check_chars(given.text, limits)
        text = strip_manifest(given.text)
        sentences = admit(text, limits, given.origin)
    except TextRefused as exc:
        hint = (
            " (the server's limit, so that one check stays quick); pass --long to check it "
            "anyway, with a progress bar"
            if exc.code == "text_too_long"
            else ""
        )
        prefix = "" if str(exc).startswith(given.origin) else f"{given.origin}: "
        raise fail(f"{prefix}{exc}{hint}") from None
    return AdmittedText(given, text, sentences)


def embedded_long(detector: RingDetector, admitted: AdmittedText) -> dict[str, np.ndarray]:
    """``--long``: the text's distinct sentences embedded by ``detector``'s embedder
    :data:`LONG_CHUNK` at a time under a bar counting sentences, for the pipeline to
    reuse (``prepare(known=...)``); nothing for a ring that embeds nothing."""
    embedder = detector.embedder
    known: dict[str, np.ndarray] = {}
    if embedder is None:
        return known
    unique = list(dict.fromkeys(admitted.sentences))
    with progress() as bar:
        task = bar.add_task("embedding the text", total=len(unique), unit="sentences")
        for start in range(0, len(unique), LONG_CHUNK):
            chunk = unique[start : start + LONG_CHUNK]
            known.update(zip(chunk, embedder.encode(chunk), strict=True))
            bar.update(task, completed=start + len(chunk))
    return known
