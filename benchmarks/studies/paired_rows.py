"""Rows of an experiment compared on the prompts they share (paired), per attack.

The report scores each row on its own prompts; a research row that runs on the first 10 or
20 prompts is then compared with rows measured on 40. This prints, for the items every
named row has, TP at FP 1% (thresholds from each row's own human negatives) and the share
with p < alpha, with a paired bootstrap interval of the difference to the first row.

    python benchmarks/studies/paired_rows.py experiments/runs/paper \
        --rows "SAMark (quiet space)" SAMark KGW --attacks none "Doc-P (local)"

A row of another run folder is named ``FOLDER::LABEL`` (e.g. the same prompts written by
another generator, experiments/runs/gemma::SAMark); its threshold comes from that run's own
negatives, and items pair by their id (the source document's).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from samark.evaluation.detection_metrics import evidence, threshold_at_fpr
from samark.evaluation.report.tables import human_records
from samark.evaluation.runner import Run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--rows", nargs="+", required=True)
    ap.add_argument("--attacks", nargs="+", default=["none"])
    ap.add_argument("--fpr", type=float, default=0.01)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    runs: dict[str, tuple[Run, pd.DataFrame]] = {}

    def detections(folder: str) -> tuple[Run, pd.DataFrame]:
        if folder not in runs:
            run = Run.open(folder)
            runs[folder] = (run, pd.DataFrame(run.current_records(run.detections)))
        return runs[folder]

    rng = np.random.default_rng(0)
    print(
        f"| attack | row | n | TP@FP{100 * args.fpr:g}% | p < {args.alpha} | "
        f"diff. TP to {args.rows[0]} [95%] |"
    )
    print("|---|---|---|---|---|---|")
    for attack in args.attacks:
        per_row = {}
        for name in args.rows:
            folder, label = name.split("::", 1) if "::" in name else (args.run, name)
            run, det = detections(folder)
            mine = det[(det["scheme"] == label) & (det["attack"] == attack)]
            if mine.empty:
                raise SystemExit(f"no detections of {label!r} under {attack!r} in {folder}")
            humans = human_records(run, det, mine["detector"].iloc[0])
            neg = evidence(humans["p_value"], humans["z"])
            threshold = threshold_at_fpr(neg, args.fpr)
            per_row[name] = (mine.set_index("item"), threshold)
        common = sorted(set.intersection(*(set(r[0].index) for r in per_row.values())))
        hits = {}
        for name, (mine, threshold) in per_row.items():
            sub = mine.loc[common]
            pos = evidence(sub["p_value"], sub["z"])
            hits[name] = pos > threshold
            tp = float(hits[name].mean())
            calibrated = float(np.mean(sub["p_value"] < args.alpha))
            base = hits[args.rows[0]]
            boot = [
                float(np.mean(hits[name][i]) - np.mean(base[i]))
                for i in (rng.integers(0, len(common), len(common)) for _ in range(args.bootstrap))
            ]
            lo, hi = np.percentile(boot, [2.5, 97.5])
            gain = 100 * (hits[name].mean() - base.mean())
            diff = f"{gain:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
            if name == args.rows[0]:
                diff = ""
            print(
                f"| {attack} | {name} | {len(common)} | {100 * tp:.1f} | "
                f"{100 * calibrated:.1f} | {diff} |"
            )


if __name__ == "__main__":
    main()
