"""The shared topic offset: why a longer human text does not look less watermarked.

A text's sentences share a topic, so their mean embedding m does not shrink towards zero as
the text grows. Its projection on a random unit pivot has spread ||m|| / sqrt(d), and that
is the noise SAMark's per-channel evidence must beat. For human windows of n sentences this
prints the mean ||m||^2 (what independent sentences would give: 1/n), the implied spread of
a channel's mean cosine, and the part that averages away with n (the sentences' deviations
from m).

    python benchmarks/topic_offset.py --windows 200 --lengths 3 6 12 24
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np

from samark.datasets import human_windows, load_dataset
from samark.embed import load_embedder
from samark.segment import split_sentences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", default="all-mpnet-base-v2")
    ap.add_argument("--windows", type=int, default=200, help="human windows per length")
    ap.add_argument("--lengths", type=int, nargs="+", default=[3, 6, 12, 24])
    ap.add_argument("--dataset", default="cnn_dailymail")
    args = ap.parse_args()

    embedder = load_embedder(args.embedder)
    docs = load_dataset(args.dataset)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs; {args.embedder} "
        f"(d = {embedder.dim}); {args.dataset}"
    )
    print(
        f"{'n':>4}{'windows':>9}{'mean ||m||^2':>14}{'1/n':>8}{'sd of <m,v>':>13}{'dev. part':>11}"
    )
    cache: dict[str, np.ndarray] = {}
    for n in args.lengths:
        windows = human_windows(docs, sentences=n, count=args.windows)
        norms, devs = [], []
        for w in windows:
            sents = split_sentences(w.text)
            todo = [s for s in sents if s not in cache]
            if todo:
                cache.update(zip(todo, embedder.encode(todo), strict=True))
            e = np.array([cache[s] for s in sents])
            m = e.mean(axis=0)
            norms.append(float(m @ m))
            # the part of ||m||^2 that independent deviations would contribute
            devs.append(float(((e - m) ** 2).sum(axis=1).mean()) / len(e))
        mean_sq = float(np.mean(norms))
        print(
            f"{n:>4}{len(windows):>9}{mean_sq:>14.3f}{1 / n:>8.3f}"
            f"{np.sqrt(mean_sq / embedder.dim):>13.4f}{np.mean(devs):>11.3f}"
        )


if __name__ == "__main__":
    main()
