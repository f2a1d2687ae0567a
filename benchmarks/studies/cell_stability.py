"""How often a paraphrase keeps a sentence in its keyed cell, and how many cells a domain
fills (issue 44).

120 candidate sentences of the recorded pools (candidate_pools.py), each back-translated
through Portuguese (the Doc-T attack's sentence-wise round trip; mpnet cosine to the
original about 0.95), are assigned to the cells of 20 keys of the cells' law with M = 4, 16
and 64 cells: the share of paraphrases that stay in their sentence's cell, and the
effective number of cells the pools' ~6,000 candidates fill (exp of the entropy).

    python benchmarks/studies/cell_stability.py experiments/runs/candidate-pools/pools.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from samark.schemes.samark.cells import null_cells
from samark.schemes.samark.pivots import PivotLaw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--sentences", type=int, default=120)
    parser.add_argument("--keys", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from candidate_pools import load_pools  # type: ignore[import-not-found]

    from samark.embed import load_embedder
    from samark.evaluation.attacks.translation import PortugueseRoundTrip

    prompts = load_pools(Path(args.records))
    every = np.concatenate([s["embeddings"] for steps in prompts for s in steps])
    originals = [c.strip() for steps in prompts for s in steps for c in s["candidates"][:4]]
    originals = originals[: args.sentences]
    trip = PortugueseRoundTrip()
    paraphrases = [trip.sentence(s) for s in originals]
    embedder = load_embedder("all-mpnet-base-v2")
    a, b = embedder.encode(originals), embedder.encode(paraphrases)
    print(f"{len(originals)} sentences, paraphrase cosine {np.mean(np.sum(a * b, axis=1)):.3f}")
    print("| cells | effective cells filled | paraphrase stays in its cell |")
    print("|---|---|---|")
    law = PivotLaw.of("avoid", None)
    for cells in (4, 16, 64):
        keys = null_cells(law, args.keys, every.shape[1], cells, 2, seed=3)
        filled, stay = [], []
        for k in range(args.keys):
            anchors = keys.anchors[k]
            share = np.bincount(np.argmax(every @ anchors.T, axis=1), minlength=cells) / len(every)
            share = share[share > 0]
            filled.append(float(np.exp(-(share * np.log(share)).sum())))
            stay.append(np.mean(np.argmax(a @ anchors.T, 1) == np.argmax(b @ anchors.T, 1)))
        print(f"| {cells} | {np.mean(filled):.1f} | {np.mean(stay):.2f} |")


if __name__ == "__main__":
    main()
