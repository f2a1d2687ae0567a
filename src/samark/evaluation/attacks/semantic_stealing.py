"""Semantic stealing: estimate a sentence mark's pivot geometry from marked texts, then
assemble human sentences that fall in one orthant of it.

SAMark's texts lean, sentence after sentence, toward one orthant of the key's pivots (the
text's flags, drawn per text). Averaged over a text, that lean moves its mean embedding off
the human mean along the pivot plane, in a direction that changes from text to text, so the
marked texts' means scatter more than human texts' do inside that plane. The forger takes
the top eigenvector ``d`` of the difference of the two scatter matrices (marked texts' means
about the human mean, minus human texts' own), which points into the plane, and builds each
forgery from the public human sentences that project farthest along ``+d`` or ``-d`` (the
side drawn per text: either is one orthant, as the detector infers a text's flags by
majority vote). It is the estimator of ``benchmarks/studies/flag_payload_leak.py`` ("random flags"),
made an attack. With ``estimator="orthant"`` it aims instead at an orthant's centre in
the plane of the two largest excess directions (:func:`stolen_orthant`), where both of two
channels' pivots agree.

The forger holds only public things: the operator's embedder (a public model: Kerckhoffs),
``n`` marked texts, and a pool of public human text. Its reference scatter is the pool's
human texts unless it gives ``unmarked`` texts of its own (written with the public
generator on prompts like the marked texts'): then the difference of the two scatters is
the mark's alone, not also the difference between human and generated text (the stronger
attacker, as ``token-stealing``'s unmarked base). A forgery attack (``kind =
"forgery"``): the input text only sets the forgery's length (as many sentences), and a
detection of the result is the attacker's success.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence

import numpy as np

from samark.errors import SamarkError
from samark.evaluation.attacks.base import PerTextAttack, register_attack
from samark.evaluation.attacks.token_stealing import read_texts
from samark.segment import split_sentences


def stolen_direction(
    marked_means: np.ndarray, human_means: np.ndarray, human_mean: np.ndarray | None = None
) -> np.ndarray:
    """The unit direction along which ``marked_means`` (one row per marked text) scatter
    most in excess of ``human_means`` (one row per human text), about the human mean."""
    centre = human_means.mean(axis=0) if human_mean is None else human_mean
    dev = marked_means - centre
    human_scatter = np.cov(human_means.T)
    excess = dev.T @ dev / len(dev) - human_scatter
    direction = np.linalg.eigh(excess)[1][:, -1]
    return direction / np.linalg.norm(direction)


def stolen_orthant(
    marked_means: np.ndarray, human_means: np.ndarray, human_mean: np.ndarray | None = None
) -> np.ndarray:
    """A unit direction toward one orthant of two channels' pivots: in the plane of the two
    directions of largest excess scatter, the marked texts' means sit near four directions
    a quarter turn apart (the orthants' centres, ``+-p1 +- p2``); quadrupling each text's
    angle folds the four into one, whose circular mean, divided by four, is one of them."""
    centre = human_means.mean(axis=0) if human_mean is None else human_mean
    dev = marked_means - centre
    excess = dev.T @ dev / len(dev) - np.cov(human_means.T)
    plane = np.linalg.eigh(excess)[1][:, -2:]  # (dim, 2)
    xy = dev @ plane
    angles = np.arctan2(xy[:, 1], xy[:, 0])
    weights = np.linalg.norm(xy, axis=1)
    theta = np.angle(np.sum(weights * np.exp(4j * angles))) / 4
    direction = plane @ np.array([np.cos(theta), np.sin(theta)])
    return direction / np.linalg.norm(direction)


@register_attack("semantic-stealing")
class SemanticStealing(PerTextAttack):
    """From ``marked`` texts (a list or a JSONL file's ``text`` field; the first ``n``),
    estimate the pivot plane's direction of largest excess scatter, then write each forgery
    from the public pool's sentences farthest along it: drawn at random among the
    ``spread`` x (sentences asked) farthest on the side drawn for the text."""

    name = "semantic-stealing"
    summary = "forgery: estimate a sentence mark's orthant from n marked texts, fill it"
    kind = "forgery"

    def __init__(
        self,
        marked: str | Sequence[str] = (),
        *,
        n: int | None = None,
        embedder: str = "all-mpnet-base-v2",
        pool: Sequence[str] = ("cnn_dailymail", "wikipedia_leads"),
        pool_texts: int = 300,
        window: int = 12,
        spread: int = 2,
        estimator: str = "scatter",
        pool_sentences: Sequence[Sequence[str]] | None = None,
        pool_vectors: np.ndarray | None = None,
        unmarked: str | Sequence[str] = (),
        marked_vectors: Sequence[np.ndarray] | None = None,
        unmarked_vectors: Sequence[np.ndarray] | None = None,
    ) -> None:
        # the marked texts, or their sentence embeddings where given
        texts = _texts_or_vectors(marked, marked_vectors)
        if n is not None:
            if not 2 <= n <= len(texts):
                raise SamarkError(f"n = {n}: needs 2 to {len(texts)} marked texts")
            texts = texts[:n]
        if len(texts) < 2:
            raise SamarkError("semantic-stealing needs at least 2 marked texts")
        if spread < 1:
            raise SamarkError(f"spread must be >= 1, got {spread}")
        if estimator not in ("scatter", "orthant"):
            raise SamarkError(f"estimator must be 'scatter' or 'orthant', got {estimator!r}")
        self.embedder_name = embedder
        self.n, self.spread = len(texts), spread
        if pool_sentences is None:
            from samark.datasets import human_windows, load_dataset

            windows = [
                split_sentences(d.text)
                for name in pool
                for d in human_windows(load_dataset(name), sentences=window, count=pool_texts)
            ]
            pool_sentences, pool_vectors = windows, None
        self.pool = [s for text in pool_sentences for s in text]
        if pool_vectors is None:
            pool_vectors = self._encode(self.pool)
        if len(pool_vectors) != len(self.pool):
            raise SamarkError("pool_vectors must have one row per pool sentence")
        bounds = np.cumsum([0, *map(len, pool_sentences)])
        human_means = np.stack(
            [pool_vectors[a:b].mean(axis=0) for a, b in itertools.pairwise(bounds) if b > a]
        )
        marked_means = _text_means(self._encode, texts)
        reference_means, centre = human_means, pool_vectors.mean(axis=0)
        own = _texts_or_vectors(unmarked, unmarked_vectors)
        if own:
            if len(own) < 2:
                raise SamarkError("unmarked needs at least 2 texts (a reference scatter)")
            reference_means = _text_means(self._encode, own)
            centre = reference_means.mean(axis=0)
        self.reference = "unmarked" if own else "pool"
        estimate = stolen_direction if estimator == "scatter" else stolen_orthant
        self.direction = estimate(marked_means, reference_means, centre)
        self._order = np.argsort(-(pool_vectors @ self.direction))  # farthest along +d first

    def _encode(self, sentences: Sequence[str]) -> np.ndarray:
        """Unit embeddings by the operator's (public) embedder, loaded on first use: a
        forger given every embedding never loads it."""
        from samark.embed import load_embedder

        return load_embedder(self.embedder_name).encode(list(sentences))

    def forgery_indices(self, sentences: int, rng: random.Random) -> list[int]:
        """The pool sentences (indices) of one forgery of ``sentences`` sentences."""
        return draw_forgery(self._order, sentences, self.spread, rng)

    def apply_one(self, text: str, rng: random.Random, human: str | None) -> str:
        k = max(1, len(split_sentences(text)))
        return " ".join(self.pool[j] for j in self.forgery_indices(k, rng))


def draw_forgery(order: np.ndarray, sentences: int, spread: int, rng: random.Random) -> list[int]:
    """One forgery's pool indices: a side of the direction drawn (``order`` ranks the pool
    farthest along +d first), then ``sentences`` drawn among the ``spread`` x ``sentences``
    farthest on it."""
    ranked = order if rng.random() < 0.5 else order[::-1]
    return [int(j) for j in rng.sample(list(ranked[: spread * sentences]), sentences)]


def _texts_or_vectors(
    texts: str | Sequence[str], vectors: Sequence[np.ndarray] | None
) -> list[str] | list[np.ndarray]:
    """The non-empty texts, or the given sentence-embedding arrays (one a text) instead."""
    if vectors is not None:
        return list(vectors)
    return [t for t in read_texts(texts) if t.strip()]


def _text_means(
    encode: Callable[[Sequence[str]], np.ndarray], items: Sequence[str] | Sequence[np.ndarray]
) -> np.ndarray:
    """Each text's mean sentence embedding: a text is embedded, an array of its sentence
    embeddings used as given."""
    vectors = [encode(split_sentences(x)) if isinstance(x, str) else x for x in items]
    means = [np.asarray(v).mean(axis=0) for v in vectors if len(v)]
    if len(means) < 2:
        raise SamarkError("needs at least 2 texts with a sentence")
    return np.stack(means)
