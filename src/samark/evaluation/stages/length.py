"""Length stage: power against length. Every detector scores the first k sentences of each
human negative and of each row's texts (as written, and under ``[metrics] length_attacks``)
for every k in ``[metrics] lengths``.

The first k sentences of a text written sentence by sentence are a k-sentence text of the
same process, and the first k sentences of a human window are a human text, so one run at
the full length gives the curve without new generation. Under an attack, the first k
sentences of the attacked text stand in for attacking a k-sentence text: exact for
sentence-wise attacks, an approximation for paragraph rewrites, which may move content
across sentences.
"""

from __future__ import annotations

from samark.evaluation.experiment import NO_ATTACK, SchemeSpec
from samark.evaluation.records import DetectionMeta
from samark.evaluation.stages import RunContext
from samark.evaluation.stages.detect import detect_into, share_work
from samark.segment import split_sentences


def prefix(text: str, sentences: int) -> str:
    """The first ``sentences`` sentences of ``text`` (segmented as the detectors do)."""
    return " ".join(split_sentences(text)[:sentences])


def run_stage(run: RunContext) -> None:
    exp = run.experiment
    lengths = exp.metrics.lengths
    if not lengths:
        return
    attacks = [a for a in exp.attacks if a.label in exp.metrics.length_attacks]
    # detectors re-score the same sentences at every k: embed each one once
    with run.embedder.remembering():
        for spec in exp.schemes:
            if not run.detectable(spec):
                continue
            detector = run.detector(spec)
            det = run.detector_id(spec)
            assert det is not None
            # rows that share a detector share its negatives' records
            todo: list[tuple[tuple[str, ...], str, DetectionMeta]] = [
                (
                    run.keys.human_length(det, doc.id, k),
                    doc.text,
                    DetectionMeta(
                        detector=det, scheme="human", item=doc.id, attack=NO_ATTACK, sentences=k
                    ),
                )
                for doc in run.row_negatives(spec)
                for k in lengths
            ]
            todo += [
                (
                    run.keys.length(spec, item, attack, k),
                    text,
                    DetectionMeta(
                        detector=det, scheme=spec.label, item=item, attack=attack, sentences=k
                    ),
                )
                for item, attack, text in run.row_texts(spec, attacks)
                for k in lengths
            ]
            todo = run.in_order([t for t in todo if t[0] not in run.lengths])
            for key, text, meta in run.bar(todo, f"length {spec.label}"):
                share_work(run.lengths)
                # segmented here, for the work left only
                text = prefix(text, meta["sentences"])
                detect_into(run.lengths, detector, key, text, meta)


class LengthStage:
    name = "length"

    def run(self, run: RunContext) -> None:
        run_stage(run)

    def status(self, run: RunContext, spec: SchemeSpec) -> dict[str, tuple[int, int]]:
        metrics = run.experiment.metrics
        lengths = metrics.lengths if run.detectable(spec) else ()
        attacks = (NO_ATTACK, *metrics.length_attacks)
        gens = run.row_generations(spec)
        done = sum(
            run.keys.length(spec, g["item"], attack, k) in run.lengths
            for g in gens
            for attack in attacks
            for k in lengths
        )
        return {"length": (done, len(gens) * len(attacks) * len(lengths))}


STAGE = LengthStage()
