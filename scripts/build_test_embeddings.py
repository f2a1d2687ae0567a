"""Build tests/data/calibration_embeddings.npz: the all-mpnet-base-v2 embeddings of the
human corpora tests/test_calibration.py scores (the first 10 sentences of 200 CNN/DailyMail
articles, 300 Wikipedia leads, 200 Jane Austen chapters and 300 Debian handbook sections).

Embedding them takes about 11 CPU minutes, two thirds of the calibration tests' time. The
file is a cache, nothing more: each corpus is stored with the SHA-256 of its sentences and
the embedder's fingerprint, and the tests embed a corpus afresh wherever either differs
(a new package version of a corpus, other weights), and check a sample of stored vectors
against fresh ones. float16: 12 MB; the cosines move by about 1e-4.

    python scripts/build_test_embeddings.py
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from samark.datasets import leading_sentences, load_dataset
from samark.embed import load_embedder

CORPORA = {"cnn_dailymail": 200, "wikipedia_leads": 300, "jane_austen": 200, "debian_handbook": 300}
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration_embeddings.npz"


def corpus_texts(name: str, limit: int) -> list[list[str]]:
    return leading_sentences((d.text for d in load_dataset(name)), limit=limit, stop=10)


def digest(texts: list[list[str]]) -> str:
    return hashlib.sha256("\n\n".join("\n".join(t) for t in texts).encode()).hexdigest()


def stored_embeddings(fingerprint: str, name: str, texts: list[list[str]]) -> np.ndarray | None:
    """The stored embeddings of corpus ``name`` (float64, renormalised), or None where the
    file is missing or was built from other sentences or another embedder: the one reader
    of the file (the calibration tests and benchmarks/layered_calibration.py use it)."""
    if not OUT.exists():
        return None
    with np.load(OUT) as data:
        meta = json.loads(data["meta"].tobytes())
        entry = meta["corpora"].get(name)
        if meta["fingerprint"] != fingerprint or entry is None or entry["sha256"] != digest(texts):
            return None
        flat = data[f"{name}/embeddings"].astype(np.float64)
    return flat / np.linalg.norm(flat, axis=1, keepdims=True)


def main() -> None:
    mpnet = load_embedder("all-mpnet-base-v2")
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, object] = {"fingerprint": mpnet.identity.fingerprint, "corpora": {}}
    for name, limit in CORPORA.items():
        texts = corpus_texts(name, limit)
        flat = mpnet.encode([s for t in texts for s in t])
        arrays[f"{name}/embeddings"] = flat.astype(np.float16)
        arrays[f"{name}/lengths"] = np.array([len(t) for t in texts], dtype=np.int32)
        meta["corpora"][name] = {"sha256": digest(texts), "texts": len(texts)}  # type: ignore[index]
        print(f"{name}: {len(texts)} texts, {len(flat)} sentences", file=sys.stderr, flush=True)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
