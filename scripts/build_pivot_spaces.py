"""Build ``src/samark/resources/pivot_spaces``: public subspaces keys may draw pivots in.

A pivot space is spanned by the directions where sentences vary most relative to their
documents' means (``fit_pivot_space`` of ``samark.keys.pivot_spaces``), fitted
on three kinds of human prose that the calibration tests do not score
(``reference_corpora``: news, encyclopedic, fiction), each domain weighing equally.
docs/statistics.md has the measurements behind it.

    python scripts/build_pivot_spaces.py
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from samark.embed import load_embedder
from samark.keys.pivot_spaces import PivotSpace
from samark.schemes.samark.pivot_space_fitting import fit_balanced, reference_corpora

OUT = Path(__file__).resolve().parents[1] / "src" / "samark" / "resources"
#: embedder preset -> (space name, rank)
SPACES = {
    "all-mpnet-base-v2": ("mpnet-quiet-128", 128),
    "all-minilm-l6-v2": ("minilm-quiet-64", 64),
}


def main() -> None:
    domains = reference_corpora()
    sources = {k: f"{len(v)} documents, {sum(map(len, v))} sentences" for k, v in domains.items()}
    print(sources, flush=True)
    (OUT / "pivot_spaces").mkdir(exist_ok=True)
    index = {}
    for preset, (name, rank) in SPACES.items():
        emb = load_embedder(preset)
        embedded = []
        for docs in domains.values():
            flat = emb.encode([s for d in docs for s in d])
            bounds = np.cumsum([0] + [len(d) for d in docs])
            embedded.append([flat[a:b] for a, b in itertools.pairwise(bounds)])
        basis = fit_balanced(embedded, rank).astype("<f4")
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
