"""``samark detect`` on one text: the mark, the record and the C2PA manifest, told as JSON
on stdout and in words on stderr, with one verdict where more than the mark was read."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NoReturn

import typer

from samark.cli.common import err, fail
from samark.cli.long_text import AdmittedText, embedded_long
from samark.detection.pipeline import prepare, score
from samark.detection.ring_detector import RingDetector
from samark.errors import SamarkError
from samark.provenance.c2pa_manifest import read_manifest
from samark.verdict import RecordEvidence, verdict

if TYPE_CHECKING:
    from samark.provenance import ProvenanceRecord
    from samark.provenance.c2pa_manifest import ManifestVerifier


def detect_one_text(
    scheme: RingDetector,
    text: AdmittedText,
    details: bool,
    provenance: ProvenanceRecord | None = None,
    verifier: ManifestVerifier | None = None,
    long: bool = False,
) -> NoReturn:
    """Detect with ``scheme`` (a key or keyring) in one admitted text, prepared once and
    scored (:mod:`samark.detection.pipeline`); exits 0 if watermarked, 1 if not. With a
    ``provenance`` record, each sentence's provenance too (a ``provenance`` field). A
    C2PA manifest is checked (``manifest``); the mark and the record read the text
    without it."""
    manifest = read_manifest(text.given.text, verifier)
    try:
        known = embedded_long(scheme, text) if long else None
        # the pipeline (samark.detection.pipeline): the text as admitted, embedded once
        ready = prepare(scheme, [text.text], sentences=[text.sentences], known=known)
        (result,) = score(scheme, ready)
        if isinstance(result, SamarkError):
            raise result
        report = None if provenance is None else provenance.check_sentences(text.sentences)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    out = result.to_dict(details=details)
    said = None if report is None else report.to_dict()
    if said is not None:
        out["provenance"] = said
    out["manifest"] = manifest.to_dict()
    found = verdict(
        result.mark_evidence(),
        None if said is None else RecordEvidence.of_report(said),
        None if manifest.state == "none" else manifest.state,
    )
    told = report is not None or manifest.state != "none"
    if told:  # with a record or a manifest, every layer as one conclusion
        out["verdict"] = found.to_dict()
    typer.echo(json.dumps(out, ensure_ascii=False))
    words = result.describe()
    if result.is_watermarked:  # the mark's decision in bold green
        words = "[bold green]watermarked[/]" + words.removeprefix("watermarked")
    err.print(words, soft_wrap=True)
    if report is not None:
        err.print(f"record: {report.summary()}", highlight=False, soft_wrap=True)
    if manifest.state != "none":
        err.print(manifest.describe(), highlight=False, soft_wrap=True)
    if told:
        err.print(f"[bold]{found.headline}[/]: {found.conclusion}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if result.is_watermarked else 1)
