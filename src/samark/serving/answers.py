"""What ``/v1/detect`` answers for each text: one key's detection (a ring of one) or a
keyring's, from :meth:`RingDetection.to_dict`, the one serialisation of a detection; with
``details``, its sentences and how the evidence adds up (:mod:`samark.serving.evidence`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samark.detection.ring_detector import RingDetector
from samark.detection_result import Detection
from samark.errors import EmptyTextError
from samark.serving.evidence import sentence_evidence
from samark.verdict import RecordEvidence, verdict

#: what ``/v1/detect`` answers for one key, of its detection's fields (the rest, z and the
#: scheme's diagnostics, stay with the CLI and the records: beside a scan's or Fisher's p,
#: z reads as a verdict it is not); a keyring's answer keeps every field but its layout
SINGLE_KEY_FIELDS = (
    *("scheme", "p_value", "is_watermarked", "alpha", "statistic", "n_units", "unit"),
    "key_id",
)
_RING_LAYOUT = ("payload_bits", "flag_bits")


def answers(
    detector: RingDetector,
    texts: list[str],
    details: bool,
    record_check: Callable[[str], dict[str, Any]] | None = None,
    manifests: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Each text's answer, the texts scored together: a key's detection (a ring of one),
    or a keyring's family-wise p-value with the key (label, id, its own p) and payload
    when the text is flagged; all from :meth:`RingDetection.to_dict`. With
    ``record_check`` (the record's report on a text), its ``provenance`` too. Every
    answer carries its ``verdict`` (:mod:`samark.verdict`): the mark and the record as
    one conclusion, with the text's C2PA manifest state where ``manifests`` (by the text as
    scored, the manifest removed) names one."""
    out: list[dict[str, Any]] = []
    for text, r in zip(texts, detector.detect_many(texts), strict=True):
        if r is None:
            out.append(_nothing_to_score(detector, text))
            continue
        fields = r.to_dict()
        if r.single_key:
            answer = {k: fields[k] for k in SINGLE_KEY_FIELDS}
        else:
            answer = {k: v for k, v in fields.items() if k not in _RING_LAYOUT}
        if details:
            answer.update(_sentences(r.detection))
            answer.update(sentence_evidence(detector, text, r))
        report = None if record_check is None else record_check(text)
        if report is not None:
            answer["provenance"] = report
        answer["verdict"] = verdict(
            r.mark_evidence(),
            None if report is None else RecordEvidence.of_report(report),
            None if manifests is None else manifests.get(text),
        ).to_dict()
        out.append(answer)
    return out


def _nothing_to_score(detector: RingDetector, text: str) -> dict[str, Any]:
    """The error of a text with nothing to score, in the detector's own words (it says
    why, e.g. how many sentences the scheme needs; it fails before any scoring)."""
    try:
        detector.detect(text)
    except EmptyTextError as exc:
        return {"error": str(exc)}
    return {"error": "the text has nothing to score"}


def _sentences(d: Detection) -> dict[str, Any]:
    return {
        "sentences": list(d.sentences),
        "sentence_p_values": list(d.sentence_p_values),
        "marked_sentences": list(d.marked_sentences()),
    }
