"""Where SAMark's margin goes, step by step, from an experiment's research records.

For each SAMark row (generation records with ``signal_*`` fields; experiments turn them
on), prints per step t, averaged over texts and channels (cosines signed by the step's
flags): the running text's offset before the step (the mean of the sentences chosen so
far), the candidate pool's mean and spread, the chosen sentence and its margin over the
pool. Then a least-squares fit of the pool mean on the running offset over all steps
after the first (how much of the text's offset the next pool inherits), and the
finished text's offset.

    python benchmarks/studies/margin_trajectory.py experiments/runs/paper --rows SAMark
    python benchmarks/studies/margin_trajectory.py experiments/runs/paper24 --rows SAMark
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from samark.evaluation.store import RecordStore


def load_steps(run: Path, rows: list[str]) -> dict[str, list[list[dict[str, list[float]]]]]:
    """Each row's texts as lists of steps that carry research records."""
    out: dict[str, list[list[dict[str, list[float]]]]] = defaultdict(list)
    for rec in RecordStore(run / "generations.jsonl").records():  # live or compacted
        if rec["scheme"] not in rows:
            continue
        steps = [s for s in rec.get("steps") or [] if "signal_pool_mean" in s]
        if steps:
            out[rec["scheme"]].append(steps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--rows", nargs="+", default=["SAMark"])
    args = ap.parse_args()
    for row, texts in load_steps(args.run, args.rows).items():
        length = max(len(t) for t in texts)
        print(f"{row}: {len(texts)} texts")
        header = ("step", "n", "offset", "pool", "pool sd", "chosen", "margin")
        print("{:>4} {:>4} {:>8} {:>8} {:>8} {:>8} {:>7}".format(*header))
        offsets, pools, finals = [], [], []
        for t in range(length):
            at = [steps[t] for steps in texts if len(steps) > t]
            pool = np.array([np.mean(s["signal_pool_mean"]) for s in at])
            sd = np.array([np.mean(s["signal_pool_sd"]) for s in at])
            chosen = np.array([np.mean(s["signal_chosen"]) for s in at])
            topic = [np.mean(s["signal_topic"]) for s in at if "signal_topic" in s]
            margin = (chosen - pool) / np.maximum(sd, 1e-9)
            shown = f"{np.mean(topic):+8.4f}" if topic else f"{'-':>8}"
            print(
                f"{t + 1:>4} {len(at):>4} {shown} {pool.mean():+8.4f} {sd.mean():8.4f} "
                f"{chosen.mean():+8.4f} {margin.mean():7.2f}"
            )
        for steps in texts:
            for s in steps:
                if "signal_topic" in s:
                    offsets.append(np.asarray(s["signal_topic"]))
                    pools.append(np.asarray(s["signal_pool_mean"]))
            finals.append(np.mean([np.mean(s["signal_chosen"]) for s in steps]))
        x, y = np.concatenate(offsets), np.concatenate(pools)
        slope, intercept = np.polyfit(x, y, 1)
        r2 = np.corrcoef(x, y)[0, 1] ** 2
        print(
            f"pool mean = {slope:.2f} x running offset {intercept:+.4f} "
            f"(R^2 {r2:.2f}, {len(x)} step-channels); finished text's offset "
            f"{np.mean(finals):+.4f}\n"
        )


if __name__ == "__main__":
    main()
