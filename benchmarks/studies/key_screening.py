"""What screening keys at ``samark keyring new --screen`` buys, on held-out human text.

Keys are drawn as ``samark keygen`` draws them (mpnet, pivots avoiding the shipped news,
wiki and fiction directions). Each corpus of the calibration tests' store (CNN/DailyMail,
Wikipedia leads, Jane Austen, Debian handbook; first 10 sentences of each text) is split
in two random halves: a key is screened on half A (``check-key``'s rule on every screened
corpus: p < 0.01 count within the 99.9% binomial bound, one-sided KS above 0.001) and
judged on half B, which the screen never saw. Printed: per corpus, the share of keys whose
half-B count exceeds its bound and the pooled FPR at p < 0.01, for every key and for the
screened keys; once screening on all four corpora, once on news and Wikipedia only (the
other two then stand for domains the operator did not screen on).

    python -m benchmarks.studies.key_screening --keys 200 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from benchmarks.human_texts import corpus_of, stored_test_corpora
from samark.detection.key_check import KeyCheck
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark import SAMark
from samark.schemes.samark.config import SAMarkConfig

ALPHA = 0.01
CONFIDENCE = 0.999


def holds(p: np.ndarray) -> bool:
    """``check-key``'s rule on the p-values of one corpus."""
    return KeyCheck.of(p, ALPHA, CONFIDENCE).holds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the figures as JSON")
    args = ap.parse_args()

    embedder = load_embedder("all-mpnet-base-v2")
    docs, sentences, flat = stored_test_corpora(embedder)
    bounds = np.cumsum([0, *map(len, sentences)])
    embeddings = [flat[bounds[i] : bounds[i + 1]] for i in range(len(docs))]
    corpora = np.array([corpus_of(d.id) for d in docs])
    names = sorted(set(corpora))
    rng = np.random.default_rng(args.seed)
    half_a = np.zeros(len(docs), dtype=bool)
    for c in names:  # a random half of each corpus screens, the other judges
        idx = np.flatnonzero(corpora == c)
        half_a[rng.choice(idx, size=len(idx) // 2, replace=False)] = True
    avoid = embedder.reference_directions()
    start = time.perf_counter()
    p_values = np.empty((args.keys, len(docs)))
    for k in range(args.keys):
        key = WatermarkKey(rng.bytes(32), embedder.identity, PivotDraw.avoiding(avoid))
        config = SAMarkConfig.of(statistic="scan")
        detector = SAMark(key, config=config, embedder=embedder).detector
        p_values[k] = [detector.score_embeddings(e).p_value for e in embeddings]
        if (k + 1) % 20 == 0:
            print(f"{k + 1} keys scored ({time.perf_counter() - start:.0f} s)", flush=True)

    def passes(k: int, screened: list[str]) -> bool:
        return all(holds(p_values[k][(corpora == c) & half_a]) for c in screened)

    out: dict[str, Any] = {"keys": args.keys, "alpha": ALPHA, "screens": []}
    for screened in (names, ["cnn_dailymail", "wikipedia_leads"]):
        kept = [k for k in range(args.keys) if passes(k, screened)]
        row: dict[str, Any] = {"screened_on": screened, "kept": len(kept), "corpora": {}}
        print(f"\nscreened on {', '.join(screened)} (half A): {len(kept)} of {args.keys} kept")
        print(f"{'corpus (half B)':<30} {'keys over bound':>22} {'FPR at p < 0.01':>22}")
        for c in names:
            judge = (corpora == c) & ~half_a
            bound = stats.binom.ppf(CONFIDENCE, judge.sum(), ALPHA)
            over = (p_values[:, judge] < ALPHA).sum(axis=1) > bound
            fpr = (p_values[:, judge] < ALPHA).mean(axis=1)
            cell = {
                "texts": int(judge.sum()),
                "over_all": float(over.mean()),
                "over_screened": float(over[kept].mean()) if kept else None,
                "fpr_all": float(fpr.mean()),
                "fpr_screened": float(fpr[kept].mean()) if kept else None,
            }
            row["corpora"][c] = cell
            tag = "" if c in screened else " (unscreened)"
            print(
                f"{c + tag:<30} {100 * cell['over_all']:>8.1f}% -> "
                f"{100 * (cell['over_screened'] or 0):>5.1f}%      "
                f"{100 * cell['fpr_all']:>6.2f}% -> {100 * (cell['fpr_screened'] or 0):>5.2f}%"
            )
        out["screens"].append(row)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
