"""Tables (markdown in the paper's layout + CSV) and plots (PNG) for a run folder."""

from __future__ import annotations

import functools
import math
import platform
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from samark.evaluation.detection_metrics import (
    auc,
    bootstrap_interval,
    evidence,
    rate_below,
    tpr_at_fpr,
)
from samark.evaluation.runner import NO_ATTACK, Run


def _pct(x: float) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _num(x: float, digits: int = 2) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _tpr(negatives: np.ndarray, positives: np.ndarray, fpr: float) -> float:
    return tpr_at_fpr(negatives, positives, fpr)


def detection_table(run: Run) -> pd.DataFrame:
    """One row per (scheme, attack): TP@FP, AUC with bootstrap CIs, calibrated rates."""
    exp = run.experiment
    det = pd.DataFrame(list(run.detections.records()))
    rows: list[dict[str, Any]] = []
    if det.empty:
        return pd.DataFrame(rows)
    alpha = 0.01
    for spec in exp.schemes:
        mine = det[det["scheme"] == spec.label]
        if mine.empty:
            continue
        detector = mine["detector"].iloc[0]
        humans = det[(det["scheme"] == "human") & (det["detector"] == detector)]
        neg = evidence(humans["p_value"], humans["z"])
        for attack in [NO_ATTACK, *[a.label for a in exp.attacks]]:
            sub = mine[mine["attack"] == attack]
            if sub.empty:
                continue
            pos = evidence(sub["p_value"], sub["z"])
            row: dict[str, Any] = {
                "scheme": spec.label,
                "attack": attack,
                "n_positive": len(pos),
                "n_negative": len(neg),
                "auc": auc(neg, pos),
                "tpr_at_p_0.01": rate_below(sub["p_value"], alpha),
                "human_fpr_at_p_0.01": rate_below(humans["p_value"], alpha),
            }
            lo, hi = bootstrap_interval(neg, pos, auc, samples=exp.metrics.bootstrap)
            row["auc_lo"], row["auc_hi"] = lo, hi
            for fpr in exp.metrics.fprs:
                tag = f"tp@fp{100 * fpr:g}%"
                row[tag] = tpr_at_fpr(neg, pos, fpr)
                lo, hi = bootstrap_interval(
                    neg, pos, functools.partial(_tpr, fpr=fpr), samples=exp.metrics.bootstrap
                )
                row[f"{tag}_lo"], row[f"{tag}_hi"] = lo, hi
            rows.append(row)
    return pd.DataFrame(rows)


def quality_table(run: Run) -> pd.DataFrame:
    exp = run.experiment
    recs = list(run.quality.records())
    per_text = pd.DataFrame([r for r in recs if r["key"][0] == "quality"])
    judged = [r for r in recs if r["key"][0] == "judge"]
    # one blind ranking per item: the one over the most rows (a partial run ranks fewer)
    best: dict[str, dict[str, Any]] = {}
    for r in recs:
        seen = len(best.get(r.get("item", ""), {}).get("ranks", {}))
        if r["key"][0] == "rank" and r.get("ranks") and len(r["ranks"]) > seen:
            best[r["item"]] = r
    ranked = list(best.values())
    rows = []
    for spec in exp.schemes:
        row: dict[str, Any] = {"scheme": spec.label}
        if not per_text.empty:
            sub = per_text[per_text["scheme"] == spec.label]
            row["n"] = len(sub)
            for m in ("sd", "distinct2", "rep4", "perplexity"):
                if m in sub:
                    row[m] = float(sub[m].mean())
        outcomes = [r["pairwise"] for r in judged if r["scheme"] == spec.label]
        valid = [o for o in outcomes if o]
        if outcomes:
            for o in ("win", "lose", "tie"):
                row[o] = valid.count(o) / len(valid) if valid else float("nan")
            row["judged"] = len(valid)
            row["judge_invalid"] = len(outcomes) - len(valid)
        ranks = [r["ranks"][spec.label] for r in ranked if spec.label in r["ranks"]]
        if ranks:
            row["avg_rank"] = float(np.mean(ranks))
        rows.append(row)
    df = pd.DataFrame(rows)
    ref = next((s.label for s in exp.schemes if s.name == "unwatermarked"), None)
    if ref is not None and "avg_rank" in df:
        base = df.loc[df["scheme"] == ref, "avg_rank"]
        if len(base) and math.isfinite(base.iloc[0]):
            df["avg_rank_delta"] = df["avg_rank"] - base.iloc[0]
    return df


def _judge_method(run: Run) -> str:
    """How the pairwise verdicts were reached, and how often the judge chose position A."""
    recs = [r for r in run.quality.records() if r["key"][0] == "judge"]
    positions = [p for r in recs for p in r.get("positions") or [] if p in ("A", "B")]
    if not recs:
        return ""
    local = any("logprobs" in r for r in recs)
    text = (
        "The local judge answers by likelihood in both A/B orders; a win or a loss needs both "
        "orders to agree, anything else is a tie; it does not rank (AvgRank needs an endpoint)."
        if local
        else "One blind judgement per text, A/B order drawn at random (the paper's protocol)."
    )
    if positions:
        share = positions.count("A") / len(positions)
        text += f" The judge chose position A in {100 * share:.0f}% of its verdicts."
    return text


def efficiency_table(run: Run) -> pd.DataFrame:
    exp = run.experiment
    gens = pd.DataFrame(list(run.generations.records()))
    det = pd.DataFrame(list(run.detections.records()))
    rows = []
    for spec in exp.schemes:
        if gens.empty:
            break
        sub = gens[gens["scheme"] == spec.label]
        if sub.empty:
            continue
        sentences = sub["sentences"].map(len).sum()
        out_tokens = sub["output_tokens"].sum()
        row = {
            "scheme": spec.label,
            "texts": len(sub),
            "s_per_sentence": sub["seconds"].sum() / max(sentences, 1),
            "s_per_token": sub["seconds"].sum() / max(out_tokens, 1),
            "tok_per_out": sub["tokens_sampled"].sum() / max(out_tokens, 1),
            "tokens_per_sentence": sub["tokens_sampled"].sum() / max(sentences, 1),
        }
        if not det.empty:
            d = det[det["scheme"] == spec.label]
            if len(d):
                row["detect_ms_per_text"] = 1000 * d["seconds"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def attack_table(run: Run) -> pd.DataFrame:
    att = pd.DataFrame(list(run.attacks.records()))
    if att.empty:
        return att
    return (
        att.groupby("attack", sort=False)[["similarity", "overlap", "seconds"]].mean().reset_index()
    )


def _markdown(
    run: Run, det: pd.DataFrame, qual: pd.DataFrame, eff: pd.DataFrame, att: pd.DataFrame
) -> str:
    exp = run.experiment
    lines = [f"# Experiment `{exp.name}`", ""]
    lines += [
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}.",
        f"Data: `{exp.dataset.name}`, {exp.dataset.sentences} sentences per text; "
        f"generator `{exp.generator}`; SAMark embedder `{exp.embedder}`.",
        "",
    ]
    if not det.empty:
        fprs = [f"tp@fp{100 * f:g}%" for f in exp.metrics.fprs]
        n_neg = int(det["n_negative"].max())
        lines += [
            "## Detection: TP@FP1% / TP@FP5% / AUC (%)",
            "",
            f"Empirical thresholds on {n_neg} human texts: FP 1% rests on about "
            f"{max(n_neg // 100, 1)} of them, so the 1% column is coarse (95% bootstrap "
            "intervals in `detection.csv`). n = watermarked texts per cell.",
            "",
        ]
        attacks = [
            a for a in [NO_ATTACK, *[a.label for a in exp.attacks]] if a in set(det["attack"])
        ]
        lines.append("| scheme | " + " | ".join(attacks) + " |")
        lines.append("|---" * (len(attacks) + 1) + "|")
        for scheme, sub in det.groupby("scheme", sort=False):
            cells = []
            for a in attacks:
                r = sub[sub["attack"] == a]
                if r.empty:
                    cells.append("")
                    continue
                r0 = r.iloc[0]
                cells.append(
                    "/".join(_pct(r0[f]) for f in fprs)
                    + f"/{_pct(r0['auc'])} (n={r0['n_positive']})"
                )
            lines.append(f"| {scheme} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "## Calibrated decision p < 0.01",
            "",
            "The fixed rule every detector ships: its false-positive rate measured on the human "
            "texts, and the share of texts it flags.",
            "",
            "| scheme | human FPR | " + " | ".join(attacks) + " |",
            "|---" * (len(attacks) + 2) + "|",
        ]
        for scheme, sub in det.groupby("scheme", sort=False):
            cells = []
            for a in attacks:
                r = sub[sub["attack"] == a]
                cells.append(_pct(r.iloc[0]["tpr_at_p_0.01"]) if len(r) else "")
            lines.append(
                f"| {scheme} | {_pct(sub.iloc[0]['human_fpr_at_p_0.01'])} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    if not qual.empty:
        judge = exp.metrics.judge or "local"
        lines += [
            "## Quality",
            "",
            "SD% and 4g% (lower is better), D-2 (higher is better) as the paper's appendix "
            f"defines them; PPL under `{exp.metrics.oracle}`; judge: `{judge}`"
            + (" (a 135M model: a weak judge, read it as a smoke test)" if judge == "local" else "")
            + ". "
            + _judge_method(run),
            "",
            "| scheme | n | SD% | D-2 | 4g% | PPL | W/L/T % (judged) | AvgRank (Δ) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for _, r in qual.iterrows():
            wlt = "/".join(_pct(r.get(k, float("nan"))) for k in ("win", "lose", "tie"))
            judged = r.get("judged", float("nan"))
            if math.isfinite(judged):
                wlt += f" ({int(judged)})"
            rank = _num(r.get("avg_rank", float("nan")))
            if math.isfinite(r.get("avg_rank_delta", float("nan"))):
                rank += f" ({r['avg_rank_delta']:+.2f})"
            nan = float("nan")
            cells = [
                str(int(r.get("n", 0) or 0)),
                _num(r.get("sd", nan)),
                _num(r.get("distinct2", nan), 3),
                _num(r.get("rep4", nan)),
                _num(r.get("perplexity", nan), 1),
                wlt,
                rank,
            ]
            lines.append(f"| {r['scheme']} | " + " | ".join(cells) + " |")
        lines.append("")
    if not eff.empty:
        lines += [
            "## Efficiency",
            "",
            "| scheme | texts | s/sentence | s/token | Tok/Out | tokens/sentence "
            "| detect ms/text |",
            "|---|---|---|---|---|---|---|",
        ]
        for _, r in eff.iterrows():
            lines.append(
                f"| {r['scheme']} | {r['texts']} | {_num(r['s_per_sentence'], 1)} | "
                f"{_num(r['s_per_token'], 3)} | {_num(r['tok_per_out'], 1)} | "
                f"{_num(r['tokens_per_sentence'], 0)} | "
                f"{_num(r.get('detect_ms_per_text', float('nan')), 0)} |"
            )
        lines.append("")
    if not att.empty:
        lines += [
            "## Attack strength",
            "",
            "Similarity: cosine between original and attacked text under an embedder other "
            "than SAMark's; overlap: share of the original's words kept.",
            "",
            "| attack | similarity | word overlap | s/text |",
            "|---|---|---|---|",
        ]
        for _, r in att.iterrows():
            lines.append(
                f"| {r['attack']} | {_num(r['similarity'], 3)} | {_num(r['overlap'], 3)} "
                f"| {_num(r['seconds'], 2)} |"
            )
        lines.append("")
    lines += ["Plots: `roc.png`, `scores.png`, `tradeoff.png`.", ""]
    return "\n".join(lines)


def _plots(run: Run, det: pd.DataFrame, qual: pd.DataFrame, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp = run.experiment
    records = pd.DataFrame(list(run.detections.records()))
    if records.empty:
        return
    schemes = [s for s in exp.schemes if (records["scheme"] == s.label).any()]
    if not schemes:
        return
    attacks = [NO_ATTACK, *[a.label for a in exp.attacks]]
    # ROC per scheme
    fig, axes = plt.subplots(1, len(schemes), figsize=(4 * len(schemes), 4), squeeze=False)
    for ax, spec in zip(axes[0], schemes, strict=True):
        mine = records[records["scheme"] == spec.label]
        humans = records[
            (records["scheme"] == "human") & (records["detector"] == mine["detector"].iloc[0])
        ]
        neg = evidence(humans["p_value"], humans["z"])
        for a in attacks:
            sub = mine[mine["attack"] == a]
            if sub.empty:
                continue
            pos = evidence(sub["p_value"], sub["z"])
            thr = np.unique(np.concatenate([neg, pos, [np.inf]]))[::-1]
            fpr = [(neg >= t).mean() for t in thr]
            tpr = [(pos >= t).mean() for t in thr]
            ax.plot(fpr, tpr, label=a, lw=1)
        ax.plot([0, 1], [0, 1], "k:", lw=0.5)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_title(spec.label)
        ax.set_xlabel("FPR (human)")
        ax.set_ylabel("TPR")
    axes[0][-1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(folder / "roc.png", dpi=120)
    plt.close(fig)
    # score distributions: human / watermarked / attacked
    fig, axes = plt.subplots(1, len(schemes), figsize=(4 * len(schemes), 3.5), squeeze=False)
    for ax, spec in zip(axes[0], schemes, strict=True):
        mine = records[records["scheme"] == spec.label]
        humans = records[
            (records["scheme"] == "human") & (records["detector"] == mine["detector"].iloc[0])
        ]
        groups = {
            "human": humans,
            "watermarked": mine[mine["attack"] == NO_ATTACK],
            "attacked": mine[mine["attack"] != NO_ATTACK],
        }
        for name, g in groups.items():
            if len(g):
                ax.hist(
                    np.asarray(g["z"], dtype=float), bins=30, alpha=0.5, density=True, label=name
                )
        ax.set_title(spec.label)
        ax.set_xlabel("detector z")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "scores.png", dpi=120)
    plt.close(fig)
    # robustness-quality trade-off
    if not det.empty and not qual.empty and "distinct2" in qual:
        hardest = (
            next((a.label for a in reversed(exp.attacks) if a.name == "doc-p"), None) or NO_ATTACK
        )
        fig, ax = plt.subplots(figsize=(5, 4))
        for _, q in qual.iterrows():
            d = det[(det["scheme"] == q["scheme"]) & (det["attack"] == hardest)]
            if len(d) and math.isfinite(q["distinct2"]):
                x, y = q["distinct2"], 100 * d.iloc[0]["tp@fp1%"]
                ax.scatter([x], [y])
                ax.annotate(q["scheme"], (x, y), fontsize=7)
        ax.set_xlabel("Distinct-2 (quality)")
        ax.set_ylabel(f"TP@FP1% under {hardest}")
        fig.tight_layout()
        fig.savefig(folder / "tradeoff.png", dpi=120)
        plt.close(fig)


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the tables and plots into ``out_dir`` (default: ``report/`` inside the run
    folder); returns the markdown file."""
    run_dir = Path(run_dir)
    run = Run.open(run_dir)
    folder = Path(out_dir) if out_dir is not None else run_dir / "report"
    folder.mkdir(parents=True, exist_ok=True)
    det, qual = detection_table(run), quality_table(run)
    eff, att = efficiency_table(run), attack_table(run)
    for name, df in (("detection", det), ("quality", qual), ("efficiency", eff), ("attacks", att)):
        df.to_csv(folder / f"{name}.csv", index=False)
    md = folder / "report.md"
    md.write_text(_markdown(run, det, qual, eff, att), encoding="utf-8")
    _plots(run, det, qual, folder)
    return md


__all__ = ["detection_table", "efficiency_table", "quality_table", "write_report"]
