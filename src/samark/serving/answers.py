"""What ``/v1/detect`` answers for each text: one key's detection (a ring of one) or a
keyring's, from :meth:`RingDetection.to_dict`, the one serialisation of a detection; with
``details``, its sentences and how the evidence adds up (:mod:`samark.serving.evidence`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from samark.detection.pipeline import score
from samark.detection.ring_detector import RingDetector
from samark.detection_result import Detection
from samark.errors import SamarkError
from samark.provenance.report import ReportFields
from samark.schemes.features import TextFeatures
from samark.serving.evidence import sentence_evidence
from samark.serving.schema import Body
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
    prepared: Sequence[TextFeatures | SamarkError],
    details: bool,
    record_check: Callable[[TextFeatures], ReportFields] | None = None,
    manifests: Mapping[str, str] | None = None,
) -> list[Body]:
    """Each prepared text's answer, the texts scored together
    (:func:`samark.detection.pipeline.score`): a key's detection (a ring of one), or a
    keyring's family-wise p-value with the key (label, id, its own p) and payload when
    the text is flagged; all from :meth:`RingDetection.to_dict`. A text with nothing to
    score answers its own error, in the scheme's words. With ``record_check`` (the
    record's report on a text), its ``provenance`` too. Every answer carries its
    ``verdict`` (:mod:`samark.verdict`): the mark and the record as one conclusion, with
    the text's C2PA manifest state where ``manifests`` (by the text as scored, the
    manifest removed) names one."""
    out: list[Body] = []
    for text, r in zip(prepared, score(detector, prepared), strict=True):
        if isinstance(r, SamarkError) or isinstance(text, SamarkError):
            out.append({"error": str(r)})
            continue
        fields = r.to_dict()
        answer: Body
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
            None if manifests is None else manifests.get(text.text),
        ).to_dict()
        out.append(answer)
    return out


def _sentences(d: Detection) -> Body:
    return {
        "sentences": list(d.sentences),
        "sentence_p_values": list(d.sentence_p_values),
        "marked_sentences": list(d.marked_sentences()),
    }
