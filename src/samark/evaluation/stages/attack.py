"""Attack stage: each detectable row's texts attacked, with the attack's measured fidelity."""

from __future__ import annotations

import time

from samark.embed import Embedder, load_embedder
from samark.evaluation import fidelity
from samark.evaluation.experiment import SchemeSpec, item_seed
from samark.evaluation.records import AttackRecord
from samark.evaluation.stages import RunContext


def run_stage(run: RunContext) -> None:
    exp = run.experiment
    humans = {e.id: e.human for e in run.examples()}
    strength_embedder: Embedder | None = None
    for aspec in exp.attacks:
        for spec in exp.schemes:
            if not spec.writes or not run.detectable(spec):
                continue  # a texts_from row scores its owner's attacked texts
            gens = run.row_generations(spec)
            # in prompt order whatever --reverse says (each text has its own seed, so the
            # order only decides which texts share a batch)
            todo = [g for g in gens if run.keys.attack(spec, g["item"], aspec) not in run.attacks]
            if not todo:
                continue
            attacker = run.attacker(aspec)
            if strength_embedder is None:
                strength_embedder = load_embedder(fidelity.fidelity_embedder(exp.embedder))
            bar = run.bar(None, f"attack {aspec.label} on {spec.label}", total=len(todo))
            for g in [g for g in todo if not g["text"].strip()]:
                # nothing to attack: the attacked text is empty too, and it is detected
                # (p = 1) so that the row's miss is counted, not dropped
                empty = AttackRecord(
                    scheme=spec.label,
                    item=g["item"],
                    attack=aspec.label,
                    text="",
                    source_empty=True,
                    seconds=0.0,
                )
                run.attacks.append(run.keys.attack(spec, g["item"], aspec), empty.to_json())
                bar.update(1)
            todo = [g for g in todo if g["text"].strip()]
            for batch in [todo[i : i + 8] for i in range(0, len(todo), 8)]:
                seeds = [item_seed(exp.seed, "attack", aspec.label, g["item"]) for g in batch]
                texts = [g["text"] for g in batch]
                start = time.perf_counter()
                out = attacker.apply_batch(
                    texts, seeds=seeds, human=[humans.get(g["item"], "") for g in batch]
                )
                seconds = (time.perf_counter() - start) / len(batch)
                measured = fidelity.measure(strength_embedder, texts, out)
                for g, seed, new, fid in zip(batch, seeds, out, measured, strict=True):
                    record = AttackRecord(
                        scheme=spec.label,
                        item=g["item"],
                        attack=aspec.label,
                        seed=seed,
                        text=new,
                        seconds=seconds,
                        strength_embedder=strength_embedder.name,
                        extra=fid.to_dict(),
                    )
                    run.attacks.append(run.keys.attack(spec, g["item"], aspec), record.to_json())
                bar.update(len(batch))
            bar.close()


class AttackStage:
    name = "attack"

    def run(self, run: RunContext) -> None:
        run_stage(run)

    def status(self, run: RunContext, spec: SchemeSpec) -> dict[str, tuple[int, int]]:
        attacks = run.experiment.attacks
        gens = run.row_generations(spec)
        done = sum(
            run.keys.attack(spec, g["item"], a) in run.attacks for g in gens for a in attacks
        )
        return {"attack": (done, len(gens) * len(attacks) if run.detectable(spec) else 0)}


STAGE = AttackStage()
