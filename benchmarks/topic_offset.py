"""The shared topic offset: why a longer human text does not look less watermarked.

A text's sentences share a topic, so their mean embedding m does not shrink towards zero as
the text grows. Its projection on a random unit pivot has spread ||m|| / sqrt(d), and that
is the noise SAMark's per-channel evidence must beat. For human windows of n sentences this
prints the mean ||m||^2 (what independent sentences would give: 1/n), the implied spread of
a channel's mean cosine, and the part that averages away with n (the sentences' deviations
from m).

    python benchmarks/topic_offset.py --windows 200 --lengths 3 6 12 24
    python benchmarks/topic_offset.py --lengths 12 --subspace 32 64 128

``--subspace K``: would pivots drawn in a K-dimensional subspace where documents' means
vary little, but sentences within a document vary a lot, face less topic noise? The
subspace (top-K generalised eigenvectors of within-document vs. between-document second
moments) is fitted on half the documents and evaluated on the other half; it prints, for
random unit directions in it and in the whole space, the spread of a text's mean along
the direction (the noise) and of its sentences around their mean (what a generator can
choose from).
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
    ap.add_argument("--subspace", type=int, nargs="*", default=[])
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
        if args.subspace:
            texts = [np.array([cache[s] for s in split_sentences(w.text)]) for w in windows]
            subspace_report(texts, args.subspace)


def _moments(texts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    means = np.array([e.mean(axis=0) for e in texts])
    devs = np.concatenate([e - e.mean(axis=0) for e in texts])
    return means.T @ means / len(means), devs.T @ devs / len(devs)


def _spreads(texts: list[np.ndarray], basis: np.ndarray, draws: int = 2000) -> tuple[float, float]:
    """RMS of <m, v> and of <e - m, v> over texts, for random unit v in span(basis)."""
    rng = np.random.default_rng(0)
    v = rng.standard_normal((draws, basis.shape[1])) @ basis.T
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    between, within = _moments(texts)
    b = np.einsum("kd,de,ke->k", v, between, v)
    w = np.einsum("kd,de,ke->k", v, within, v)
    return float(np.sqrt(b.mean())), float(np.sqrt(w.mean()))


def subspace_report(texts: list[np.ndarray], sizes: list[int]) -> None:
    from scipy.linalg import eigh

    fit, held = texts[::2], texts[1::2]
    between, within = _moments(fit)
    dim = between.shape[0]
    # within v = lambda between v: large lambda = sentences vary, documents' means do not
    _, vecs = eigh(within, between + 1e-6 * np.eye(dim))
    vecs = np.linalg.qr(vecs[:, ::-1])[0]
    rows = [("whole space", np.eye(dim))] + [(f"top {k}", vecs[:, :k]) for k in sizes]
    print(f"      {'pivots drawn in':<14}{'noise <m,v>':>13}{'choice <e-m,v>':>16}{'ratio':>7}")
    for name, basis in rows:
        noise, choice = _spreads(held, basis)
        print(f"      {name:<14}{noise:>13.4f}{choice:>16.4f}{choice / noise:>7.2f}")


if __name__ == "__main__":
    main()
