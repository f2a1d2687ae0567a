"""Per-key false-positive rate on a domain whose mean direction the keys do not avoid.

    python benchmarks/studies/unseen_domain.py --keys 30

Keys' pivots (and the detector's null pivots) are drawn orthogonal to public domain-mean
directions (news and encyclopedic prose, ``src/samark/resources/reference_directions.json``),
because a pivot that leans towards a domain's mean biases every text of that domain. This
measures what happens on a domain that no avoided direction covers: 200 chapters of Jane
Austen (first 10 sentences each), next to the 200 CNN articles and 300 Wikipedia leads of
the calibration tests. For each of ``--keys`` keys and each avoid set it prints, per corpus,
the share of texts with p < 0.01 (statistic z), how many keys exceed the one-sided 99.9%
binomial bound, and how the worst key's FPR relates to its pivots' lean towards the
domain's mean. Avoid sets: the shipped one (news, wiki); the shipped one plus a fiction
direction (the mean of Austen's sentences 11-25 of each chapter, disjoint from the tested
first 10); leave-one-domain-out checks of the same construction on news and wiki; and the
three means plus ``--topics`` principal directions of the three domains' centred sentence
embeddings. A fourth corpus, the sections of the Debian Administrator's Handbook
(technical prose, dataset ``debian_handbook``), is fitted by no avoid set: it is the
unseen domain of every row.
"""

from __future__ import annotations

import argparse
import hashlib

import numpy as np
from scipy import stats

from samark.datasets import leading_sentences, load_dataset
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.detector import SAMarkDetector


def _heads(name: str, limit: int, lo: int, hi: int, skip: int = 0) -> list[list[str]]:
    docs = load_dataset(name)[skip:]
    return leading_sentences((d.text for d in docs), limit=limit, start=lo, stop=hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=30)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--topics", type=int, default=16, help="topic directions of the last set")
    args = ap.parse_args()
    emb = load_embedder("all-mpnet-base-v2")
    shipped = emb.reference_directions()
    assert shipped is not None
    tests = {
        "cnn_dailymail": _heads("cnn_dailymail", 200, 0, 10),
        "wikipedia_leads": _heads("wikipedia_leads", 300, 0, 10),
        "jane_austen": _heads("jane_austen", 200, 0, 10),
        # technical prose that no avoid set below is fitted on: unseen by all of them
        "debian_handbook": _heads("debian_handbook", 500, 0, 10),
    }
    print("embedding the test texts", flush=True)
    embedded = {k: [emb.encode(t) for t in v] for k, v in tests.items()}
    # domain means from text the tests do not use (as the shipped directions were built)
    fiction = [s for t in _heads("jane_austen", 400, 10, 25) for s in t]
    news = [s for t in _heads("cnn_dailymail", 400, 10, 25) for s in t]
    wiki = [s for t in _heads("wikipedia_leads", 800, 0, 3, skip=5000) for s in t]
    print("embedding the domain means", flush=True)
    vectors = {"news": emb.encode(news), "wiki": emb.encode(wiki), "fiction": emb.encode(fiction)}
    mean = {name: v.mean(axis=0) for name, v in vectors.items()}
    # topic directions: the top principal directions of the three domains' centred
    # sentence embeddings (each domain centred on its own mean, equal weight per domain)
    centred = np.vstack([v[:1500] - v.mean(axis=0) for v in vectors.values()])
    topics = np.linalg.svd(centred, full_matrices=False)[2][: args.topics]
    avoid_sets = {
        "shipped (news, wiki)": shipped,
        "news, wiki, fiction": np.stack([mean["news"], mean["wiki"], mean["fiction"]]),
        "wiki, fiction (news unseen)": np.stack([mean["wiki"], mean["fiction"]]),
        "news, fiction (wiki unseen)": np.stack([mean["news"], mean["fiction"]]),
        f"news, wiki, fiction + {args.topics} topic directions": np.vstack(
            [mean["news"], mean["wiki"], mean["fiction"], topics]
        ),
    }
    secrets = [hashlib.sha256(f"unseen-domain/{i}".encode()).digest() for i in range(args.keys)]
    for label, avoid in avoid_sets.items():
        print(f"\navoid: {label}")
        print("| corpus | n | pooled FPR | keys over bound | worst key FPR | corr(lean, FPR) |")
        print("|---|---|---|---|---|---|")
        for corpus, texts in embedded.items():
            n = len(texts)
            bound = stats.binom.ppf(0.999, n, args.alpha)
            domain = np.mean([e.mean(axis=0) for e in texts], axis=0)
            fprs, leans = [], []
            for secret in secrets:
                key = WatermarkKey(secret, emb.identity, PivotDraw.avoiding(avoid))
                det = SAMarkDetector(key, emb)
                p = np.array([det.score_embeddings(e).p_value for e in texts])
                fprs.append(float(np.mean(p < args.alpha)))
                # how far the key's pivots lean towards the corpus mean (largest channel)
                leans.append(float(np.abs(key.samark.pivots(emb.dim, 2) @ domain).max()))
            fa = np.array(fprs)
            over = int(np.sum(fa * n > bound))
            corr = float(np.corrcoef(leans, fa)[0, 1]) if fa.std() > 0 else float("nan")
            print(
                f"| {corpus} | {n} | {100 * fa.mean():.2f}% | {over}/{len(secrets)} | "
                f"{100 * fa.max():.1f}% | {corr:+.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
