"""Which detection statistic separates SAMark text from human text best, on a run's records.

Every statistic here is a function of a text's sentence embeddings and one pivot set, so
its exchangeability p-value (rank of the key's value among ``--nulls`` public Haar pivot
sets) is exact for each of them; what differs is power. For each statistic and each attack
column of ``--scheme`` the script prints TP@FP1% (empirical threshold from the run's human
negatives, ranked by p with ties broken by the statistic), the share with p < 0.01, and the
human FPR at p < 0.01. ``--lengths`` also scores the first k sentences of the unattacked
texts and of the human negatives (power against length). Sentence embeddings are cached.

    python benchmarks/studies/detection_statistics.py experiments/runs/paper --scheme SAMark \
        --out docs/results/detection-statistics.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from samark.embed import Embedder
from samark.evaluation.detection_metrics import evidence, tpr_at_fpr
from samark.evaluation.runner import Run
from samark.schemes.samark.statistics import (
    STATISTICS,
    alignment,
    channel_responses,
    exchangeable_p_value,
    mean_alignment,
    scan,
    scan_subset,
    sentence_p_values,
    statistic_values,
)
from samark.segment import split_sentences

StatFn = Callable[[np.ndarray], np.ndarray]
KAPPA = 30.0  # the detection kappa of the run's SAMark rows (the paper's)


def _research_statistics() -> dict[str, StatFn]:
    """Candidates not (yet) in the library, each (K, n, c) responses -> (K,)."""

    def offset(r: np.ndarray) -> np.ndarray:
        return np.abs(r.mean(axis=1)).sum(axis=1)

    def offset_min(r: np.ndarray) -> np.ndarray:
        return np.abs(r.mean(axis=1)).min(axis=1)

    def sign_share(r: np.ndarray) -> np.ndarray:
        return (alignment(r, 1.0, use_tanh=False) > 0).mean(axis=(1, 2))

    def alignment_k(kappa: float) -> StatFn:
        return lambda r: mean_alignment(alignment(r, kappa))

    def scan_by_mean(min_share: float, kappa: float | None = KAPPA) -> StatFn:
        """The library's scan with a sentence scored by its mean over channels (one
        channel of mean evidence) instead of its weakest channel; no tanh if no kappa."""

        def f(r: np.ndarray) -> np.ndarray:
            ev = alignment(r, kappa or 1.0, use_tanh=kappa is not None)
            return scan(ev.mean(axis=2, keepdims=True), min_share)

        return f

    out: dict[str, StatFn] = {
        # the library's "scan" scores a sentence by its weakest channel; these by the mean
        "scan_mean": scan_by_mean(0.25),
        "scan_mean40": scan_by_mean(0.40),
        "scan_mean_k10": scan_by_mean(0.25, 10.0),
        "scan_min50": lambda r: scan(alignment(r, KAPPA), 0.50),
        "offset": offset,
        "offset_min": offset_min,
        "sign_share": sign_share,
        "alignment_k10": alignment_k(10.0),
        "alignment_k60": alignment_k(60.0),
    }
    for name in STATISTICS:
        out[name] = lambda r, name=name: statistic_values(alignment(r, KAPPA), name)  # type: ignore[misc]
    return out


class EmbeddingCache:
    """Sentence embeddings kept in one .npz across runs, keyed by the sentence's SHA-1."""

    def __init__(self, path: Path, embedder: Embedder) -> None:
        self.path = path
        self.embedder = embedder
        self.table: dict[str, np.ndarray] = {}
        if path.exists():
            data = np.load(path)
            self.table = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    @staticmethod
    def _h(s: str) -> str:
        return hashlib.sha1(s.encode()).hexdigest()

    def fill(self, sentences: list[str]) -> None:
        todo = sorted({s for s in sentences if self._h(s) not in self.table})
        for i in range(0, len(todo), 256):
            chunk = todo[i : i + 256]
            for s, v in zip(chunk, self.embedder.encode(chunk), strict=True):
                self.table[self._h(s)] = v.astype(np.float32)
            print(f"  embedded {min(i + 256, len(todo))}/{len(todo)}", flush=True)
        if todo:
            keys = np.array(list(self.table))
            np.savez(self.path, keys=keys, vectors=np.stack([self.table[k] for k in keys]))

    def get(self, sentences: list[str]) -> np.ndarray:
        return np.stack([self.table[self._h(s)] for s in sentences]).astype(np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--scheme", default="SAMark")
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--nulls", type=int, default=999)
    ap.add_argument("--lengths", type=int, nargs="*", default=[])
    ap.add_argument(
        "--length-columns",
        nargs="*",
        default=["none", "Doc-P (local)"],
        help="attack columns whose first k sentences are scored at each of --lengths",
    )
    ap.add_argument("--plot", type=Path, default=None, help="PNG: power against length")
    ap.add_argument(
        "--prompt-range",
        type=int,
        nargs=2,
        default=None,
        metavar=("START", "STOP"),
        help="score only the texts of these prompts (0-based slice of the run's prompts): "
        "choose on one range, confirm on another",
    )
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/samark/research")
    ap.add_argument("--only", nargs="*", default=None, help="statistics to score")
    ap.add_argument("--out", type=Path, default=None, help="JSONL of per-text p-values")
    args = ap.parse_args()

    run = Run.open(args.run)
    embedder = run.embedder
    key = run.key
    dim, c = embedder.dim, args.channels
    pivots = np.concatenate(
        [key.samark.pivots(dim, c)[None], key.samark.null_pivots(args.nulls, dim, c, 0)], axis=0
    )
    stats = _research_statistics()
    if args.only:
        stats = {k: v for k, v in stats.items() if k in args.only}

    texts: list[tuple[str, str, str]] = []  # (column, item, text)
    for doc in run.negatives():
        texts.append(("human", doc.id, doc.text))
    examples = run.examples()
    first_prompt, stop_prompt = args.prompt_range or (0, len(examples))
    allowed = {e.id for e in examples[first_prompt:stop_prompt]}
    for g in run.generations.records():
        if g.get("scheme") == args.scheme and g["text"].strip() and g["item"] in allowed:
            texts.append(("none", g["item"], g["text"]))
    for a in run.attacks.records():
        if a.get("scheme") == args.scheme and a["item"] in allowed:
            texts.append((a["attack"], a["item"], a["text"]))
    split = [(col, item, split_sentences(t)) for col, item, t in texts]
    rows: list[tuple[str, str, list[str]]] = [r for r in split if r[2]]
    # power against length: the first k sentences of human and unattacked texts; an attack
    # column attacks the unattacked text's first k sentences afresh (same attack, seed 0)
    specs = {a.label: a for a in run.experiment.attacks}
    for k in args.lengths:
        for col, item, sents in split:
            if len(sents) < k:
                continue
            if col == "human" or (col == "none" and "none" in args.length_columns):
                rows.append((f"{col}@{k}", item, sents[:k]))
            if col == "none":
                for label in args.length_columns:
                    if label in specs:
                        attacked = run.attacker(specs[label]).apply(" ".join(sents[:k]), seed=0)
                        rows.append((f"{label}@{k}", item, split_sentences(attacked)))

    args.cache.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(args.cache / f"{embedder.name}.npz", embedder)
    cache.fill([s for _, _, sents in rows for s in sents])

    start = time.perf_counter()
    results: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    marked = {
        g["item"]: set(split_sentences(g["text"]))
        for g in run.generations.records()
        if g.get("scheme") == args.scheme
    }
    local: dict[str, list[tuple[np.ndarray, ...]]] = defaultdict(list)
    out = args.out.open("w") if args.out else None
    for col, item, sents in rows:
        r = channel_responses(cache.get(sents), pivots)
        rec: dict[str, object] = {"column": col, "item": item, "n": len(sents)}
        if col == "human" or col.startswith("Mix"):
            ev = alignment(r, KAPPA)
            truth = np.array([s in marked.get(item, ()) for s in sents])
            local[col].append((truth, sentence_p_values(ev), scan_subset(ev)))
        for name, fn in stats.items():
            v = np.nan_to_num(fn(r), nan=0.0, posinf=1e9)
            p = exchangeable_p_value(float(v[0]), v[1:])
            results[name][col].append((p, float(v[0])))
            rec[name] = float(p)
        if out:
            out.write(json.dumps(rec) + "\n")
    if out:
        out.close()
    took = time.perf_counter() - start
    print(f"scored {len(rows)} texts x {len(stats)} statistics in {took:.0f} s")
    _print_localisation(local)

    if args.plot and args.lengths:
        _plot_lengths(results, args.lengths, args.length_columns, args.plot)
    first = results[next(iter(stats))]
    columns = [c for c in first if c != "human" and not c.startswith("human@")]
    for col in columns:
        human_col = f"human@{col.split('@')[1]}" if "@" in col else "human"
        print(f"\n## {col} (n={len(results[next(iter(stats))][col])}, humans {human_col})")
        print(f"{'statistic':<22} {'TP@FP1%':>8} {'p<0.01':>8} {'human FPR':>10}")
        for name in stats:
            tp, rule = _rates(results, name, col, human_col)
            fpr = np.mean(np.array(results[name][human_col])[:, 0] < 0.01)
            print(f"{name:<22} {tp:>8.2f} {rule:>8.2f} {fpr:>10.3f}")


def _rates(
    results: dict[str, dict[str, list[tuple[float, float]]]], name: str, col: str, human: str
) -> tuple[float, float]:
    neg, pos = np.array(results[name][human]), np.array(results[name][col])
    ne, po = evidence(neg[:, 0], neg[:, 1]), evidence(pos[:, 0], pos[:, 1])
    return tpr_at_fpr(ne, po, 0.01), float(np.mean(pos[:, 0] < 0.01))


def _plot_lengths(
    results: dict[str, dict[str, list[tuple[float, float]]]],
    lengths: list[int],
    columns: list[str],
    path: Path,
) -> None:
    """TP@FP1% (solid) and the p < 0.01 rate (dashed) against the number of sentences."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in ("z", "alignment", "scan") if n in results]
    fig, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns), 3.8), sharey=True)
    for ax, col in zip(np.atleast_1d(axes), columns, strict=True):
        for i, name in enumerate(names):
            xs, tp, rule = [], [], []
            for k in sorted(lengths):
                if results[name].get(f"{col}@{k}") and results[name].get(f"human@{k}"):
                    a, b = _rates(results, name, f"{col}@{k}", f"human@{k}")
                    xs.append(k)
                    tp.append(100 * a)
                    rule.append(100 * b)
            colour = f"C{i}"
            ax.plot(xs, tp, "-o", color=colour, label=f"{name}: TP@FP1%")
            ax.plot(xs, rule, "--", color=colour, label=f"{name}: p < 0.01")
        n = len(results[names[0]].get(f"{col}@{max(lengths)}", []))
        ax.set_title(f"{col} (first k sentences, n={n})")
        ax.set_xlabel("sentences scored")
        ax.set_xticks(sorted(lengths))
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("% of texts")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(names), fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def _print_localisation(
    local: dict[str, list[tuple[np.ndarray, ...]]],
) -> None:
    """Which sentences carry the mark: precision and recall of per-sentence p < alpha and
    of the scan's subset, against the sentences the attack took from the marked text."""
    print("\n## localisation (sentences)")
    print(f"{'column':<12} {'rule':<10} {'precision':>9} {'recall':>7} {'flagged':>8}")
    for col, items in local.items():
        truth, pvals, subset = (np.concatenate(x) for x in zip(*items, strict=True))
        rules = {f"p<{a}": pvals < a for a in (0.01, 0.05, 0.1)}
        rules["scan set"] = subset
        for name, flagged in rules.items():
            hit = np.count_nonzero(flagged & truth)
            prec = hit / max(1, int(np.count_nonzero(flagged)))
            rec = hit / max(1, int(np.count_nonzero(truth)))
            print(f"{col:<12} {name:<10} {prec:>9.2f} {rec:>7.2f} {flagged.mean():>8.3f}")


if __name__ == "__main__":
    main()
