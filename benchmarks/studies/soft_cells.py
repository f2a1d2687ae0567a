"""Soft cells at detection: does scoring each sentence on its nearest two keyed cells win
back what a paraphrase loses by moving a sentence out of its cell? (issue 44)

With keyed cells (``samark.schemes.samark.cells``) a sentence is scored on the pivots of
its nearest anchor's cell. A paraphrase that carries the sentence over a cell wall leaves
it on another cell's pivots, where it carries no mark (a back-translation stays in its
cell 77% of the time with 16 cells: ``cell_stability.py``). This study changes the
detection only, on a finished run's records (no generation): a sentence's flag-signed
cosines become the softmax-weighted mix, over its ``top`` nearest cells, of each cell's
(weights ``softmax(beta * cos(sentence, anchor))``); ``beta = inf`` is the shipped rule and
must reproduce the run's semantic p-values exactly (checked). The null cell draws get the
same rule, so every variant's p-value stays exact. The whole mark's p-value is Fisher's
combination (``combine_p_values``) of the new semantic p with the run's recorded token p.

    python benchmarks/studies/soft_cells.py experiments/runs/paper-cells --sentences 6 \\
        --betas inf 100 50 25 --out experiments/runs/paper-cells/soft-cells.jsonl

``--statistic z`` (or ``alignment``) scores the same texts with another semantic statistic
than the run's (``scan``), for the shipped rule and every beta alike.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from samark.evaluation.runner import Run
from samark.evaluation.stages.length import prefix
from samark.schemes.samark.cells import CellFrames, cell_evidence, null_cells
from samark.schemes.samark.layered import combine_p_values
from samark.schemes.samark.statistics import (
    STATISTICS,
    Statistic,
    exchangeable_p_value,
    statistic_values,
)
from samark.segment import split_sentences

ATTACKS = ("none", "Doc-P (local)", "Doc-T (pt, sentence-wise)")


def soft_signed(frames: CellFrames, emb: np.ndarray, beta: float, top: int) -> np.ndarray:
    """Flag-signed cosines (K, n, c) mixed over each sentence's ``top`` nearest cells with
    weights ``softmax(beta * anchor cosine)``; ``beta = inf`` or ``top = 1``: the nearest
    cell's alone (``CellFrames.signed``)."""
    if math.isinf(beta) or top == 1:
        return frames.signed(emb)
    k = frames.count
    x = emb.astype(np.float32)
    near = np.einsum("nd,kmd->knm", x, frames.anchors)  # (K, n, M)
    idx = np.argsort(-near, axis=2)[:, :, :top]  # (K, n, top)
    score = np.take_along_axis(near, idx, axis=2).astype(np.float64)
    w = np.exp(beta * (score - score[:, :, :1]))
    w /= w.sum(axis=2, keepdims=True)
    rows = np.arange(k)[:, None, None]
    piv = frames.pivots[rows, idx]  # (K, n, top, c, d)
    cos = np.einsum("nd,kntcd->kntc", x, piv)
    signed = cos * frames.flags[rows, idx]  # (K, n, top, c)
    return np.einsum("knt,kntc->knc", w, signed.astype(np.float64))


def semantic_p(
    key: CellFrames,
    nulls: CellFrames,
    emb: np.ndarray,
    beta: float,
    top: int,
    kappa: float,
    statistic: Statistic = "scan",
) -> float:
    signed = np.concatenate([soft_signed(key, emb, beta, top), soft_signed(nulls, emb, beta, top)])
    values = statistic_values(cell_evidence(signed, kappa), statistic)
    return exchangeable_p_value(float(values[0]), values[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--sentences", type=int, default=6)
    parser.add_argument("--betas", type=float, nargs="+", default=[math.inf, 100.0, 50.0, 25.0])
    parser.add_argument("--top", type=int, default=2)
    parser.add_argument("--negatives", type=int, default=1000)
    parser.add_argument(
        "--statistic",
        choices=STATISTICS,
        default="scan",
        help="the semantic statistic (run's: scan)",
    )
    parser.add_argument("--out")
    parser.add_argument("--table", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args()
    if args.table:
        table(Path(args.out))
        return
    run = Run.open(args.run_dir)
    spec = next(s for s in run.experiment.schemes if s.name == "samark-layered")
    scheme: Any = run.scheme(spec)
    det = scheme.detector
    assert det.key_cells is not None, "a run with keyed cells"
    k = args.sentences
    attacks = [a for a in run.experiment.attacks if a.label in ATTACKS]
    # (kind, item, attack, the run's token p, the run's record of the text at k sentences)
    items: list[tuple[str, str, str, float, dict[str, Any]]] = []
    texts: list[str] = []
    for item, attack, text in run.row_texts(spec, attacks):
        rec = run.lengths.get(run.keys.length(spec, item, attack, k))
        if rec is not None:
            items.append(("marked", item, attack, rec["details"]["p_token"], rec))
            texts.append(prefix(text, k))
    for doc in run.row_negatives(spec)[: args.negatives]:
        rec = run.lengths.get(run.keys.human_length(scheme.detector_id(), doc.id, k))
        if rec is not None:
            items.append(("human", doc.id, "none", rec["details"]["p_token"], rec))
            texts.append(prefix(doc.text, k))
    print(f"{len(items)} texts at {k} sentences", flush=True)
    start = time.perf_counter()
    sentences = [split_sentences(t) for t in texts]
    flat = [s for ss in sentences for s in ss]
    emb = run.embedder.encode(flat).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    print(f"embedded {len(flat)} sentences ({time.perf_counter() - start:.0f} s)", flush=True)
    law = scheme.key.samark.pivot_law(run.embedder.dim)  # the detector's null law
    nulls = null_cells(law, det.n_null, run.embedder.dim, det.cells, det.channels, det.null_seed)
    bounds = np.cumsum([0, *map(len, sentences)])
    out = Path(args.out) if args.out else None
    for beta in args.betas:
        rows = []
        mismatched = 0
        for i, (kind, item, attack, p_token, rec) in enumerate(items):
            e = emb[bounds[i] : bounds[i + 1]]
            p_sem = semantic_p(det.key_cells, nulls, e, beta, args.top, det.kappa, args.statistic)
            if (
                math.isinf(beta)
                and args.statistic == det.statistic
                and abs(p_sem - rec["details"]["p_semantic"]) > 1e-9
            ):
                mismatched += 1
            p = combine_p_values(p_sem, p_token, method=scheme.combine)
            rows.append(
                {
                    "beta": beta if math.isfinite(beta) else "inf",
                    "statistic": args.statistic,
                    "top": args.top,
                    "sentences": k,
                    "kind": kind,
                    "item": item,
                    "attack": attack,
                    "p_semantic": p_sem,
                    "p_token": p_token,
                    "p_value": p,
                }
            )
        if math.isinf(beta) and args.statistic == det.statistic:
            print(f"shipped rule: {mismatched} of {len(items)} semantic p differ from the run's")
        summarise(rows)
        print(f"({time.perf_counter() - start:.0f} s)", flush=True)
        if out:
            with out.open("a") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)


def summarise(rows: list[dict[str, Any]]) -> None:
    beta = rows[0]["beta"]
    human = [r for r in rows if r["kind"] == "human"]
    parts = [
        f"human FPR sem {100 * np.mean([r['p_semantic'] < 0.01 for r in human]):.1f} "
        f"whole {100 * np.mean([r['p_value'] < 0.01 for r in human]):.1f}"
    ]
    for attack in ATTACKS:
        sel = [r for r in rows if r["kind"] == "marked" and r["attack"] == attack]
        if sel:
            parts.append(
                f"{attack}: sem {100 * np.mean([r['p_semantic'] < 0.01 for r in sel]):.1f} "
                f"whole {100 * np.mean([r['p_value'] < 0.01 for r in sel]):.1f} (of {len(sel)})"
            )
    statistic = rows[0].get("statistic", "scan")
    print(f"{statistic}, beta {beta}, top {rows[0]['top']}: " + "; ".join(parts), flush=True)


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.open()]

    def group(r: dict[str, Any]) -> tuple[Any, ...]:
        return r["beta"], r["top"], r["sentences"], r.get("statistic", "scan")

    for key in dict.fromkeys(group(r) for r in rows):
        summarise([r for r in rows if group(r) == key])


if __name__ == "__main__":
    main()
