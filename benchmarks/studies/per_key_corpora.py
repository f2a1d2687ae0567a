"""The human corpora of the per-key false-positive benchmark (benchmarks/studies/per_key_fpr.py),
with cached sentence embeddings.

Each test text is the first 10 sentences of a document (at least 3). Corpora are marked
by whether anything samark ships was fitted on their genre: the public centring
reference (SAMark's ``topic_centring.REFERENCE_SOURCES``) holds other documents of
Wikipedia, Austen and the Python documentation, and the keys' avoided directions are the news,
encyclopedic and fiction means; CNN/DailyMail's sentences 11-25 built the news mean, so
news is "fitted" for the avoided directions only. The Debian handbook, fortunes,
licenses and Reuters articles are fitted by nothing: the unseen domains.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.human_texts import embed_sentence_lists
from samark.datasets import leading_sentences, load_dataset
from samark.embed import Embedder

#: name -> (dataset, how many texts, skip the first N documents, role)
TEST_CORPORA: dict[str, tuple[str, int, int, str]] = {
    "cnn_dailymail": ("cnn_dailymail", 200, 0, "avoided mean"),
    "wikipedia_leads": ("wikipedia_leads", 300, 0, "fitted genre"),
    "jane_austen": ("jane_austen", 200, 0, "fitted genre"),
    "python_docs": ("python_docs", 300, 0, "fitted genre"),
    "debian_handbook": ("debian_handbook", 300, 0, "unseen"),
    "fortunes": ("fortunes", 400, 0, "unseen"),
    "licenses": ("licenses", 1000, 0, "unseen"),
    "reuters": ("reuters", 1000, 0, "unseen"),
}

CACHE = Path.home() / ".cache" / "samark" / "research" / "per-key"


def test_texts(name: str) -> list[list[str]]:
    """The test texts of one corpus: lists of sentences. python_docs keeps the sections
    the centring reference leaves out (odd ones)."""
    dataset, limit, skip, _ = TEST_CORPORA[name]
    docs = load_dataset(dataset)[skip:]
    if name == "python_docs":
        docs = docs[1::2]
    return leading_sentences((d.text for d in docs), limit=limit, stop=10)


def embed_cached(embedder: Embedder, name: str, texts: list[list[str]]) -> list[np.ndarray]:
    """Each text's unit sentence embeddings, from ``CACHE/<embedder>/<name>.npz`` when it
    was built from the same sentences."""
    stored = _stored(embedder, name, texts)
    if stored is not None:
        bounds = np.cumsum([0, *map(len, texts)])
        return [stored[bounds[i] : bounds[i + 1]] for i in range(len(texts))]
    return embed_sentence_lists(embedder, texts, CACHE / embedder.name / f"{name}.npz")


def _stored(embedder: Embedder, name: str, texts: list[list[str]]) -> np.ndarray | None:
    """The calibration tests' stored embeddings of this corpus, where they match."""
    from scripts.build_test_embeddings import CORPORA, stored_embeddings

    if name not in CORPORA:
        return None
    return stored_embeddings(embedder.identity.fingerprint, name, texts)
