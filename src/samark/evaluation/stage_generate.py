"""Generation stage: each row writes its texts (in batches where the scheme decodes prompts
together)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from samark.evaluation.experiment import item_seed
from samark.evaluation.records import GenerationRecord

if TYPE_CHECKING:
    from samark.evaluation.runner import Run


def run_stage(run: Run) -> None:
    exp = run.experiment
    examples = run.examples()
    for spec in exp.schemes:
        if not spec.writes:
            continue  # scores another row's texts
        items = examples[: spec.prompts or len(examples)]
        todo = [e for e in items if run.gen_key(spec, e) not in run.generations]
        if not todo:
            continue
        todo = run.in_order(todo)
        scheme = run.scheme(spec)
        bar = run.bar(None, f"generate {spec.label}", total=len(todo))
        size = scheme.batch_size
        for batch in [todo[i : i + size] for i in range(0, len(todo), size)]:
            run.generations.refresh()  # another process may have done some meanwhile
            batch = [e for e in batch if run.gen_key(spec, e) not in run.generations]
            if not batch:
                continue
            seed = item_seed(exp.seed, "generate", batch[0].id)
            outs = scheme.generate_batch(
                [e.prompt for e in batch], max_new_sentences=exp.dataset.sentences, seed=seed
            )
            run.generations.refresh()
            for e, g in zip(batch, outs, strict=True):
                if run.gen_key(spec, e) in run.generations:
                    continue  # finished by another process while this one worked
                record = GenerationRecord.of(spec.label, e.id, seed, g)
                run.generations.append(run.gen_key(spec, e), record.to_json())
            bar.update(len(batch))
        bar.close()
