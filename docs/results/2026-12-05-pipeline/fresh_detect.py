"""A fresh detect stage through the pipeline on a subset of the committed paper run,
compared with its stored records (docs/results/2026-12-05-pipeline/README.md).

    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/results/2026-12-05-pipeline/fresh_detect.py \
        > docs/results/2026-12-05-pipeline/fresh_detect.jsonl

Reads experiments/runs/paper (writes nothing there): for each row below, its first
``ITEMS`` texts as written and its detector's first ``ITEMS`` human negatives, each
prepared and scored (samark.detection.pipeline, any size, as the harness does), one JSON
line per text: the stored and fresh p-values and units.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch

from samark.detection.pipeline import prepare, score
from samark.errors import SamarkError
from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.runner import Run

ROWS = ("SAMark", "SAMark (scan)", "SAMark (layered)", "KGW", "SemStamp")
ITEMS = 12


def main() -> None:
    torch.set_num_threads(1)
    run = Run.open("experiments/runs/paper")
    by_label = {s.label: s for s in run.experiment.schemes}
    known: dict[str, np.ndarray] = {}
    with run.embedder.remembering():  # as the detect stage (SemStamp embeds on its own)
        for label in ROWS:
            spec = by_label[label]
            detector = run.detector(spec)
            det = run.detector_id(spec)
            assert det is not None
            memo = known if detector.embedder is run.embedder else None
            work = [
                ("text", item, run.keys.detection(spec, item, NO_ATTACK), text)
                for item, attack, text in run.row_texts(spec, [])
                if attack == NO_ATTACK
            ][:ITEMS]
            work += [
                ("human", d.id, run.keys.human_detection(det, d.id), d.text)
                for d in run.row_negatives(spec)[:ITEMS]
            ]
            for kind, item, key, text in work:
                stored = run.detections.get(key)
                (found,) = score(detector, prepare(detector, [text], limits=None, known=memo))
                fresh = None if isinstance(found, SamarkError) else found.as_detection()
                line = {
                    "row": label,
                    "kind": kind,
                    "item": item,
                    "stored_p": None if stored is None else stored["p_value"],
                    "fresh_p": 1.0 if fresh is None else fresh.p_value,
                    "stored_units": None if stored is None else stored["n_units"],
                    "fresh_units": 0 if fresh is None else fresh.n_units,
                }
                print(json.dumps(line), flush=True)
                print(label, kind, item, line["stored_p"], line["fresh_p"], file=sys.stderr)


if __name__ == "__main__":
    main()
