"""How often a paraphrase keeps a sentence in its keyed cell, and how many cells a domain
fills (issue 44).

120 candidate sentences of the recorded pools (candidate_pools.py), each back-translated
through Portuguese (the Doc-T attack's sentence-wise round trip; mpnet cosine to the
original about 0.95), are assigned to the cells of 20 keys of the cells' law with M = 4, 16
and 64 cells: the share of paraphrases that stay in their sentence's cell, and the
effective number of cells the pools' ~6,000 candidates fill (exp of the entropy). Then each
sentence's margin from its cell's nearest wall (its cosine to its own anchor less its
cosine to the next) and how far the paraphrase moves it (the spread a selection rule that
keeps sentences away from walls would plan for), and how far it moves a pivot's cosine.

    python -m benchmarks.studies.cell_stability experiments/runs/candidate-pools/pools.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from samark.keys.pivots import PivotLaw
from samark.schemes.samark.cells import null_cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--sentences", type=int, default=120)
    parser.add_argument("--keys", type=int, default=20)
    args = parser.parse_args()
    from benchmarks.studies.candidate_pools import load_pools
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
    print("\n| cells | median margin | sd of its move | stays: margin above median / below |")
    print("|---|---|---|---|")
    for cells in (16, 64):
        keys = null_cells(law, args.keys, every.shape[1], cells, 2, seed=3)
        margins, moves, stays = [], [], []
        for k in range(args.keys):
            sa, sb = a @ keys.anchors[k].T, b @ keys.anchors[k].T
            order = np.argsort(-sa, axis=1)
            rows = np.arange(len(a))
            own, nxt = order[:, 0], order[:, 1]
            margin = sa[rows, own] - sa[rows, nxt]
            others = sb.copy()
            others[rows, own] = -np.inf
            after = sb[rows, own] - others.max(axis=1)  # < 0: the paraphrase left the cell
            margins.append(margin)
            moves.append(after - margin)
            stays.append(after > 0)
        m, mv, st = (np.concatenate(x) for x in (margins, moves, stays))
        high = m > np.median(m)
        print(
            f"| {cells} | {np.median(m):.4f} | {mv.std():.4f} | "
            f"{st[high].mean():.2f} / {st[~high].mean():.2f} |"
        )
    pivots = null_cells(law, args.keys, every.shape[1], 16, 2, seed=3).pivots
    moved = (b - a) @ pivots.reshape(-1, a.shape[1]).T
    spread = (a @ pivots.reshape(-1, a.shape[1]).T).std()
    print(f"\na pivot's cosine moves by {moved.std():.4f} (sd); over sentences {spread:.4f}")


if __name__ == "__main__":
    main()
