"""Batch detection against its floor, raw sentence embedding, on the same texts.

Detects with the scheme a new key is made for (samark-layered, 64 keyed cells, the
commands' scan statistic) under ``--null-draws`` (a new key's "projected", or "full" as keys
written before 2026-11-28 are detected), or with ``--scheme samark`` the paper's static
pivots. Prints texts/s and sentences/s for: the raw embedding of every sentence (one encode call),
``detect`` one text at a time, ``detect_many`` in chunks (what ``samark detect FILE``
does), the CLI end to end on a JSONL file, and ``samark detect --ray W`` (a local Ray
instance with W workers), with each as a ratio of the raw embedding.

    python benchmarks/detect_throughput.py --texts 200 --threads 1 --ray 2
    python benchmarks/detect_throughput.py --texts 100 --null-draws full   # before 2026-11-28
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--chunk", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--ray", type=int, default=0, help="Ray workers (0: skip)")
    ap.add_argument("--scheme", default="samark-layered")
    ap.add_argument("--null-draws", choices=["full", "projected"], default="projected")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from samark.datasets import human_windows, load_dataset
    from samark.embed import load_embedder, new_key
    from samark.models import DEFAULT_EMBEDDER
    from samark.schemes import create_scheme
    from samark.segment import split_sentences

    docs = load_dataset("cnn_dailymail")
    texts = [d.text for d in human_windows(docs, sentences=args.sentences, count=args.texts)]
    n_sent = sum(len(split_sentences(t)) for t in texts)
    embedder = load_embedder(DEFAULT_EMBEDDER)
    key = new_key(embedder, null_draws=args.null_draws, scheme=args.scheme)
    detector = create_scheme(key=key, embedder=embedder, statistic="scan")
    detector.detect(texts[0])  # warm: null pivots, model
    print(
        f"{len(texts)} CNN texts, {n_sent} sentences, {args.scheme} ({key.samark.cells} cells, "
        f"{args.null_draws} null draws), {DEFAULT_EMBEDDER}, {args.threads} torch thread(s), "
        f"{os.cpu_count()} CPUs"
    )

    def row(label: str, seconds: float, base: float | None = None) -> None:
        ratio = f", {base / seconds:.2f}x of raw embedding" if base else ""
        print(
            f"{label:<34} {len(texts) / seconds:7.2f} texts/s {n_sent / seconds:8.1f} "
            f"sentences/s{ratio}"
        )

    start = time.perf_counter()
    embedder.encode([s for t in texts for s in split_sentences(t)])
    raw = time.perf_counter() - start
    row("raw embedding (one encode call)", raw)

    start = time.perf_counter()
    for t in texts:
        detector.detect(t)
    row("detect, one text at a time", time.perf_counter() - start, raw)

    start = time.perf_counter()
    for i in range(0, len(texts), args.chunk):
        detector.detect_many(texts[i : i + args.chunk])
    row(f"detect_many, chunks of {args.chunk}", time.perf_counter() - start, raw)

    with tempfile.TemporaryDirectory() as tmp:
        key_file = key.save(Path(tmp) / "bench.key")
        data = Path(tmp) / "texts.jsonl"
        data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        cli = [sys.executable, "-m", "samark", "detect", str(data), "--key", str(key_file)]
        start = time.perf_counter()
        subprocess.run(
            [*cli, "--chunk", str(args.chunk)], env=env, stdout=subprocess.DEVNULL, check=False
        )
        cli_s = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        row("samark detect FILE (with startup)", cli_s, raw)
        print(f"{'':<34} peak memory of the CLI process: {peak:.0f} MB")
        if args.ray:
            start = time.perf_counter()
            out = Path(tmp) / "out"
            subprocess.run(
                [*cli, "--ray", str(args.ray), "--out", str(out)],
                env=env,
                stdout=subprocess.DEVNULL,
                check=False,
            )
            row(f"samark detect --ray {args.ray} (with startup)", time.perf_counter() - start, raw)


if __name__ == "__main__":
    main()
