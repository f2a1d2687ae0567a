"""Fidelity and cost of each attack on human paragraphs (CNN/DailyMail windows).

For each attack: seconds per paragraph, sentences kept, sentence-aligned similarity
(median and 10th percentile), its reverse (precision: low = invented content), 4-gram copy
and word overlap, all measured under all-MiniLM-L6-v2.

    python benchmarks/attacks.py --paragraphs 20 --sentences 12
    python benchmarks/attacks.py --lm        # also SmolLM2's rewrite (about 30 s a paragraph)
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np
import torch

from samark.datasets import human_windows, load_dataset
from samark.embed import load_embedder
from samark.evaluation.attacks import create_attack
from samark.evaluation.fidelity import MEANING_PRESERVING, measure

ATTACKS: list[tuple[str, str, dict[str, Any]]] = [
    ("Doc-P (local)", "doc-p-local", {}),
    ("Doc-T (pt, sentence-wise)", "doc-t", {"via": "pt"}),
    ("Shuffle", "shuffle", {}),
    ("Word-D 15%", "word-delete", {"ratio": 0.15}),
    ("Word-S 15%", "word-substitute", {"ratio": 0.15}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paragraphs", type=int, default=20)
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--lm", action="store_true", help="add the SmolLM2 rewrite (slow)")
    args = ap.parse_args()

    paragraphs = [
        d.text
        for d in human_windows(
            load_dataset("cnn_dailymail"), sentences=args.sentences, count=args.paragraphs
        )
    ]
    encoder = load_embedder("all-minilm-l6-v2")
    attacks = ATTACKS + (
        [("LM rewrite (SmolLM2)", "doc-p", {"prompt": "I", "max_tokens": 640})] if args.lm else []
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; {len(paragraphs)} paragraphs x "
        f"{args.sentences} sentences"
    )
    print(
        f"{'attack':<28}{'s/para':>8}{'sent.':>7}{'aligned':>9}{'p10':>7}{'prec.':>7}"
        f"{'4g copy':>9}{'overlap':>9}  meaning-preserving"
    )
    for label, name, params in attacks:
        attack = create_attack(name, **params)
        attack.apply_batch(paragraphs[:1], seeds=[99])  # warm-up: models load once
        start = time.perf_counter()
        out = attack.apply_batch(paragraphs, seeds=range(len(paragraphs)))
        seconds = (time.perf_counter() - start) / len(paragraphs)
        fid = measure(encoder, paragraphs, out)
        aligned = np.array([f.aligned_similarity for f in fid])
        verdict = "yes" if np.median(aligned) >= MEANING_PRESERVING else "NO"
        print(
            f"{label:<28}{seconds:>8.2f}{np.mean([f.sentence_ratio for f in fid]):>7.2f}"
            f"{np.median(aligned):>9.3f}{np.percentile(aligned, 10):>7.3f}"
            f"{np.median([f.aligned_precision for f in fid]):>7.3f}"
            f"{np.mean([f.ngram4_copy for f in fid]):>9.2f}"
            f"{np.mean([f.word_overlap for f in fid]):>9.2f}  {verdict}"
        )


if __name__ == "__main__":
    main()
