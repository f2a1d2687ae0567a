"""Would a dynamically quantised embedder (int8 Linear layers, torch's own
``quantize_dynamic``; no new dependency) make detection faster without moving its
p-values? Issue 55 allows a faster backend only where the goldens' p-values stay equal
within rounding, or under a versioned detector. This prints the speed of the default
embedder (all-mpnet-base-v2) in fp32 and int8 on the same CNN/DailyMail sentences, one
torch thread, and how far the int8 embeddings sit from the fp32 ones (cosine).

    OMP_NUM_THREADS=1 python -m benchmarks.studies.embedder_int8 --sentences 200
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=200)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from samark.datasets import human_windows, load_dataset
    from samark.embed import load_embedder
    from samark.segment import split_sentences

    embedder = load_embedder("all-mpnet-base-v2")
    windows = human_windows(load_dataset("cnn_dailymail")[100:], sentences=6, count=60)
    sentences = [s for w in windows for s in split_sentences(w.text)][: args.sentences]
    model = embedder._model  # the library's own SentenceTransformer (a study reads inside)
    quantised = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)

    def timed(m: object) -> tuple[np.ndarray, float]:
        start = time.perf_counter()
        out = m.encode(  # type: ignore[attr-defined]
            sentences, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
        )
        return out, len(sentences) / (time.perf_counter() - start)

    full, full_rate = timed(model)
    small, small_rate = timed(quantised)
    cos = (full * small).sum(axis=1)
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, 1 thread, "
        f"load average {os.getloadavg()[0]:.2f}; {len(sentences)} sentences"
    )
    print(f"fp32: {full_rate:.1f} sentences/s; int8 (dynamic): {small_rate:.1f} sentences/s")
    print(
        f"cosine(int8, fp32) per sentence: mean {cos.mean():.4f}, p10 "
        f"{np.quantile(cos, 0.1):.4f}, min {cos.min():.4f}"
    )


if __name__ == "__main__":
    main()
