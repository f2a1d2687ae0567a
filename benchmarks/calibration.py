"""Calibration of SAMark detection on human text: the paper's z versus our p-values.

Prints, for many random keys: the paper's z on human text (mean, 99th percentile, share
above the paper-style threshold 2.33), and for each statistic the false-positive rate of
``p < alpha`` and a KS test of the pooled p-values against uniform.

    python benchmarks/calibration.py --embedder all-mpnet-base-v2 --keys 100
    python benchmarks/calibration.py --no-avoid     # keys without reference directions
    python benchmarks/calibration.py --dataset wikipedia_leads --statistics scan
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from samark.datasets import leading_sentences, load_dataset
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.config import SAMarkDetection
from samark.schemes.samark.detector import SAMarkDetector
from samark.schemes.samark.statistics import STATISTICS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", default="all-mpnet-base-v2")
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--dataset", default="cnn_dailymail")
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--sentences", type=int, default=10)
    ap.add_argument("--min-sentences", type=int, default=3)
    ap.add_argument("--null", type=int, default=999)
    ap.add_argument("--no-avoid", action="store_true", help="unconstrained pivots")
    ap.add_argument(
        "--domains",
        nargs="+",
        default=None,
        help="the domains whose mean directions the keys avoid (default: new keys' own)",
    )
    ap.add_argument("--statistics", nargs="+", default=list(STATISTICS), choices=STATISTICS)
    args = ap.parse_args()

    embedder = load_embedder(args.embedder)
    texts = leading_sentences(
        (doc.text for doc in load_dataset(args.dataset)),
        limit=args.texts,
        stop=args.sentences,
        min_sentences=args.min_sentences,
    )
    t0 = time.perf_counter()
    embeddings = [embedder.encode(s) for s in texts]
    print(
        f"{len(texts)} {args.dataset} texts, {sum(map(len, texts))} sentences embedded "
        f"in {time.perf_counter() - t0:.1f}s with {embedder.name}"
    )

    avoid = None if args.no_avoid else embedder.reference_directions(args.domains)
    print(f"pivots avoid {0 if avoid is None else len(avoid)} reference directions")
    rng = np.random.default_rng(12345)
    zs: list[list[float]] = []
    ps: dict[str, list[list[float]]] = {s: [] for s in args.statistics}
    for _ in range(args.keys):
        key = WatermarkKey(rng.bytes(32), embedder.identity, PivotDraw.avoiding(avoid))
        for statistic in ps:
            det = SAMarkDetector(
                key, embedder, SAMarkDetection(statistic=statistic, n_null=args.null)
            )
            res = [det.score_embeddings(e) for e in embeddings]
            ps[statistic].append([r.p_value for r in res])
            if statistic == args.statistics[0]:
                zs.append([r.z for r in res])
    z = np.array(zs)
    print(
        f"paper z on human text over {args.keys} keys: mean {z.mean():.2f}, "
        f"median {np.median(z):.2f}, 99th pct {np.percentile(z, 99):.2f}, "
        f"share z>2.33 {np.mean(z > 2.33):.3f}"
    )
    for statistic, values in ps.items():
        p = np.array(values)
        for alpha in (0.01, 0.05):
            per_key = (p < alpha).mean(axis=1)
            print(
                f"[{statistic:9s}] alpha {alpha}: FPR {per_key.mean():.4f}, per key sd "
                f"{per_key.std():.4f} (binomial {np.sqrt(alpha * (1 - alpha) / p.shape[1]):.4f}),"
                f" worst key {per_key.max():.3f}"
            )
        print(f"[{statistic:9s}] pooled KS p {stats.kstest(p.ravel(), 'uniform').pvalue:.3g}")


if __name__ == "__main__":
    main()
