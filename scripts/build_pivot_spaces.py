"""Build ``src/samark/resources/pivot_spaces``: public subspaces keys may draw pivots in.

A pivot space is spanned by the directions where sentences vary most relative to their
documents' means (``samark.pivot_space.fit_pivot_space``); docs/statistics.md has the
measurements that motivate it. Fitted on three kinds of human prose, each from text that
the calibration tests do not score (they use each article's and chapter's first 10
sentences and Wikipedia leads before 5000):

- news: CNN/DailyMail sentences 11 onwards, in windows of 12 (the last one from 6);
- encyclopedic: Wikipedia leads 5000-5999 of at least 3 sentences;
- fiction: Jane Austen's chapters, sentences 13-36, in windows of 12.

The three domains weigh equally (their moments are averaged).

    python scripts/build_pivot_spaces.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from samark.datasets import load_dataset
from samark.embed import load_embedder
from samark.pivot_space import PivotSpace, fit_pivot_space
from samark.segment import split_sentences

OUT = Path(__file__).resolve().parents[1] / "src" / "samark" / "resources"
#: embedder preset -> (space name, rank)
SPACES = {"all-mpnet-base-v2": ("mpnet-quiet-128", 128), "all-minilm-l6-v2": ("minilm-quiet-64", 64)}


def _windows(name: str, start: int, stop: int | None, size: int, least: int) -> list[list[str]]:
    out = []
    for doc in load_dataset(name):
        sents = split_sentences(doc.text)[start:stop]
        for i in range(0, len(sents), size):
            window = sents[i : i + size]
            if len(window) >= least:
                out.append(window)
    return out


def main() -> None:
    domains = {
        "news": _windows("cnn_dailymail", 10, None, 12, 6),
        "encyclopedic": [
            split_sentences(d.text)
            for d in load_dataset("wikipedia_leads")[5000:6000]
            if len(split_sentences(d.text)) >= 3
        ],
        "fiction": _windows("jane_austen", 12, 36, 12, 12),
    }
    sources = {k: f"{len(v)} documents, {sum(map(len, v))} sentences" for k, v in domains.items()}
    print(sources, flush=True)
    (OUT / "pivot_spaces").mkdir(exist_ok=True)
    index = {}
    for preset, (name, rank) in SPACES.items():
        emb = load_embedder(preset)
        moments = []
        for docs in domains.values():
            flat = emb.encode([s for d in docs for s in d])
            bounds = np.cumsum([0] + [len(d) for d in docs])
            moments.append([flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
        # equal weight per domain: fit on each domain's documents, repeated to equal counts
        most = max(len(m) for m in moments)
        docs_all = [d for m in moments for d in (m * (most // len(m) + 1))[:most]]
        basis = fit_pivot_space(docs_all, rank).astype("<f4")
        file = f"{name}.npy"
        np.save(OUT / "pivot_spaces" / file, basis, allow_pickle=False)
        space = PivotSpace(name, basis.astype(np.float64))
        index[name] = {
            "embedder": preset,
            "fingerprint": emb.identity.fingerprint,
            "rank": rank,
            "file": file,
            "sha256": space.sha256,
            "sources": sources,
        }
        print(name, rank, space.sha256[:12], flush=True)
    (OUT / "pivot_spaces.json").write_text(json.dumps(index, indent=1) + "\n")
    print("wrote", OUT / "pivot_spaces.json")


if __name__ == "__main__":
    main()
