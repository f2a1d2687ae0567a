"""Generation stage: each row writes its texts (in batches where the scheme decodes prompts
together)."""

from __future__ import annotations

from samark.evaluation.experiment import SchemeSpec, item_seed
from samark.evaluation.records import GenerationRecord
from samark.evaluation.stages import RunContext


def run_stage(run: RunContext) -> None:
    exp = run.experiment
    examples = run.examples()
    for spec in exp.schemes:
        if not spec.writes:
            continue  # scores another row's texts
        items = examples[: spec.prompts or len(examples)]
        todo = [e for e in items if run.keys.generation(spec, e) not in run.generations]
        if not todo:
            continue
        todo = run.in_order(todo)
        scheme = run.scheme(spec)
        bar = run.bar(None, f"generate {spec.label}", total=len(todo))
        size = scheme.batch_size
        for batch in [todo[i : i + size] for i in range(0, len(todo), size)]:
            run.generations.refresh()  # another process may have done some meanwhile
            batch = [e for e in batch if run.keys.generation(spec, e) not in run.generations]
            if not batch:
                continue
            seed = item_seed(exp.seed, "generate", batch[0].id)
            outs = scheme.generate_batch(
                [e.prompt for e in batch], max_new_sentences=exp.dataset.sentences, seed=seed
            )
            run.generations.refresh()
            for e, g in zip(batch, outs, strict=True):
                if run.keys.generation(spec, e) in run.generations:
                    continue  # finished by another process while this one worked
                record = GenerationRecord.of(spec.label, e.id, seed, g)
                run.generations.append(run.keys.generation(spec, e), record.to_json())
            bar.update(len(batch))
        bar.close()


class GenerateStage:
    name = "generate"

    def run(self, run: RunContext) -> None:
        run_stage(run)

    def status(self, run: RunContext, spec: SchemeSpec) -> dict[str, tuple[int, int]]:
        items = run.examples()[: spec.prompts or None]
        done = sum(run.keys.generation(spec, e) in run.generations for e in items)
        return {"generate": (done, len(items))}


STAGE = GenerateStage()
