"""Detection stage: the human negatives once per detector, then each row's texts as written and
attacked."""

from __future__ import annotations

import time

import numpy as np

from samark.detection.pipeline import prepare, score
from samark.detection.ring_detector import RingDetector
from samark.errors import SamarkError
from samark.evaluation.experiment import NO_ATTACK, SchemeSpec
from samark.evaluation.records import DetectionMeta, DetectionRecord
from samark.evaluation.stages import RunContext
from samark.evaluation.store import RecordStore


def run_stage(run: RunContext) -> None:
    # rows that score the same texts (another statistic, ``texts_from``) and every
    # detector's human negatives embed each sentence once: the pipeline's features reuse
    # ``known`` (the run's embedder's vectors, passed as an argument); a scheme that
    # embeds on its own (SemStamp) reads the embedder's memory
    known: dict[str, np.ndarray] = {}
    with run.embedder.remembering():
        _detect_all(run, known)


def _detect_all(run: RunContext, known: dict[str, np.ndarray]) -> None:
    exp = run.experiment
    for spec in exp.schemes:
        if not run.detectable(spec):
            continue
        detector = run.detector(spec)
        det = run.detector_id(spec)
        assert det is not None
        # the run's embedder's vectors serve a detector that embeds with it
        memo = known if detector.embedder is run.embedder else None
        # rows that share a detector share its negatives' records
        todo = run.in_order(
            [d for d in run.row_negatives(spec) if (det, "human", d.id) not in run.detections]
        )
        if todo:
            for doc in run.bar(todo, f"detect human ({spec.label})"):
                share_work(run.detections)
                detect_into(
                    run.detections,
                    detector,
                    run.keys.human_detection(det, doc.id),
                    doc.text,
                    DetectionMeta(detector=det, scheme="human", item=doc.id, attack=NO_ATTACK),
                    memo,
                )
        texts = [
            (
                run.keys.detection(spec, item, attack),
                text,
                DetectionMeta(detector=det, scheme=spec.label, item=item, attack=attack),
            )
            for item, attack, text in run.row_texts(spec, exp.attacks)
        ]
        todo_t = run.in_order([t for t in texts if t[0] not in run.detections])
        for key, text, meta in run.bar(todo_t, f"detect {spec.label}"):
            share_work(run.detections)
            detect_into(run.detections, detector, key, text, meta, memo)


def share_work(store: RecordStore) -> None:
    """Before each item, read what was appended to the store: another process on the same
    folder (``--reverse``, or an overlapping ``--schemes``) may have scored it meanwhile."""
    store.refresh()


def detect_into(
    store: RecordStore,
    detector: RingDetector,
    key: tuple[str, ...],
    text: str,
    meta: DetectionMeta,
    known: dict[str, np.ndarray] | None = None,
) -> None:
    """Score ``text`` through the pipeline (:mod:`samark.detection.pipeline`: prepared,
    then scored; any size, as ``samark detect --long``) and append the record under
    ``key``: the key's detection or, for a keyring, the ring's answer
    (:meth:`RingDetection.as_detection`). Nothing to score: p = 1."""
    if key in store:
        return  # scored by another process since this one listed its work
    start = time.perf_counter()
    (found,) = score(detector, prepare(detector, [text], limits=None, known=known))
    if isinstance(found, SamarkError):  # nothing to score (or binary)
        record = DetectionRecord.nothing_to_score(time.perf_counter() - start, **meta)
    else:
        record = DetectionRecord.of_answer(found, time.perf_counter() - start, **meta)
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
