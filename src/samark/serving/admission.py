"""A ``/v1/detect`` request's texts admitted once: the intake's limits and words
(:func:`samark.detection.pipeline.admit`), the C2PA manifest read and removed, and each
text split into sentences, the one split the request's caps, its units and its scoring
all read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from samark.intake import Limits, admit, check_binary, check_chars
from samark.provenance.c2pa_manifest import ManifestFields
from samark.serving.manifests import checked
from samark.serving.settings import ServeSettings


@dataclass(frozen=True)
class Admitted:
    """A request's texts as scored (their manifests removed), each one's sentences and
    manifest (its JSON form; None where the answer reports none)."""

    texts: tuple[str, ...]
    sentences: tuple[tuple[str, ...], ...]
    manifests: tuple[ManifestFields | None, ...]

    @property
    def sentence_count(self) -> int:
        """What the request asks of the detector: its texts' sentences (one at least each)."""
        return sum(max(len(s), 1) for s in self.sentences)

    def manifest_states(self) -> dict[str, str]:
        """Each text's manifest state, by the text as scored, where it has one."""
        return {
            t: m["state"] for t, m in zip(self.texts, self.manifests, strict=True) if m is not None
        }


def admit_request(texts: Sequence[str], settings: ServeSettings) -> Admitted:
    """``texts`` admitted under ``settings``' limits, or :class:`TextRefused` for the
    first refused (size and binary are read before the manifest: a manifest never makes
    a text too long to refuse quickly)."""
    limits = Limits(settings.max_text_chars, settings.max_text_sentences)
    for text in texts:
        check_chars(text, limits)
        check_binary(text)
    c2pa = settings.c2pa_signer or settings.c2pa_verifier
    manifests, stripped = checked(list(texts), settings.c2pa_verifier, c2pa is not None)
    return Admitted(
        tuple(stripped),
        tuple(tuple(admit(t, limits)) for t in stripped),
        tuple(manifests),
    )
