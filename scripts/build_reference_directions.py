"""Build ``src/samark/resources/reference_directions.json``: public directions that pivots avoid.

Sentence embeddings are anisotropic, and each domain of human text has its own mean
direction. A pivot that happens to lean towards a domain's mean biases every text of that
domain, so that key's false-positive rate on it drifts from the nominal one (measured: up to
15% at alpha = 1% on news with unconstrained pivots, see docs/statistics.md). Keys and
the detector's null pivots are therefore drawn orthogonal to these directions (same law for
both, so the p-value stays exact).

Directions: the mean embedding of news prose (CNN/DailyMail sentences 11-25, so that tests
on each article's first 10 sentences are out of sample) and of encyclopedic prose (Wikipedia
leads 5000 onwards; tests use leads before 5000).

    python scripts/build_reference_directions.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from samark.datasets import load_dataset
from samark.embed import load_embedder
from samark.segment import split_sentences

OUT = (
    Path(__file__).resolve().parents[1]
    / "src"
    / "samark"
    / "resources"
    / "reference_directions.json"
)
WIKI_START = 5000


def main() -> None:
    news = [s for d in load_dataset("cnn_dailymail") for s in split_sentences(d.text)[10:25]]
    leads = load_dataset("wikipedia_leads")[WIKI_START : WIKI_START + 800]
    wiki = [s for d in leads for s in split_sentences(d.text)[:3]]
    table = {}
    for name in ("all-mpnet-base-v2", "all-minilm-l6-v2"):
        emb = load_embedder(name)
        directions = [emb.encode(news).mean(axis=0), emb.encode(wiki).mean(axis=0)]
        table[name] = {
            "fingerprint": emb.identity.fingerprint,
            "sources": [
                f"cnn_dailymail sentences 11-25 ({len(news)} sentences)",
                f"wikipedia_leads {WIKI_START}-{WIKI_START + 799}, first 3 sentences ({len(wiki)})",
            ],
            "directions": [[float(x) for x in d] for d in directions],
        }
        print(name, [round(float(np.linalg.norm(d)), 4) for d in directions])
    OUT.write_text(json.dumps(table) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
