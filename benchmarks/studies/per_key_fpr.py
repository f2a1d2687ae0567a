"""Per-key false-positive rates on many domains of human text, and what removes their spread.

An operator holds one key. Over keys, p < alpha flags alpha of human text (exactness);
per key, a domain whose texts share directions the key's pivots lean towards is flagged
more often. For ``--keys`` keys drawn as ``samark keygen`` draws them, this scores the
first 10 sentences of the human texts of eight corpora (benchmarks/studies/per_key_corpora.py:
news, encyclopedia, fiction, Python docs, and four domains nothing was fitted on: the
Debian handbook, fortunes, licenses, Reuters newswire) and prints, per corpus, statistic
and centring rule, at alpha = 1% and 5%:

- the pooled FPR; the per-key count's standard deviation over the binomial one (1.0 when
  keys differ by chance only); the worst key's FPR; keys above the one-sided 99.9%
  binomial bound (0.2 of 200 expected by chance).

Statistics: SAMark's ``z`` and ``scan`` and the layered mark's Fisher p-value (scan and
its token layer). Centring rules (samark.schemes.samark.topic_centring), each applied
alike to the key and the null pivot sets, so every p-value stays exact over keys:

- ``none``: the shipped detection;
- ``neighbours-K``: less the mean of the K nearest texts of the public reference
  (``topic_centring.REFERENCE_SOURCES``: Wikipedia, Austen and Python documentation
  texts that no test corpus holds);
- ``corpus neighbours-K``: the same with the *other* texts of the test corpus as the
  reference: what an operator gets who adds her own human traffic to the reference;
- ``corpus mean``: less the mean of the other texts of the same corpus -- an oracle
  that knows each text's domain, the ceiling of any domain-mean estimate;
- ``own mean``: less the text's own mean (within-text evidence only).

    python -m benchmarks.studies.per_key_fpr --keys 200 --out docs/results/2026-11-26-per-key-fpr

Writes ``per-key.json`` (every key's counts) and ``per-key-spread.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

from benchmarks.studies.per_key_corpora import TEST_CORPORA, embed_cached, test_texts
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.cell_pass import score_in_cells
from samark.schemes.samark.cells import CellFrames, NullCellDraws, key_cells
from samark.schemes.samark.null_projection import ProjectedNullCells
from samark.schemes.samark.statistics import alignment, channel_responses, statistic_values
from samark.schemes.samark.topic_centring import NeighbourCentring, reference_texts

ALPHAS = (0.01, 0.05)
#: the plot's rules and their legend
PLOTTED = {
    "none": "none (today)",
    "neighbours-16": "public reference, 16 nearest",
    "corpus mean": "oracle: the domain's mean",
    "own mean": "the text's own mean (no power left)",
    "corpus neighbours-32": "operator's own domain text, 32 nearest",
}
KINDS = ("z", "scan", "layered")


def reference_means(embedder_name: str) -> np.ndarray:
    emb = load_embedder(embedder_name)
    means = []
    for name, texts in reference_texts().items():
        means += [e.mean(axis=0) for e in embed_cached(emb, f"reference-{name}", texts)]
    return np.array(means)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--nulls", type=int, default=999)
    ap.add_argument("--corpora", nargs="+", default=list(TEST_CORPORA))
    ap.add_argument(
        "--rules", nargs="+", default=["none", "neighbours-16", "corpus mean", "own mean"]
    )
    ap.add_argument("--no-layered", action="store_true", help="skip the token layer")
    ap.add_argument(
        "--cells",
        type=int,
        default=0,
        help="score on M keyed semantic cells (samark.schemes.samark.cells) instead of "
        "static pivots: each key's own cells against the detector's public null cell draws",
    )
    ap.add_argument(
        "--null-draws",
        choices=["full", "projected"],
        default="full",
        help="with --cells: the detector's null draws, in full or in each text's own span "
        "(samark.schemes.samark.null_projection; the draws of keys from 2026-11-28 on)",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--replot", action="store_true", help="only redraw --out's plot from its JSON")
    args = ap.parse_args()
    if args.replot:
        saved = json.loads((args.out / "per-key.json").read_text())
        plot(saved["results"], list(saved["corpora"]), args.out / "per-key-spread.png")
        return

    emb = load_embedder("all-mpnet-base-v2")
    texts = {name: test_texts(name) for name in args.corpora}
    vectors = {name: embed_cached(emb, name, t) for name, t in texts.items()}
    for name, t in texts.items():
        print(f"{name}: {len(t)} texts, {sum(map(len, t))} sentences", flush=True)
    ref = np.zeros((0, emb.dim))
    if any(r.startswith("neighbours-") for r in args.rules):
        ref = reference_means(emb.name)
        print(f"reference: {len(ref)} public human texts", flush=True)

    avoid = emb.reference_directions()
    keys = [
        WatermarkKey(
            f"per-key-fpr-{k:05d}".encode().ljust(32, b"0"), emb.identity, PivotDraw.avoiding(avoid)
        )
        for k in range(args.keys)
    ]
    frames = np.concatenate(
        [
            np.stack([k.samark.pivots(emb.dim, 2) for k in keys]),
            keys[0].samark.null_pivots(args.nulls, emb.dim, 2, 0),
        ]
    )
    if args.cells:
        cell_keys = CellFrames.stack([key_cells(k, emb.dim, args.cells, 2) for k in keys])
        law = keys[0].samark.pivot_law(emb.dim)
        draws = NullCellDraws if args.null_draws == "full" else ProjectedNullCells
        cell_nulls = draws(law, args.nulls, emb.dim, args.cells, 2, 0)
    token_p = None if args.no_layered else token_layer_p_values(keys, texts)

    results: dict[str, dict[str, dict[str, object]]] = {}
    for rule in args.rules:
        t0 = time.perf_counter()
        p = {
            name: (
                score_cells(
                    vectors[name], cell_keys, cell_nulls, centring(rule, ref, vectors[name])
                )
                if args.cells
                else score(vectors[name], frames, args.keys, centring(rule, ref, vectors[name]))
            )
            for name in texts
        }
        if token_p is not None:  # the layered p-value: the scan's and the token layer's
            for name in texts:
                p[name]["layered"] = fisher(p[name]["scan"], token_p[name])
        print(f"\n== {rule} ({time.perf_counter() - t0:.0f} s)")
        results[rule] = {name: {k: summary(v) for k, v in p[name].items()} for name in texts}
        print_table(results[rule], texts)
        unseen = [n for n in texts if TEST_CORPORA[n][3] == "unseen"]
        if unseen:
            pooled = {
                kind: summary(np.concatenate([p[n][kind] for n in unseen], axis=1))
                for kind in p[unseen[0]]
            }
            results[rule]["unseen (pooled)"] = pooled
            print_table({"unseen (pooled)": pooled}, {"unseen (pooled)": []})
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "keys": args.keys,
            "cells": args.cells,
            "null_draws": args.null_draws if args.cells else None,
            "nulls": args.nulls,
            "corpora": {n: {"texts": len(t), "role": TEST_CORPORA[n][3]} for n, t in texts.items()},
            "reference_texts": len(ref),
        }
        (args.out / "per-key.json").write_text(json.dumps({**meta, "results": results}) + "\n")
        plot(results, list(texts), args.out / "per-key-spread.png")


def centring(
    rule: str, ref: np.ndarray, corpus: list[np.ndarray]
) -> Callable[[int, np.ndarray], np.ndarray]:
    """``(text index, embeddings) -> centred embeddings`` for one rule and corpus."""
    if rule == "none":
        return lambda i, e: e
    if rule.startswith("neighbours-"):
        rule_fn = NeighbourCentring("benchmark", ref, k=int(rule.split("-")[1]))
        return lambda i, e: rule_fn(e)
    if rule.startswith("corpus neighbours-"):
        # an operator's own human text as the reference: the other texts of this corpus
        means = np.array([e.mean(axis=0) for e in corpus])
        k = int(rule.split("-")[1])

        def leave_one_out(i: int, e: np.ndarray) -> np.ndarray:
            rest = np.delete(means, i, axis=0)
            return NeighbourCentring("corpus", rest, k=min(k, len(rest)))(e)

        return leave_one_out
    if rule == "corpus mean":
        means = np.array([e.mean(axis=0) for e in corpus])
        total = means.sum(axis=0)
        return lambda i, e: e - (total - means[i]) / (len(means) - 1)
    if rule == "own mean":
        return lambda i, e: e - e.mean(axis=0)
    raise SystemExit(f"unknown rule {rule!r}")


def score(
    corpus: list[np.ndarray],
    frames: np.ndarray,
    n_keys: int,
    centre: Callable[[int, np.ndarray], np.ndarray],
) -> dict[str, np.ndarray]:
    """p-values (keys, texts) per statistic: each key's value ranked among the null sets'."""
    out = {s: np.ones((n_keys, len(corpus))) for s in ("z", "scan")}
    for i, e in enumerate(corpus):
        evidence = alignment(channel_responses(centre(i, e), frames), 30.0)
        for s in out:
            v = np.nan_to_num(statistic_values(evidence, s), nan=0.0, posinf=1e9)  # type: ignore[arg-type]
            own, null = v[:n_keys], v[n_keys:]
            out[s][:, i] = (1 + (null[None, :] >= own[:, None] - 1e-12).sum(axis=1)) / (
                null.size + 1
            )
    return out


def score_cells(
    corpus: list[np.ndarray],
    keys: CellFrames,
    nulls: NullCellDraws | ProjectedNullCells,
    centre: Callable[[int, np.ndarray], np.ndarray],
) -> dict[str, np.ndarray]:
    """As :func:`score` on keyed cells: every key's own cells, ranked among the detector's
    public null cell draws (one pass over the draws per statistic, ``cell_pass``), on the
    centred embeddings as the detector scores them (not renormalised)."""
    texts = [centre(i, e) for i, e in enumerate(corpus)]
    out = {}
    for s in ("z", "scan"):
        scored = score_in_cells(keys, nulls, texts, kappa=30.0, use_tanh=True, statistic=s)
        out[s] = np.array([c.p_values() for c in scored]).T
    return out


def token_layer_p_values(
    keys: list[WatermarkKey], texts: dict[str, list[list[str]]]
) -> dict[str, np.ndarray]:
    """The layered mark's token-layer p-value of every text under every key."""
    from samark.schemes import create_scheme
    from samark.schemes.samark.layered import SAMarkLayered

    emb = load_embedder("all-mpnet-base-v2")
    t0 = time.perf_counter()
    layers = []
    for key in keys:
        layered = create_scheme("samark-layered", key=key, embedder=emb)
        assert isinstance(layered, SAMarkLayered)
        layers.append(layered)
    out = {}
    for name, corpus in texts.items():
        ids = [layers[0].token_ids(" ".join(t)) for t in corpus]
        out[name] = np.array(
            [[layer.token_layer.score(x).p_value for x in ids] for layer in layers]
        )
    print(f"token layer scored ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def fisher(p_scan: np.ndarray, p_token: np.ndarray) -> np.ndarray:
    from samark.schemes.samark.layered import combine_p_values

    return np.vectorize(lambda a, b: combine_p_values(float(a), float(b)))(p_scan, p_token)


def summary(p: np.ndarray) -> dict[str, object]:
    """Per-key figures of a (keys, texts) array of p-values."""
    n = p.shape[1]
    out: dict[str, object] = {"texts": n}
    for a in ALPHAS:
        counts = (p < a).sum(axis=1)
        bound = int(stats.binom.ppf(0.999, n, a))
        out[f"{a}"] = {
            "pooled_fpr": float(counts.mean() / n),
            "spread_ratio": float(counts.std() / np.sqrt(n * a * (1 - a))),
            "worst_key_fpr": float(counts.max() / n),
            "keys_over_bound": int((counts > bound).sum()),
            "bound": bound,
            "counts": counts.tolist(),
        }
    return out


def print_table(res: dict[str, dict[str, object]], texts: dict[str, list[list[str]]]) -> None:
    print(f"{'corpus':18} {'kind':8} " + "  ".join(f"{'alpha ' + str(a):>36}" for a in ALPHAS))
    for name, kinds in res.items():
        for kind, s in kinds.items():
            cells = []
            for a in ALPHAS:
                f = s[f"{a}"]  # type: ignore[index]
                cells.append(
                    f"{100 * f['pooled_fpr']:5.2f}% x{f['spread_ratio']:4.2f} "
                    f"worst {100 * f['worst_key_fpr']:5.1f}% over {f['keys_over_bound']:3d}"
                )
            print(f"{name:18} {kind:8} " + "  ".join(f"{c:>36}" for c in cells))


def plot(results: dict[str, dict[str, dict[str, object]]], corpora: list[str], path: Path) -> None:
    """Spread over binomial at alpha = 1%, per corpus, one panel per statistic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = [r for r in PLOTTED if r in results] or list(results)
    kinds = [k for k in KINDS if k in results[rules[0]][corpora[0]]]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(11, 3.3 * len(kinds)), sharex=True)
    width = 0.8 / len(rules)
    for ax, kind in zip(np.atleast_1d(axes), kinds, strict=True):
        for j, rule in enumerate(rules):
            ys = [results[rule][c][kind]["0.01"]["spread_ratio"] for c in corpora]  # type: ignore[index]
            x = np.arange(len(corpora)) + (j - (len(rules) - 1) / 2) * width
            ax.bar(x, ys, width, label=PLOTTED.get(rule, rule), color=f"C{j}")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.axhline(1.1, color="black", lw=0.8, ls="--")
        ax.set_ylabel(f"{kind}\nsd / binomial sd")
        ax.set_ylim(0, 2.4)
    last = np.atleast_1d(axes)[-1]
    last.set_xticks(range(len(corpora)))
    labels = [
        c.replace("_", " ") + (" *" if TEST_CORPORA[c][3] == "unseen" else "") for c in corpora
    ]
    last.set_xticklabels(labels, fontsize=10)
    handles, names = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=3, fontsize=9, bbox_to_anchor=(0.5, 0.955))
    fig.suptitle(
        "Per-key spread of the count of human texts at p < 0.01, 200 keys "
        "(1 = binomial, dashed 1.1; * nothing fitted on the domain)",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
