"""Fitting a pivot space (:mod:`samark.keys.pivot_spaces`) to human text.

The shipped spaces are built by ``scripts/build_pivot_spaces.py`` from the reference
corpora below; keys only load them, so this builder lives with SAMark, above the keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fit_pivot_space(documents: Sequence[np.ndarray], rank: int) -> np.ndarray:
    """The ``rank`` directions (rows, orthonormal) where sentences vary most relative to
    documents' means: top generalised eigenvectors of the within-document against the
    between-document second moment. ``documents``: one (sentences, dim) array of unit
    sentence embeddings per document, each with at least two sentences."""
    from scipy.linalg import eigh

    docs = [np.asarray(d, dtype=np.float64) for d in documents if len(d) >= 2]
    if not docs:
        raise ValueError("need documents of at least two sentences")
    dim = docs[0].shape[1]
    if not 1 <= rank <= dim:
        raise ValueError(f"rank must be in [1, {dim}], got {rank}")
    means = np.array([d.mean(axis=0) for d in docs])
    devs = np.concatenate([d - d.mean(axis=0) for d in docs])
    between = means.T @ means / len(means)
    within = devs.T @ devs / len(devs)
    _, vecs = eigh(within, between + 1e-6 * np.trace(between) / dim * np.eye(dim))
    top = vecs[:, ::-1][:, :rank]
    q, r = np.linalg.qr(top)
    q = q * np.where(np.diagonal(r) < 0, -1.0, 1.0)
    return np.ascontiguousarray(q.T)


def reference_corpora() -> dict[str, list[list[str]]]:
    """The human prose the shipped spaces are fitted on, per domain, as documents of
    sentences; none of it is text the calibration tests score (they take each article's
    and chapter's first 10 sentences and Wikipedia leads before 5000):

    - news: CNN/DailyMail sentences 11 onwards, in windows of 12 (the last from 6);
    - encyclopedic: Wikipedia leads 5000-5999 of at least 3 sentences;
    - fiction: Jane Austen's chapters, sentences 13-36, in windows of 12.
    """
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    def windows(name: str, start: int, stop: int | None, least: int) -> list[list[str]]:
        out: list[list[str]] = []
        for doc in load_dataset(name):
            sents = split_sentences(doc.text)[start:stop]
            out.extend(
                sents[i : i + 12]
                for i in range(0, len(sents), 12)
                if len(sents[i : i + 12]) >= least
            )
        return out

    leads = [split_sentences(d.text) for d in load_dataset("wikipedia_leads")[5000:6000]]
    return {
        "news": windows("cnn_dailymail", 10, None, 6),
        "encyclopedic": [s for s in leads if len(s) >= 3],
        "fiction": windows("jane_austen", 12, 36, 12),
    }


def fit_balanced(domains: Sequence[Sequence[np.ndarray]], rank: int) -> np.ndarray:
    """:func:`fit_pivot_space` with each domain weighing equally (its documents repeated
    up to the largest domain's count)."""
    most = max(len(d) for d in domains)
    return fit_pivot_space(
        [doc for d in domains for doc in (list(d) * (most // len(d) + 1))[:most]], rank
    )
