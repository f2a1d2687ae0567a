"""Power against length from a finished run: detection of the first k sentences.

    python benchmarks/length_curve.py experiments/runs/paper --lengths 3 6 9 12 \
        --out docs/results/2026-11-24-length

The first k sentences of a text generated sentence by sentence are a text of k sentences
from the same process, and the first k sentences of a human window are a human text; so a
12-sentence run gives the curve at k <= 12 without new generation. Under an attack, the
first k sentences of the attacked text stand in for attacking a k-sentence text (exact for
sentence-wise attacks, an approximation for Doc-P, which keeps about 92% of the sentences).
Every sentence is embedded once (cached in samark's user cache); SAMark's two statistics
score prefixes of those embeddings, token rows re-tokenise prefixes. TP@FP1% uses the
empirical 1% threshold over the run's human negatives at the same k; "p<0.01" is the share
below the calibrated rule. Writes length.csv and length.png; prints the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from samark.evaluation.detection_metrics import evidence, tpr_at_fpr
from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.runner import Run
from samark.schemes import create_scheme
from samark.schemes.base import SharedResources
from samark.segment import split_sentences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--lengths", type=int, nargs="+", default=[3, 6, 9, 12])
    ap.add_argument("--attacks", nargs="+", default=[NO_ATTACK, "Doc-P (local)"])
    ap.add_argument("--rows", nargs="+", default=["SAMark", "KGW", "SynthID"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run.open(args.run_dir)
    specs = {s.label: s for s in run.experiment.schemes}
    texts: dict[tuple[str, str], list[list[str]]] = {}
    for label in args.rows:
        spec = specs[label]
        for g in run.row_generations(spec, written=True):
            for attack in args.attacks:
                if attack == NO_ATTACK:
                    text = g["text"]
                else:
                    a = next((a for a in run.experiment.attacks if a.label == attack), None)
                    rec = run.attacks.get(run.attack_key(spec, g["item"], a)) if a else None
                    if rec is None:
                        continue
                    text = rec["text"]
                texts.setdefault((label, attack), []).append(split_sentences(text))
    humans = [split_sentences(d.text) for d in run.negatives()]
    shared = SharedResources(run.experiment.generator, run.embedder)
    samark = {
        stat: create_scheme("samark", key=run.key, shared=shared, statistic=stat)
        for stat in ("z", "scan")
    }
    # every distinct sentence embedded once
    from samark.models import cache_dir

    # the embeddings (about 150 MB for a 1,000-negative run) stay out of the results folder
    cache = cache_dir() / "length_curve" / f"{run.experiment.name}-{run.embedder.name}.npz"
    cache.parent.mkdir(parents=True, exist_ok=True)
    every = sorted({s for group in [*texts.values(), humans] for t in group for s in t})
    if cache.exists():
        saved = np.load(cache, allow_pickle=False)
        table = dict(zip(saved["sentences"].tolist(), saved["vectors"], strict=True))
    else:
        table = {}
    missing = [s for s in every if s not in table]
    if missing:
        print(f"embedding {len(missing)} sentences", flush=True)
        table.update(zip(missing, run.embedder.encode(missing), strict=True))
        keys = sorted(table)
        np.savez(cache, sentences=np.array(keys), vectors=np.array([table[k] for k in keys]))

    def scores(label: str, group: list[list[str]], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(evidence, p) of the first k sentences of each text, by the row's detector."""
        ev, ps = [], []
        for sentences in group:
            head = sentences[:k]
            if not head:
                ev.append(-np.inf)
                ps.append(1.0)
                continue
            if label.startswith("SAMark"):
                stat = "scan" if "scan" in label else "z"
                emb = np.array([table[s] for s in head])
                d = samark[stat].detector.score_embeddings(emb, head)  # type: ignore[attr-defined]
            else:
                d = token_rows[label].detect(" ".join(head))
            ev.append(float(evidence(np.array([d.p_value]), np.array([d.z]))[0]))
            ps.append(d.p_value)
        return np.array(ev), np.array(ps)

    token_rows = {
        label: create_scheme(specs[label].name, key=run.key, shared=shared)
        for label in args.rows
        if not label.startswith("SAMark")
    }
    rows = []
    labels = [*args.rows, *(["SAMark (scan)"] if "SAMark" in args.rows else [])]
    for label in labels:
        source = "SAMark" if label.startswith("SAMark") else label
        for k in args.lengths:
            neg, _ = scores(label, humans, k)
            for attack in args.attacks:
                group = texts.get((source, attack))
                if not group:
                    continue
                pos, p = scores(label, group, k)
                rows.append(
                    {
                        "row": label,
                        "attack": attack,
                        "sentences": k,
                        "n": len(group),
                        "tp@fp1%": tpr_at_fpr(neg, pos, 0.01),
                        "p<0.01": float(np.mean(p < 0.01)),
                    }
                )
            print(f"{label} k={k} done", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(args.out / "length.csv", index=False)
    print(df.to_string(index=False))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.attacks), figsize=(5 * len(args.attacks), 4))
    for ax, attack in zip(np.atleast_1d(axes), args.attacks, strict=True):
        for label, sub in df[df["attack"] == attack].groupby("row", sort=False):
            ax.plot(sub["sentences"], 100 * sub["tp@fp1%"], marker="o", label=label)
        ax.set_title(attack)
        ax.set_xlabel("sentences")
        ax.set_ylabel("TP@FP1% (%)")
        ax.set_ylim(0, 101)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "length.png", dpi=120)


if __name__ == "__main__":
    main()
