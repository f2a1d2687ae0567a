"""The human texts the benchmarks score, with their sentence embeddings: the calibration
tests' stored ones, or a cache beside a run's negatives (embedding 1,000 negatives of 12
sentences takes most of an hour on a 2-core CPU)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from samark.datasets import Document
from samark.embed import Embedder
from samark.segment import split_sentences


def stored_test_corpora(embedder: Embedder) -> tuple[list[Document], list[list[str]], np.ndarray]:
    """The calibration tests' four corpora, their sentences and stored embeddings."""
    from scripts.build_test_embeddings import CORPORA, corpus_texts, stored_embeddings

    docs: list[Document] = []
    sentences: list[list[str]] = []
    parts = []
    for name, limit in CORPORA.items():
        texts = corpus_texts(name, limit)
        stored = stored_embeddings(embedder.identity.fingerprint, name, texts)
        if stored is None:
            raise SystemExit(f"{name}: rebuild with scripts/build_test_embeddings.py")
        docs += [Document(f"{name}:{i}", " ".join(t)) for i, t in enumerate(texts)]
        sentences += texts
        parts.append(stored)
    return docs, sentences, np.concatenate(parts)


def corpus_of(doc_id: str) -> str:
    head = doc_id.split(":", 1)[0]
    return "continuation" if doc_id.endswith(":continuation") else head


def embed_texts(
    embedder: Embedder, texts: list[str], cache: Path | None
) -> list[tuple[list[str], np.ndarray]]:
    """Each text's sentences and their embeddings, from ``cache`` (an .npz keyed by the
    sentences' SHA-256) where it matches."""
    sentences = [split_sentences(t) for t in texts]
    return list(zip(sentences, embed_sentence_lists(embedder, sentences, cache), strict=True))


def embed_sentence_lists(
    embedder: Embedder, sentences: list[list[str]], cache: Path | None
) -> list[np.ndarray]:
    """Each list's unit sentence embeddings, from ``cache`` (an .npz keyed by the
    sentences' SHA-256) where it matches; embedded in one call and cached otherwise."""
    flat = [s for ss in sentences for s in ss]
    digest = hashlib.sha256("\n".join(flat).encode()).hexdigest()
    vectors = None
    if cache is not None and cache.exists():
        with np.load(cache) as data:
            if str(data["digest"]) == digest:
                vectors = data["vectors"].astype(np.float64)
    if vectors is None:
        t0 = time.perf_counter()
        vectors = embedder.encode(flat)
        print(f"embedded {len(flat)} sentences ({time.perf_counter() - t0:.0f} s)", flush=True)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(cache, digest=np.array(digest), vectors=vectors.astype(np.float32))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bounds = np.cumsum([0, *map(len, sentences)])
    return [vectors[bounds[i] : bounds[i + 1]] for i in range(len(sentences))]
