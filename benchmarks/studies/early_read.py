"""An early read of a run in progress: its marked texts scored before its detect and length
stages, on the texts generated and attacked so far (issue 44: 64 keyed cells on the paper
protocol, a run that spans sessions).

Each row's texts as written and as each attack left them (the run's own attack records) are
scored by the row's own detector, whole (as the detect stage scores them) and, for the
attacks of ``[metrics] length_attacks`` and the unattacked text, at each of ``[metrics]
lengths`` first sentences of the attacked text (as the length stage scores them). The human
negatives are not scored, so this reads p < 0.01 only, not TP@FP1% or the FPR; the run's
own stages write the records that count. Only items that every attack has reached are read,
so that every column counts the same texts.

    python benchmarks/studies/early_read.py experiments/runs/paper-cells64
    python benchmarks/studies/early_read.py experiments/runs/paper-cells --items-of \\
        experiments/runs/paper-cells64   # the same prompts, from another run's records
"""

from __future__ import annotations

import argparse

import numpy as np

from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.runner import Run
from samark.evaluation.stages.length import prefix
from samark.schemes.base import Watermark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument(
        "--items-of", help="read only the items that this other run has attacked every way"
    )
    args = parser.parse_args()
    run = Run.open(args.run_dir)
    wanted = attacked_items(Run.open(args.items_of)) if args.items_of else None
    metrics = run.experiment.metrics
    for spec in run.experiment.schemes:
        scheme = run.scheme(spec)
        rows = run.row_texts(spec, run.experiment.attacks)
        items = attacked_items(run) if wanted is None else wanted
        rows = [r for r in rows if r[0] in items]
        present = {item for item, _, _ in rows}
        print(f"{spec.label}: {len(present)} texts attacked every way", flush=True)
        for attack in dict.fromkeys(a for _, a, _ in rows):
            texts = [t for _, a, t in rows if a == attack]
            read(scheme, attack, texts, None)
            if attack == NO_ATTACK or attack in metrics.length_attacks:
                for k in metrics.lengths:
                    read(scheme, attack, texts, k)


def attacked_items(run: Run) -> set[str]:
    """The items of the run's first row that every attack has reached."""
    spec = run.experiment.schemes[0]
    rows = run.row_texts(spec, run.experiment.attacks)
    done = {(item, attack) for item, attack, _ in rows}
    labels = [a.label for a in run.experiment.attacks]
    return {item for item, _ in done if all((item, label) in done for label in labels)}


def read(scheme: Watermark, attack: str, texts: list[str], k: int | None) -> None:
    found = scheme.detect_many([t if k is None else prefix(t, k) for t in texts])
    p = np.array([1.0 if d is None else d.p_value for d in found])
    sem = [d.diagnostics.get("p_semantic") for d in found if d is not None]
    semantic = f"  semantic {100 * np.mean(np.array(sem) < 0.01):5.1f}" if all(sem) and sem else ""
    length = "whole" if k is None else f"first {k}"
    print(
        f"{attack:28s} {length:9s} p < 0.01: {100 * np.mean(p < 0.01):5.1f}{semantic}"
        f"  (of {len(p)})",
        flush=True,
    )


if __name__ == "__main__":
    main()
