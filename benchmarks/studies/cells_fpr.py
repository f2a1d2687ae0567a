"""Keyed cells on human text over keys (issue 44): each of ``--keys`` fresh keys (drawn as
``samark keygen`` draws them) scores 40 six-sentence CNN/DailyMail windows (articles 100+,
none a prompt of the paper run) with static pivots and with 16 cells (``scan``, 999 null
sets), one JSON line per key and setting with every p-value.

    python benchmarks/studies/cells_fpr.py --keys 60 -o experiments/runs/cells-fpr/fpr.jsonl
    python benchmarks/studies/cells_fpr.py --table experiments/runs/cells-fpr/fpr.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def run(keys: int, out: Path) -> None:
    from samark import load_embedder, new_key
    from samark.datasets import human_windows, load_dataset
    from samark.schemes.samark import SAMarkDetector
    from samark.schemes.samark.config import SAMarkDetection
    from samark.schemes.samark.detector import embed_sentences

    embedder = load_embedder("all-mpnet-base-v2")
    windows = human_windows(load_dataset("cnn_dailymail")[100:], sentences=6, count=40)
    texts = embed_sentences(embedder, [w.text for w in windows])
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for k in range(keys):
            key = new_key(embedder)
            for cells in (0, 16):
                det = SAMarkDetector(key, embedder, SAMarkDetection(statistic="scan"), cells=cells)
                ps = [det.score_embeddings(e, s).p_value for s, e in texts]
                f.write(json.dumps({"key": k, "cells": cells, "p": ps}) + "\n")
                f.flush()


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.open()]
    print(
        "| cells | keys x texts | FPR p < 0.01 | FPR p < 0.05 | per-key sd / binomial sd at 5% "
        "| worst key at 1% / 5% |"
    )
    print("|---|---|---|---|---|---|")
    for cells in sorted({r["cells"] for r in rows}):
        sel = [r for r in rows if r["cells"] == cells]
        ps = np.array([p for r in sel for p in r["p"]])
        per_key = [np.mean(np.array(r["p"]) < 0.05) for r in sel]
        binomial = np.sqrt(0.05 * 0.95 / len(sel[0]["p"]))
        print(
            f"| {cells} | {len(sel)} x {len(sel[0]['p'])} | {np.mean(ps < 0.01):.4f} | "
            f"{np.mean(ps < 0.05):.4f} | {np.std(per_key) / binomial:.2f} | "
            f"{max(np.mean(np.array(r['p']) < 0.01) for r in sel):.3f} / {max(per_key):.3f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("-o", "--output", default="experiments/runs/cells-fpr/fpr.jsonl")
    parser.add_argument("--table")
    args = parser.parse_args()
    if args.table:
        table(Path(args.table))
    else:
        run(args.keys, Path(args.output))


if __name__ == "__main__":
    main()
