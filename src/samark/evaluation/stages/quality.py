"""Quality stage: text metrics, perplexity under an oracle LM, and the judge."""

from __future__ import annotations

from samark.errors import SamarkError
from samark.evaluation.experiment import SchemeSpec
from samark.evaluation.records import QualityRecord
from samark.evaluation.stages import RunContext
from samark.evaluation.text_metrics import TEXT_METRICS


def run_stage(run: RunContext) -> None:
    exp = run.experiment
    names = [m for m in exp.metrics.quality if m in TEXT_METRICS.names()]
    oracle = None
    if "perplexity" in exp.metrics.quality:
        from samark.evaluation.perplexity import Perplexity

        oracle_name = exp.metrics.oracle or "gemma-3-270m"
        if oracle_name == exp.generator:
            raise SamarkError("the perplexity oracle must differ from the generator")
        oracle = Perplexity(oracle_name)
    for spec in exp.schemes:
        if not spec.writes:
            continue  # the same texts as its owner row: the same quality
        todo = [  # the quality of no text is not a figure
            g
            for g in run.row_generations(spec, written=True)
            if run.keys.quality(spec, g["item"]) not in run.quality
        ]
        for g in run.bar(todo, f"quality {spec.label}"):
            scores: dict[str, float] = {name: TEXT_METRICS.get(name)(g["text"]) for name in names}
            if oracle is not None:
                scores["perplexity"] = oracle.perplexity(g["prompt"], g["text"])
            record = QualityRecord(scheme=spec.label, item=g["item"], extra=scores)
            run.quality.append(run.keys.quality(spec, g["item"]), record.to_json())
    if "judge" in exp.metrics.quality:
        from samark.evaluation.judge import run_judge

        run_judge(run)


class QualityStage:
    name = "quality"

    def run(self, run: RunContext) -> None:
        run_stage(run)

    def status(self, run: RunContext, spec: SchemeSpec) -> dict[str, tuple[int, int]]:
        gens = run.row_generations(spec)
        done = sum(run.keys.quality(spec, g["item"]) in run.quality for g in gens)
        asked = len(run.row_generations(spec, written=True)) if spec.writes else 0
        return {"quality": (done, asked)}


STAGE = QualityStage()
