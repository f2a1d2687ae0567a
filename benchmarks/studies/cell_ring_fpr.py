"""Keyrings with keyed cells on human text (issue 44): ``--rings`` rings of ``--keys`` fresh
keys each (drawn as ``samark keygen`` draws them), 16 cells, detect ``--texts`` six-sentence
CNN/DailyMail windows (articles 100+, as ``cells_fpr.py``) with samark's max-statistic and
samark-layered's Holm (``scan``, alpha 1%: ``ring_null_count`` null cell draws); one JSON
line per ring and scheme with every ring p-value.

    python benchmarks/studies/cell_ring_fpr.py --rings 20 --keys 4 --texts 80
    python benchmarks/studies/cell_ring_fpr.py --table experiments/runs/cell-ring-fpr/fpr.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

SCHEMES = ("samark", "samark-layered")


def run(rings: int, keys: int, texts: int, cells: int, out: Path, first: int = 0) -> None:
    import torch

    torch.set_num_threads(1)
    from samark import load_embedder, new_key
    from samark.datasets import human_windows, load_dataset
    from samark.detection.ring_detector import RingDetector
    from samark.keys.keyring import RingEntry
    from samark.schemes.base import SharedResources
    from samark.schemes.samark.detector import embed_sentences

    embedder = load_embedder("all-mpnet-base-v2")
    windows = human_windows(load_dataset("cnn_dailymail")[100:], sentences=6, count=texts)
    batch = [w.text for w in windows]
    shared = SharedResources("smollm2-135m-instruct", embedder)
    out.parent.mkdir(parents=True, exist_ok=True)
    with embedder.remembering(), out.open("a") as f:
        embed_sentences(embedder, batch)  # once for every ring
        for r in range(first, first + rings):
            ring = [
                (RingEntry(f"k{i}", key.key_id, "2026-11-27T00:00:00+00:00"), key)
                for i, key in ((i, new_key(embedder)) for i in range(keys))
            ]
            for scheme in SCHEMES:
                start = time.perf_counter()
                detector = RingDetector.from_keys(
                    ring, scheme, shared=shared, statistic="scan", cells=cells
                )
                found = detector.detect_many(batch)
                ps = [x.p_value for x in found if x is not None]
                row = {"ring": r, "scheme": scheme, "keys": keys, "cells": cells}
                row |= {"method": detector.method, "seconds": round(time.perf_counter() - start, 1)}
                f.write(json.dumps({**row, "p": ps}) + "\n")
                f.flush()


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.open()]
    print(
        "| scheme (ring method) | keys | cells | rings x texts | FPR p < 0.01 | FPR p < 0.05 "
        "| KS p (p >= uniform) | worst ring at 1% |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for scheme in SCHEMES:
        for keys in sorted({r["keys"] for r in rows}):
            sel = [r for r in rows if r["scheme"] == scheme and r["keys"] == keys]
            if not sel:
                continue
            ps = np.array([p for r in sel for p in r["p"]])
            ks = stats.kstest(ps, "uniform", alternative="greater").pvalue
            worst = max(int(np.sum(np.array(r["p"]) < 0.01)) for r in sel)
            print(
                f"| {scheme} ({sel[0]['method']}) | {keys} | {sel[0]['cells']} | {len(sel)} x "
                f"{len(sel[0]['p'])} | {100 * np.mean(ps < 0.01):.2f}% | "
                f"{100 * np.mean(ps < 0.05):.2f}% | {ks:.2f} | {worst} of {len(sel[0]['p'])} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rings", type=int, default=20)
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--texts", type=int, default=80)
    parser.add_argument("--cells", type=int, default=16)
    parser.add_argument("--first-ring", type=int, default=0, help="the first ring's number")
    parser.add_argument("-o", "--output", default="experiments/runs/cell-ring-fpr/fpr.jsonl")
    parser.add_argument("--table")
    args = parser.parse_args()
    if args.table:
        table(Path(args.table))
    else:
        run(args.rings, args.keys, args.texts, args.cells, Path(args.output), args.first_ring)


if __name__ == "__main__":
    main()
