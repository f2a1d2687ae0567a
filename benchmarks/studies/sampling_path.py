"""A row's records before and after a scheme revision, side by side (e.g. the token rows
written through transformers' ``generate`` and then through the candidate engine).

A revision changes a row's fingerprint and so its records' keys; the old records stay in
the run's files. For each named row this prints, per revision present, per attack: the
texts scored, TP at FP 1% (thresholds from the row's own human negatives, shared by both
revisions when the detector is unchanged) and the share with p < 0.01; then the texts'
sentences, tokens drawn per output token, generation seconds per text and the quality
metrics.

    python benchmarks/studies/sampling_path.py experiments/runs/paper \
        --rows KGW SynthID Unigram MorphMark EXP UPV Unwatermarked \
        --attacks none "Doc-P (local)" "Doc-T (pt, sentence-wise)" "Mix 50%" "Word-S 30%"
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pandas as pd

from samark.evaluation.detection_metrics import evidence, threshold_at_fpr
from samark.evaluation.report.tables import human_records
from samark.evaluation.runner import Run
from samark.schemes.base import scheme_revision


def frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(records)
    df["fingerprint"] = [k[2] if len(k) > 2 else "" for k in df["key"]]
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--rows", nargs="+", required=True)
    ap.add_argument("--attacks", nargs="+", default=["none"])
    ap.add_argument("--fpr", type=float, default=0.01)
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    run = Run.open(args.run)
    specs = {s.label: s for s in run.experiment.schemes}
    attack_fp = {a.label: a.fingerprint for a in run.experiment.attacks}
    det = frame(run.detections.records())
    gen = frame(run.generations.records())
    quality = frame(run.quality.records())
    revisions: dict[str, list[tuple[int, str]]] = {}
    for label in args.rows:
        spec = specs[label]
        now = scheme_revision(spec.name)
        revisions[label] = [(r, spec.fingerprint_at(r)) for r in range(now + 1)]

    print(f"| row | revision | attack | n | TP@FP{100 * args.fpr:g}% | p < {args.alpha} |")
    print("|---|---|---|---|---|---|")
    for label in args.rows:
        for revision, fp in revisions[label]:
            mine = det[(det["scheme"] == label) & (det["fingerprint"] == fp)]
            if mine.empty:
                continue
            humans = human_records(run, det, mine["detector"].iloc[0])
            threshold = threshold_at_fpr(evidence(humans["p_value"], humans["z"]), args.fpr)
            for attack in args.attacks:
                sub = mine[mine["attack"] == attack]
                if attack != "none":  # records of this attack at its current parameters
                    keys = sub["key"].map(lambda k: k[5] if len(k) > 5 else "")
                    sub = sub[keys == attack_fp[attack]]
                if sub.empty:
                    continue
                tp = float(np.mean(evidence(sub["p_value"], sub["z"]) > threshold))
                below = float(np.mean(sub["p_value"] < args.alpha))
                print(
                    f"| {label} | {revision} | {attack} | {len(sub)} | {100 * tp:.1f} | "
                    f"{100 * below:.1f} |"
                )

    print()
    print("| row | revision | texts | sentences | tokens drawn / output token | s / text |")
    print("|---|---|---|---|---|---|")
    for label in args.rows:
        for revision, fp in revisions[label]:
            g = gen[(gen["scheme"] == label) & (gen["fingerprint"] == fp)]
            if g.empty:
                continue
            sentences = g["sentences"].map(len) if "sentences" in g else g["n_sentences"]
            ratio = g["tokens_sampled"].sum() / max(1, g["output_tokens"].sum())
            print(
                f"| {label} | {revision} | {len(g)} | {sentences.mean():.2f} | "
                f"{ratio:.2f} | {g['seconds'].mean():.1f} |"
            )

    metrics = [c for c in ("perplexity", "sd", "distinct2", "rep4") if c in quality]
    if metrics:
        print()
        print("Quality: mean per revision; the last revision minus the one before, paired by")
        print("prompt, with a 95% bootstrap interval over the prompts both have.")
        print()
        print("| row | revision | texts | " + " | ".join(metrics) + " |")
        print("|---|---|---|" + "---|" * len(metrics))
        rng = np.random.default_rng(0)
        for label in args.rows:
            per_revision = []
            for revision, fp in revisions[label]:
                q = quality[(quality["scheme"] == label) & (quality["fingerprint"] == fp)]
                if q.empty:
                    continue
                per_revision.append(q.set_index("item"))
                means = " | ".join(f"{q[m].mean():.3f}" for m in metrics)
                print(f"| {label} | {revision} | {len(q)} | {means} |")
            if len(per_revision) < 2:
                continue
            before, after = per_revision[-2], per_revision[-1]
            common = sorted(set(before.index) & set(after.index))
            cells = []
            for m in metrics:
                diff = (after.loc[common, m] - before.loc[common, m]).to_numpy(dtype=float)
                diff = diff[np.isfinite(diff)]
                boot = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(2000)]
                lo, hi = np.percentile(boot, [2.5, 97.5])
                cells.append(f"{diff.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]")
            print(f"| {label} | difference | {len(common)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
