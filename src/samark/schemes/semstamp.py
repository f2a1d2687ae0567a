"""SemStamp (Hou et al. 2024) and k-SemStamp (Hou et al. 2024b): sentence-level
watermarks by rejection sampling in a partition of the embedding space.

The space is cut into regions: by ``dims`` key-derived random hyperplanes (SemStamp's LSH,
2**dims regions) or by k-means centroids fitted on human text (k-SemStamp). The region of
the previous sentence (of the prompt, for the first) seeds a key-derived set of valid
regions, a share ``gamma`` of them. Candidate sentences are drawn until one falls in a
valid region with a margin (its cosine to every hyperplane, or its lead of nearest over
second-nearest centroid, above ``margin``), at most ``max_trials``; if none does, the last
candidate is taken. Both ride on the sentence loop SAMark uses.

Detection counts the sentences (after the first) whose region is valid for the region
before them. The p-value is exact over keys: given the text's regions, the valid set of
each previous region is a uniformly random ``gamma``-share subset, independent across
previous regions, so the count's null distribution is a convolution of subset-sum
distributions (no binomial approximation: the same (previous, current) pair can repeat
in a text and counts the same way each time).

Where we depart from the papers, for want of downloads: both use our embedder (the
experiment's, all-mpnet-base-v2 by default), not SemStamp's contrastively fine-tuned
SBERT; k-SemStamp's centroids are fitted here, on CNN/DailyMail sentences, and cached.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

import numpy as np

from samark.detection_result import Detection
from samark.embed import Embedder
from samark.errors import EmptyTextError
from samark.keys import WatermarkKey, keyed_rng
from samark.models import DEFAULT_GENERATOR, cache_dir
from samark.sampling.base import Engine
from samark.schemes.base import SharedResources, check, register_scheme, require_key
from samark.schemes.sentence_loop import (
    Draw,
    Pick,
    SentenceLevelWatermark,
    SentenceSamplingConfig,
    split_sentence_params,
)
from samark.segment import split_sentences

PartitionKind = Literal["lsh", "kmeans"]


class LSHPartition:
    """``dims`` key-derived hyperplanes through the origin: 2**dims regions; the margin is
    the smallest |cosine| to a hyperplane normal."""

    def __init__(self, seed: int, dim: int, dims: int) -> None:
        normals = np.random.default_rng(seed).standard_normal((dims, dim))
        self.normals = normals / np.linalg.norm(normals, axis=1, keepdims=True)
        self.regions = 2**dims

    def assign(self, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cos = emb @ self.normals.T
        bits = (cos > 0).astype(np.int64)
        return bits @ (1 << np.arange(bits.shape[1])), np.abs(cos).min(axis=1)


class CentroidPartition:
    """k-means centroids: the region is the nearest centroid (cosine); the margin is its
    lead over the second nearest."""

    def __init__(self, centroids: np.ndarray) -> None:
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self.regions = len(centroids)

    def assign(self, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cos = emb @ self.centroids.T
        top2 = np.sort(cos, axis=1)[:, -2:]
        return cos.argmax(axis=1), top2[:, 1] - top2[:, 0]


def fit_centroids(
    embedder: Embedder, clusters: int, *, sentences: int = 4000, dataset: str = "cnn_dailymail"
) -> np.ndarray:
    """k-SemStamp's centroids: k-means (scikit-learn, fixed seed) on the unit embeddings of
    the first ``sentences`` sentences of ``dataset``, cached per embedder. Public, not
    derived from any key: the key decides which regions are valid."""
    from sklearn.cluster import KMeans

    from samark.datasets import load_dataset

    tag = f"{embedder.name}-{embedder.identity.fingerprint[:12]}-{dataset}-{sentences}-k{clusters}"
    path = cache_dir() / "ksemstamp" / f"{tag}.npy"
    if path.exists():
        return np.load(path)
    pool: list[str] = []
    for doc in load_dataset(dataset):
        pool.extend(split_sentences(doc.text))
        if len(pool) >= sentences:
            break
    if len(pool) < clusters:
        raise ValueError(f"{dataset} has {len(pool)} sentences, fewer than {clusters} clusters")
    emb = embedder.encode(pool[:sentences])
    km = KMeans(n_clusters=clusters, n_init=4, random_state=0).fit(emb)
    centroids = np.asarray(km.cluster_centers_, dtype=np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, centroids)
    return centroids


def subset_sum_distribution(weights: np.ndarray, size: int) -> np.ndarray:
    """P(sum of ``weights`` over a uniformly random ``size``-subset = s), s = 0..sum."""
    total = int(weights.sum())
    ways = np.zeros((size + 1, total + 1))
    ways[0, 0] = 1.0
    for w in weights.astype(int):
        for j in range(size, 0, -1):
            if w:
                ways[j, w:] += ways[j - 1, : total + 1 - w]
            else:
                ways[j] += ways[j - 1]
    return ways[size] / math.comb(len(weights), size)


@dataclass
class _Step:
    previous: int  # the region of the sentence before


@dataclass(frozen=True)
class SemStampConfig(SentenceSamplingConfig):
    """SemStamp's partition (``"lsh"``: ``dims`` random hyperplanes; ``"kmeans"``:
    ``clusters`` centroids fitted on ``fit_sentences`` sentences), its valid share
    ``gamma``, the rejection ``margin`` and the trials per sentence (``max_trials`` in
    batches of ``batch``)."""

    partition: PartitionKind = "lsh"
    dims: int = 3
    clusters: int = 8
    fit_sentences: int = 4000
    gamma: float = 0.25
    margin: float = 0.02
    max_trials: int = 100
    batch: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            self.partition in ("lsh", "kmeans"),
            f"partition must be 'lsh' or 'kmeans', got {self.partition!r}",
        )
        check(
            1 <= self.dims <= 8 and self.clusters >= 2 and 0 < self.gamma < 1 and self.margin >= 0,
            "need 1 <= dims <= 8, clusters >= 2, 0 < gamma < 1, margin >= 0",
        )
        check(self.max_trials >= 1 and self.batch >= 1, "need max_trials >= 1 and batch >= 1")


@register_scheme("semstamp")
class SemStamp(SentenceLevelWatermark["_Step"]):
    """SemStamp (``partition="lsh"``) or k-SemStamp (``partition="kmeans"``)."""

    name = "semstamp"
    config: SemStampConfig
    #: the partition this registered row takes (the other row is the other class)
    partition_kind: ClassVar[PartitionKind] = "lsh"

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Self:
        params = {"partition": cls.partition_kind, **params}
        config, rest = split_sentence_params(SemStampConfig, shared, params)
        if config.partition != cls.partition_kind:
            raise ValueError(
                "semstamp partitions by LSH, k-semstamp by k-means: "
                f"{cls.name} takes partition = {cls.partition_kind!r}"
            )
        return cls(require_key(cls.name, key), config, **rest)

    def __init__(
        self,
        key: WatermarkKey,
        config: SemStampConfig | None = None,
        *,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        c = config if config is not None else SemStampConfig()
        super().__init__(key, c, embedder=embedder, engine=engine, generator=generator)
        partition, dims, clusters = c.partition, c.dims, c.clusters
        fit_sentences, gamma = c.fit_sentences, c.gamma
        self.kind = partition
        plane_seed, self._valid_seed = key.derive_ints(f"{self.name}/{partition}", 2)
        self.partition: LSHPartition | CentroidPartition = (
            LSHPartition(plane_seed, self.embedder.dim, dims)
            if partition == "lsh"
            else CentroidPartition(fit_centroids(self.embedder, clusters, sentences=fit_sentences))
        )
        self.valid_size = max(1, round(gamma * self.partition.regions))
        shape = f"d{dims}" if partition == "lsh" else f"k{clusters}n{fit_sentences}"
        self._id = f"{self.name}/{partition}/{shape}/g{gamma}/{self.embedder.name}"

    def detector_id(self) -> str:
        return self._id

    # ---------- the key's valid regions ----------
    def valid(self, previous: int) -> np.ndarray:
        """The valid regions after a sentence in region ``previous`` (a boolean mask)."""
        order = keyed_rng(self._valid_seed, [previous]).permutation(self.partition.regions)
        mask = np.zeros(self.partition.regions, dtype=bool)
        mask[order[: self.valid_size]] = True
        return mask

    # ---------- the sentence loop's hooks ----------
    def begin(self, prompt: str, seeder: np.random.Generator) -> _Step:
        last = split_sentences(prompt)[-1:] or [prompt]
        region, _ = self.partition.assign(self.embedder.encode(last))
        return _Step(previous=int(region[0]))

    def draws(self, state: _Step) -> list[Draw]:
        c = self.config
        sizes = [c.batch] * (c.max_trials // c.batch)
        if c.max_trials % c.batch:
            sizes.append(c.max_trials % c.batch)
        return [Draw(n, extra=i > 0) for i, n in enumerate(sizes)]

    def pick(self, state: _Step, texts: list[str], pool: np.ndarray) -> Pick | None:
        regions, margins = self.partition.assign(pool)
        ok = self.valid(state.previous)[regions] & (margins > self.config.margin)
        if ok.any():  # the first acceptable draw: rejection sampling, in draw order
            return Pick(int(np.argmax(ok)), "matched", len(texts))
        return Pick(len(texts) - 1, "rejected", len(texts))  # SemStamp keeps the last

    def enough(self, state: _Step, pick: Pick, draw: Draw, drawn: int) -> bool:
        return pick.kind == "matched"

    def chosen(
        self, state: _Step, sentence: str, embedding: np.ndarray, pool: np.ndarray, pick: Pick
    ) -> dict[str, object]:
        region, _ = self.partition.assign(embedding[None, :])
        state.previous = int(region[0])
        return {"kind": pick.kind, "candidates": pick.detail}

    # ---------- detection ----------
    def detect(self, text: str) -> Detection:
        sentences = split_sentences(text)
        if len(sentences) < 2:
            raise EmptyTextError(f"{self.name}: needs two sentences (the first seeds the next)")
        regions, _ = self.partition.assign(self.embedder.encode(sentences))
        return self._score(regions)

    def _score(self, regions: np.ndarray) -> Detection:
        null = np.ones(1)
        green = 0
        previous = regions[:-1]
        for p in np.unique(previous):
            current = regions[1:][previous == p]
            counts = np.bincount(current, minlength=self.partition.regions)
            green += int(counts[self.valid(int(p))].sum())
            null = np.convolve(null, subset_sum_distribution(counts, self.valid_size))
        n = len(regions) - 1
        p_value = float(min(1.0, null[green:].sum()))
        gamma = self.config.gamma
        z = (green - gamma * n) / math.sqrt(n * gamma * (1 - gamma))
        return Detection(
            scheme=self.name,
            p_value=p_value,
            alpha=self.alpha,
            z=z,
            statistic="semstamp_exact",
            score=float(green),
            n_units=n,
            unit="sentence",
            details={"valid_share": green / n},
        )


@register_scheme("k-semstamp")
class KSemStamp(SemStamp):
    name = "k-semstamp"
    partition_kind: ClassVar[PartitionKind] = "kmeans"
