"""Detection stage: the human negatives once per detector, then each row's texts as written and
attacked."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from samark.errors import EmptyTextError
from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.records import DetectionRecord
from samark.evaluation.store import Stage
from samark.schemes import Watermark

if TYPE_CHECKING:
    from samark.evaluation.runner import Run


def run_stage(run: Run) -> None:
    # rows that score the same texts (another statistic, ``texts_from``) and every
    # detector's human negatives embed each sentence once
    with run.embedder.remembering():
        _detect_all(run)


def _detect_all(run: Run) -> None:
    exp = run.experiment
    for spec in exp.schemes:
        if not run.detectable(spec):
            continue
        scheme = run.scheme(spec)
        det = scheme.detector_id()
        # rows that share a detector share its negatives' records
        todo = run.in_order(
            [d for d in run.row_negatives(spec) if (det, "human", d.id) not in run.detections]
        )
        if todo:
            for doc in run.bar(todo, f"detect human ({spec.label})"):
                share_work(run.detections)
                detect_into(
                    run.detections,
                    scheme,
                    (det, "human", doc.id),
                    doc.text,
                    {"detector": det, "scheme": "human", "item": doc.id, "attack": NO_ATTACK},
                )
        texts = [
            (run.det_key(spec, item, attack), text, {"item": item, "attack": attack})
            for item, attack, text in run.row_texts(spec, exp.attacks)
        ]
        todo_t = run.in_order([t for t in texts if t[0] not in run.detections])
        for key, text, meta in run.bar(todo_t, f"detect {spec.label}"):
            share_work(run.detections)
            detect_into(
                run.detections, scheme, key, text, {"detector": det, "scheme": spec.label, **meta}
            )


def share_work(store: Stage) -> None:
    """Before each item, read what was appended to the store: another process on the same
    folder (``--reverse``, or an overlapping ``--schemes``) may have scored it meanwhile."""
    store.refresh()


def detect_into(
    store: Stage, scheme: Watermark, key: tuple[str, ...], text: str, meta: dict[str, Any]
) -> None:
    """Score ``text`` and append the record under ``key`` (nothing to score: p = 1)."""
    if key in store:
        return  # scored by another process since this one listed its work
    start = time.perf_counter()
    try:
        d = scheme.detect(text)
    except EmptyTextError:
        record = DetectionRecord.nothing_to_score(time.perf_counter() - start, **meta)
    else:
        record = DetectionRecord(
            p_value=d.p_value,
            z=d.z,
            statistic=d.statistic,
            score=d.score,
            n_units=d.n_units,
            unit=d.unit,
            details=dict(d.diagnostics),
            seconds=time.perf_counter() - start,
            **meta,
        )
    store.append(key, record.to_json())
