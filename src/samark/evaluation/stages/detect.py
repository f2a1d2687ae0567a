"""Detection stage: the human negatives once per detector, then each row's texts as written and
attacked."""

from __future__ import annotations

import time
from typing import Any

from samark.errors import EmptyTextError
from samark.evaluation.experiment import NO_ATTACK, SchemeSpec
from samark.evaluation.records import DetectionRecord
from samark.evaluation.stages import RunContext
from samark.evaluation.store import RecordStore
from samark.schemes import Watermark


def run_stage(run: RunContext) -> None:
    # rows that score the same texts (another statistic, ``texts_from``) and every
    # detector's human negatives embed each sentence once
    with run.embedder.remembering():
        _detect_all(run)


def _detect_all(run: RunContext) -> None:
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
                    run.keys.human_detection(det, doc.id),
                    doc.text,
                    {"detector": det, "scheme": "human", "item": doc.id, "attack": NO_ATTACK},
                )
        texts = [
            (run.keys.detection(spec, item, attack), text, {"item": item, "attack": attack})
            for item, attack, text in run.row_texts(spec, exp.attacks)
        ]
        todo_t = run.in_order([t for t in texts if t[0] not in run.detections])
        for key, text, meta in run.bar(todo_t, f"detect {spec.label}"):
            share_work(run.detections)
            detect_into(
                run.detections, scheme, key, text, {"detector": det, "scheme": spec.label, **meta}
            )


def share_work(store: RecordStore) -> None:
    """Before each item, read what was appended to the store: another process on the same
    folder (``--reverse``, or an overlapping ``--schemes``) may have scored it meanwhile."""
    store.refresh()


def detect_into(
    store: RecordStore, scheme: Watermark, key: tuple[str, ...], text: str, meta: dict[str, Any]
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
        record = DetectionRecord.of(d, time.perf_counter() - start, **meta)
    store.append(key, record.to_json())


class DetectStage:
    name = "detect"

    def run(self, run: RunContext) -> None:
        run_stage(run)

    def status(self, run: RunContext, spec: SchemeSpec) -> dict[str, tuple[int, int]]:
        """The row's texts as written and attacked ("detect"), and its detector's human
        negatives ("human")."""
        if not run.detectable(spec):
            return {"detect": (0, 0), "human": (0, 0)}
        labels = (NO_ATTACK, *(a.label for a in run.experiment.attacks))
        gens = run.row_generations(spec)
        done = sum(
            run.keys.detection(spec, g["item"], label) in run.detections
            for g in gens
            for label in labels
        )
        negatives = run.row_negatives(spec)
        det = run.detector_id(spec)
        human = (
            sum(run.keys.human_detection(det, d.id) in run.detections for d in negatives)
            if det
            else 0
        )
        return {"detect": (done, len(gens) * len(labels)), "human": (human, len(negatives))}


STAGE = DetectStage()
