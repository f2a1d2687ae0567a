"""`samark demo` over many seeds (issue 44): does the demo detect its own text, and by which
layer, with static pivots and with keyed semantic cells?

For each seed and each ``--cells`` value this runs what ``samark demo --seed S --cells M``
runs (the demo's key derived from the seed, its prompt and human text, samark-layered with
N = 32 and 6 sentences, Doc-P (local) for the paraphrased copy) and writes one JSON line:
the layered p-value and both layers' p-values of the demo's own text, its paraphrased and
shuffled copies and the human text, the generation's seconds and fallbacks. Resumes.

    python benchmarks/studies/demo_seeds.py --seeds 1-20 --cells 0 16 \\
        -o experiments/runs/demo-seeds/seeds.jsonl
    python benchmarks/studies/demo_seeds.py --table experiments/runs/demo-seeds/seeds.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

#: the records' names for the demo's labels (the others are the same)
RECORD_FIELDS = {"watermarked": "own", "sentences shuffled": "shuffled"}


def run(args: argparse.Namespace) -> None:
    import torch

    from samark.cli.demo import (
        DEMO_CANDIDATES,
        DEMO_SENTENCES,
        demo_data,
        demo_key,
        demo_texts,
    )
    from samark.embed import load_embedder
    from samark.models import DEFAULT_EMBEDDER
    from samark.schemes import create_scheme

    torch.set_num_threads(args.threads)
    data = demo_data()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {(r["seed"], r["cells"]) for r in map(json.loads, out.open())}
    embedder = load_embedder(DEFAULT_EMBEDDER)
    engine = None
    lo, hi = (int(x) for x in args.seeds.split("-"))
    for seed in range(lo, hi + 1):
        for cells in args.cells:
            if (seed, cells) in done:
                continue
            scheme: Any = create_scheme(
                "samark-layered",
                key=demo_key(embedder, seed),
                embedder=embedder,
                candidates=DEMO_CANDIDATES,
                cells=cells,
                **({} if engine is None else {"engine": engine}),
            )
            engine = scheme.engine
            start = time.perf_counter()
            gen = scheme.generate(data["prompt"], max_new_sentences=DEMO_SENTENCES, seed=seed)
            seconds = time.perf_counter() - start
            texts = demo_texts(gen.text, gen.sentences, seed, data["human"])
            row: dict[str, Any] = {
                "seed": seed,
                "cells": cells,
                "seconds": round(seconds, 1),
                "fallbacks": gen.fallbacks,
            }
            for label, text in texts:
                d = scheme.detect(text)
                row[RECORD_FIELDS.get(label, label)] = {
                    "p": d.p_value,
                    "p_semantic": d.details["p_semantic"],
                    "p_token": d.details["p_token"],
                }
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(
                f"seed {seed} cells {cells}: own p {row['own']['p']:.2g} "
                f"(semantic {row['own']['p_semantic']:.2g}), human semantic "
                f"{row['human']['p_semantic']:.2g}, {seconds:.0f} s",
                flush=True,
            )


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.open()]
    print(
        "| cells | seeds | own p < 0.01 | own semantic p < 0.01 | paraphrased p < 0.01 | "
        "paraphrased semantic | shuffled semantic | human above 0.01 (semantic) | "
        "generation s (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for cells in sorted({r["cells"] for r in rows}):
        sel = [r for r in rows if r["cells"] == cells]

        def share(label: str, key: str, below: bool = True, sel: list = sel) -> str:
            vals = [r[label][key] for r in sel if label in r]
            hits = sum((v < 0.01) == below for v in vals)
            return f"{hits}/{len(vals)}"

        print(
            f"| {cells} | {len(sel)} | {share('own', 'p')} | {share('own', 'p_semantic')} | "
            f"{share('paraphrased', 'p')} | {share('paraphrased', 'p_semantic')} | "
            f"{share('shuffled', 'p_semantic')} | {share('human', 'p_semantic', below=False)} | "
            f"{np.median([r['seconds'] for r in sel]):.0f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output")
    parser.add_argument("--seeds", default="1-20")
    parser.add_argument("--cells", type=int, nargs="+", default=[0, 16])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table")
    args = parser.parse_args()
    if args.table:
        table(Path(args.table))
    else:
        run(args)


if __name__ == "__main__":
    main()
