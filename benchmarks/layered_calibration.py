"""Calibration over keys of samark-layered and of SAMark's statistics on a run's human
negatives: false-positive rates per key and per corpus, and uniformity of the p-values.

Every negative is embedded and tokenised once; then each of ``--keys`` fresh keys scores
every negative with SAMark's ``z`` and ``scan`` statistics, the token layer and their
Fisher combination (the layered mark's p-value). For each kind of p-value it prints:

- the pooled FPR at p < alpha, overall and per corpus, with its one-sided 95% upper bound;
- per key: the FPR's spread, and how many keys flag more negatives than the 99.9%
  binomial bound allows (about 0.1% of keys by chance);
- one-sided KS tests against uniform: of the pooled p-values, and per key.

    python -m benchmarks.layered_calibration experiments/runs/paper --keys 50 \
        --out docs/results/2026-11-25-layered/calibration.json
    python -m benchmarks.layered_calibration --test-corpora --keys 60   # no embedding

Keys are drawn as ``samark keygen`` draws them (pivots avoiding the embedder's news,
encyclopedic and fiction mean directions); ``--unconstrained`` draws Haar pivots in the
whole space instead. ``--test-corpora`` scores the four corpora of
tests/test_calibration.py from their stored embeddings (CNN/DailyMail, Wikipedia, Jane
Austen, and the Debian handbook, a domain no avoided direction covers) instead of a run's
negatives.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

from benchmarks.human_texts import corpus_of, embed_texts, stored_test_corpora
from samark.embed import load_embedder
from samark.evaluation.runner import Run
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes import create_scheme
from samark.schemes.samark.config import SAMarkDetection
from samark.schemes.samark.detector import SAMarkDetector
from samark.schemes.samark.layered import SAMarkLayered, combine_p_values

KINDS = (
    "samark z",
    "samark scan",
    "token layer",
    "layered (fisher)",
    "layered (cauchy)",
    "layered (both)",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "run", type=Path, nargs="?", help="a run folder (its experiment's human negatives)"
    )
    ap.add_argument("--test-corpora", action="store_true", help="the calibration tests' corpora")
    ap.add_argument("--unconstrained", action="store_true", help="keys without avoided directions")
    ap.add_argument("--keys", type=int, default=50)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--negatives", type=int, default=None, help="the first N only")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    ap.add_argument("--cache", type=Path, default=None, help="embeddings cache (.npz)")
    args = ap.parse_args()

    embedder = load_embedder("all-mpnet-base-v2")
    t0 = time.perf_counter()
    if args.test_corpora:
        docs, sentences, vectors = stored_test_corpora(embedder)
        source = "the calibration tests' corpora (stored embeddings)"
    else:
        if args.run is None:
            ap.error("name a run folder, or --test-corpora")
        docs = Run.open(args.run).negatives()[: args.negatives]
        scored = embed_texts(embedder, [d.text for d in docs], args.cache)
        sentences = [ss for ss, _ in scored]
        vectors = np.concatenate([e for ss, e in scored if ss])
        source = f"the negatives of {args.run}"
    bounds = np.cumsum([0, *map(len, sentences)])
    print(
        f"{len(docs)} texts, {bounds[-1]} sentences: {source} ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    avoid = None if args.unconstrained else embedder.reference_directions()
    corpora = [corpus_of(d.id) for d in docs]
    template = create_scheme(
        "samark-layered", key=WatermarkKey(b"k" * 32, embedder.identity), embedder=embedder
    )
    assert isinstance(template, SAMarkLayered)
    ids = [template.token_ids(d.text) for d in docs]

    p: dict[str, np.ndarray] = {k: np.ones((args.keys, len(docs))) for k in KINDS}
    t0 = time.perf_counter()
    for k in range(args.keys):
        secret = f"layered-calibration-{k:05d}".encode().ljust(32, b"0")
        key = WatermarkKey(secret, embedder.identity, PivotDraw.avoiding(avoid))
        layered = create_scheme("samark-layered", key=key, embedder=embedder)
        assert isinstance(layered, SAMarkLayered)
        z = SAMarkDetector(key, embedder, SAMarkDetection(statistic="z"))
        scan = layered.detector
        for i in range(len(docs)):
            emb = vectors[bounds[i] : bounds[i + 1]]
            p_z = z.score_embeddings(emb).p_value
            p_scan = scan.score_embeddings(emb).p_value
            p_tok = layered.token_layer.score(ids[i]).p_value
            p["samark z"][k, i] = p_z
            p["samark scan"][k, i] = p_scan
            p["token layer"][k, i] = p_tok
            p["layered (fisher)"][k, i] = combine_p_values(p_scan, p_tok)
            p["layered (cauchy)"][k, i] = combine_p_values(p_scan, p_tok, method="cauchy")
            p["layered (both)"][k, i] = combine_p_values(p_scan, p_tok, method="both")
        if (k + 1) % 5 == 0 or k + 1 == args.keys:
            print(f"  key {k + 1}/{args.keys} ({time.perf_counter() - t0:.0f} s)", flush=True)

    n, alpha = len(docs), args.alpha
    bound = int(stats.binom.ppf(0.999, n, alpha))
    results: dict[str, dict[str, object]] = {}
    print(f"\nFPR at p < {alpha}: {args.keys} keys x {n} negatives")
    print(
        f"{'p-value':18} {'pooled':>7} {'95% UB':>7} {'key min':>7} {'key max':>7} "
        f"{'keys > bound':>12} {'KS pooled':>9} {'keys KS<.001':>12}  per corpus"
    )
    for kind in KINDS:
        flags = p[kind] < alpha
        pooled = float(flags.mean())
        hits = int(flags.sum())
        upper = float(stats.beta.ppf(0.95, hits + 1, flags.size - hits))
        per_key = flags.mean(axis=1)
        over = int((flags.sum(axis=1) > bound).sum())
        ks_pooled = float(stats.kstest(p[kind].ravel(), "uniform", alternative="greater").pvalue)
        ks_keys = [stats.kstest(row, "uniform", alternative="greater").pvalue for row in p[kind]]
        low_keys = int(sum(x < 1e-3 for x in ks_keys))
        by: dict[str, list[bool]] = defaultdict(list)
        for i, c in enumerate(corpora):
            by[c].extend(flags[:, i].tolist())
        per_corpus = {c: float(np.mean(v)) for c, v in sorted(by.items())}
        results[kind] = {
            "pooled_fpr": pooled,
            "pooled_fpr_upper_95": upper,
            "key_fpr_min": float(per_key.min()),
            "key_fpr_max": float(per_key.max()),
            "keys_over_bound": over,
            "bound": bound,
            "ks_pooled": ks_pooled,
            "keys_ks_below_0.001": low_keys,
            "per_corpus_fpr": per_corpus,
        }
        corpus_text = ", ".join(f"{c} {100 * v:.2f}%" for c, v in per_corpus.items())
        print(
            f"{kind:18} {100 * pooled:6.2f}% {100 * upper:6.2f}% {100 * per_key.min():6.1f}% "
            f"{100 * per_key.max():6.1f}% {over:>5} of {args.keys:<4} {ks_pooled:9.3f} "
            f"{low_keys:>5} of {args.keys:<4}  {corpus_text}"
        )
    print(f"(a key's 99.9% binomial bound: {bound} of {n} negatives)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "source": source,
            "keys": args.keys,
            "avoided_directions": not args.unconstrained,
            "texts": n,
            "alpha": alpha,
        }
        args.out.write_text(json.dumps({**meta, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
