"""What topic centring costs in power, on a run's records: the share of a SAMark row's texts
(unattacked and under each attack) with p < 0.01, and TP@FP1% against the run's human
negatives, for each centring rule of benchmarks/studies/per_key_fpr.py. A samark-layered row also
gets its one p-value ("layered": the centred scan and the token layer, Fisher).

The texts were generated without centring (Alg. 1 selects on raw cosines); centring is
applied at detection only, to the key and the null sets alike.

    python -m benchmarks.studies.centring_power experiments/runs/paper --rows SAMark \\
        --rules none neighbours-16 "own mean" --out docs/results/2026-11-26-per-key-fpr/power.json

``--negatives 0`` skips TP@FP1% (no human text to embed); embeddings are cached
(benchmarks/studies/detection_statistics.py's cache).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.studies.detection_statistics import EmbeddingCache
from benchmarks.studies.per_key_fpr import centring, reference_means
from samark.evaluation.detection_metrics import evidence, tpr_at_fpr
from samark.evaluation.runner import Run
from samark.schemes.samark.layered import SAMarkLayered, combine_p_values
from samark.schemes.samark.statistics import alignment, channel_responses, statistic_values
from samark.segment import split_sentences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--rows", nargs="+", default=["SAMark"])
    ap.add_argument("--rules", nargs="+", default=["none", "neighbours-16", "own mean"])
    ap.add_argument("--statistics", nargs="+", default=["z", "scan"])
    ap.add_argument("--negatives", type=int, default=1000, help="human negatives for TP@FP1%%")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/samark/research")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    run = Run.open(args.run)
    embedder, key = run.embedder, run.key
    frames = np.concatenate(
        [key.samark.pivots(embedder.dim, 2)[None], key.samark.null_pivots(999, embedder.dim, 2, 0)]
    )
    cache = EmbeddingCache(args.cache / f"{embedder.name}.npz", embedder)
    paper = EmbeddingCache(args.cache / "paper-mpnet.npz", embedder)
    cache.table.update(paper.table)

    texts: list[tuple[str, str, list[str]]] = []  # (row, column, sentences)
    token_p: dict[tuple[str, str, int], float] = {}  # the layered rows' token layer
    layered = _layered(run) if any(_is_layered(run, r) for r in args.rows) else None
    for row in args.rows:
        found = [("none", g["text"]) for g in run.generations.records() if g.get("scheme") == row]
        found += [(a["attack"], a["text"]) for a in run.attacks.records() if a.get("scheme") == row]
        for col, text in found:
            if layered is not None and _is_layered(run, row):
                n = sum(1 for r, c, _ in texts if (r, c) == (row, col))
                token_p[(row, col, n)] = layered.token_layer.score(layered.token_ids(text)).p_value
            texts.append((row, col, split_sentences(text)))
    texts += [
        ("human", "human", split_sentences(d.text)) for d in run.negatives()[: args.negatives]
    ]
    cache.fill([s for _, _, ss in texts for s in ss])
    ref = (
        reference_means(embedder.name)
        if any(r.startswith("neighbours-") for r in args.rules)
        else None
    )
    own = _operator_reference(run) if any(r.startswith("operator ") for r in args.rules) else None

    results: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for rule in args.rules:
        centre = _rule(rule, own if rule.startswith("operator ") else ref)
        p: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for row, col, sents in texts:
            n = seen[(row, col)]
            seen[(row, col)] += 1
            if not sents:
                continue
            ev = alignment(channel_responses(centre(cache.get(sents)), frames), 30.0)
            for s in {*args.statistics, "scan"}:
                v = np.nan_to_num(statistic_values(ev, s), nan=0.0, posinf=1e9)
                pv = float((1 + np.count_nonzero(v[1:] >= v[0] - 1e-12)) / v.size)
                if s in args.statistics:
                    p[(row, col, s)].append((pv, float(v[0])))
                if s == "scan" and (row, col, n) in token_p:
                    both = combine_p_values(pv, token_p[(row, col, n)])
                    p[(row, col, "layered")].append((both, -both))
        results[rule] = {}
        for (row, col, s), vals in sorted(p.items()):
            if row == "human":
                continue
            pos = np.array(vals)
            cell = {"p<0.01": float(np.mean(pos[:, 0] < 0.01)), "n": len(vals)}
            neg = np.array(p.get(("human", "human", s), []))
            if len(neg):
                cell["tp@fp1%"] = tpr_at_fpr(
                    evidence(neg[:, 0], neg[:, 1]), evidence(pos[:, 0], pos[:, 1]), 0.01
                )
                cell["human_fpr"] = float(np.mean(neg[:, 0] < 0.01))
            results[rule].setdefault(f"{row} / {s}", {})[col] = cell
    columns = sorted(
        {c for r in results.values() for cols in r.values() for c in cols},
        key=lambda c: (c != "none", c),
    )
    print("p < 0.01 rate (TP@FP1%), % -- rows: rule / statistic")
    print(f"{'':32}" + "".join(f"{c[:14]:>16}" for c in columns))
    for rule, rows in results.items():
        for name, cols in rows.items():
            cells = []
            for c in columns:
                cell = cols.get(c)
                if cell is None:
                    cells.append(f"{'-':>16}")
                    continue
                tp = f" ({100 * cell['tp@fp1%']:.0f})" if "tp@fp1%" in cell else ""
                cells.append(f"{100 * cell['p<0.01']:>10.1f}{tp:>6}")
            print(f"{rule + ' / ' + name:32}" + "".join(cells))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"run": str(args.run), "results": results}, indent=1) + "\n")


def _is_layered(run: Run, row: str) -> bool:
    return any(s.label == row and s.name == "samark-layered" for s in run.experiment.schemes)


def _layered(run: Run) -> SAMarkLayered:
    from samark.schemes import create_scheme

    scheme = create_scheme("samark-layered", key=run.key, embedder=run.embedder)
    assert isinstance(scheme, SAMarkLayered)
    return scheme


def _operator_reference(run: Run) -> np.ndarray:
    """An operator's own human traffic, simulated: the first 10 sentences of the
    CNN/DailyMail articles that none of the run's prompts came from."""
    from benchmarks.studies.per_key_corpora import embed_cached, test_texts
    from samark.datasets import load_dataset
    from samark.embed import load_embedder

    prompts = {e.id for e in run.examples()}
    texts = test_texts("cnn_dailymail")
    kept = [d.id for d in load_dataset("cnn_dailymail") if len(split_sentences(d.text)[:10]) >= 3]
    kept = kept[: len(texts)]  # the test texts: the first 200 such articles
    vectors = embed_cached(load_embedder("all-mpnet-base-v2"), "cnn_dailymail", texts)
    means = [v.mean(axis=0) for doc, v in zip(kept, vectors, strict=True) if doc not in prompts]
    print(f"operator reference: {len(means)} news articles no prompt came from", flush=True)
    return np.array(means)


def _rule(rule: str, ref: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    """A text's centring by ``rule`` (benchmarks/studies/per_key_fpr.py's rules, with "operator
    " before one whose reference is the operator's text); a corpus rule needs a corpus."""
    rule = rule.removeprefix("operator ")
    if rule.startswith("corpus"):
        raise SystemExit(f"unknown rule {rule!r}: corpus rules need a test corpus")
    centre = centring(rule, np.empty((0, 0)) if ref is None else ref, [])
    return lambda e: centre(0, e)


if __name__ == "__main__":
    main()
