"""How often SemStamp's paper z-test and our exact p-value flag human text.

    python benchmarks/studies/semstamp_null.py [--texts 300] [--sentences 12]

Human CNN/DailyMail windows, one fixed key: the share flagged at 1% and 5% by the
paper's one-sided z (binomial normal approximation over sentence pairs) and by the exact
p-value over keys (schemes/semstamp.py). Prints one table; no model generation."""

from __future__ import annotations

import argparse

import numpy as np

from samark.datasets import human_windows, load_dataset
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.schemes import create_scheme


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=300)
    ap.add_argument("--sentences", type=int, default=12)
    args = ap.parse_args()
    emb = load_embedder("all-mpnet-base-v2")
    key = WatermarkKey(b"semstamp-null-benchmark-key-0000", emb.identity)
    docs = load_dataset("cnn_dailymail")
    texts = [d.text for d in human_windows(docs, sentences=args.sentences, count=args.texts)]
    scheme = create_scheme("semstamp", key=key, embedder=emb)
    results = [scheme.detect(t) for t in texts]
    z = np.array([r.z for r in results])
    p = np.array([r.p_value for r in results])
    print(f"{len(texts)} human texts of {args.sentences} sentences, one key")
    print("level | paper z flags | exact p flags")
    for level, zcut in ((0.01, 2.3263), (0.05, 1.6449)):
        print(f"{level:.2f}  | {np.mean(z > zcut):.3f}        | {np.mean(p < level):.3f}")


if __name__ == "__main__":
    main()
