"""The report's plots (PNG): ROC curves, p-value and statistic histograms, the
robustness-quality trade-off and power against length."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from samark.evaluation.attacks.base import attack_is_paraphrase
from samark.evaluation.detection_metrics import (
    evidence,
)
from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.report_tables import fpr_tag, human_records, unfaithful_attacks
from samark.evaluation.runner import Run


def _attack_styles(attacks: list[str]) -> dict[str, dict[str, Any]]:
    """A distinct (colour, line style) per attack, however many there are."""
    import matplotlib

    tab10 = matplotlib.colormaps["tab10"]
    colours = [tab10(i) for i in range(10)]
    dashes = ["-", "--", "-.", ":"]
    return {
        a: {"color": colours[i % len(colours)], "linestyle": dashes[(i // len(colours)) % 4]}
        for i, a in enumerate(attacks)
    }


def _symlog_values(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log10(1 + np.abs(x))


def write_plots(
    run: Run, det: pd.DataFrame, qual: pd.DataFrame, att: pd.DataFrame, folder: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp = run.experiment
    records = pd.DataFrame(run.current_records(run.detections))
    if records.empty:
        return
    schemes = [s for s in exp.schemes if (records["scheme"] == s.label).any()]
    if not schemes:
        return
    attacks = [NO_ATTACK, *[a.label for a in exp.attacks]]
    humans_of = {
        spec.label: human_records(
            run, records, records.loc[records["scheme"] == spec.label, "detector"].iloc[0]
        )
        for spec in schemes
    }
    # ROC per scheme: one colour and line style per attack, one legend for all panels
    styles = _attack_styles(attacks)
    fig, axes = plt.subplots(
        1, len(schemes), figsize=(3.6 * len(schemes) + 2.4, 3.8), squeeze=False
    )
    for ax, spec in zip(axes[0], schemes, strict=True):
        mine = records[records["scheme"] == spec.label]
        humans = humans_of[spec.label]
        neg = evidence(humans["p_value"], humans["z"])
        for a in attacks:
            sub = mine[mine["attack"] == a]
            if sub.empty or not len(neg):
                continue
            pos = evidence(sub["p_value"], sub["z"])
            thr = np.unique(np.concatenate([neg, pos, [np.inf]]))[::-1]
            fpr = [(neg >= t).mean() for t in thr]
            tpr = [(pos >= t).mean() for t in thr]
            ax.plot(fpr, tpr, label=a, lw=1.2, **styles[a])
        ax.plot([0, 1], [0, 1], "k:", lw=0.5)
        ax.axvline(exp.metrics.fprs[0], color="0.6", lw=0.6)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlim(0, 1)
        ax.set_title(spec.label)
        ax.set_xlabel("FPR on human text (symlog)")
        ax.set_ylabel("TPR")
    handles = {
        h.get_label(): h for ax in axes[0] for h in ax.get_lines() if h.get_label() in styles
    }
    fig.legend(
        [handles[a] for a in attacks if a in handles],
        [a for a in attacks if a in handles],
        loc="center right",
        fontsize=7,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0, 1 - 2.2 / (3.6 * len(schemes) + 2.4), 1))
    fig.savefig(folder / "roc.png", dpi=120)
    plt.close(fig)
    # what the decision uses: -log10 p (top, the p < alpha rule as a line) and the
    # statistic whose rank gives p (bottom, symlog: SAMark's z spans 0 to hundreds)
    fig, axes = plt.subplots(2, len(schemes), figsize=(4 * len(schemes), 6), squeeze=False)
    for col, spec in enumerate(schemes):
        mine = records[records["scheme"] == spec.label]
        groups = {
            "human": humans_of[spec.label],
            "watermarked": mine[mine["attack"] == NO_ATTACK],
            "attacked": mine[mine["attack"] != NO_ATTACK],
        }
        top, bottom = axes[0][col], axes[1][col]
        logp = {
            n: -np.log10(np.clip(g["p_value"].astype(float), 1e-300, 1)) for n, g in groups.items()
        }
        hi = max([float(v.max()) for v in logp.values() if len(v)] + [3.0])
        bins = np.linspace(0, hi * 1.02, 31)
        for name, g in groups.items():
            if len(g):
                top.hist(logp[name], bins=bins, alpha=0.5, label=f"{name} ({len(g)})")
                score = np.nan_to_num(np.asarray(g["score"], dtype=float), posinf=1e6)
                bottom.hist(_symlog_values(score), bins=30, alpha=0.5, label=name)
        top.axvline(-math.log10(exp.metrics.alpha), color="k", lw=0.8, ls="--")
        top.set_yscale("log")
        top.set_title(spec.label)
        top.set_xlabel(f"-log10 p  (dashed: p = {exp.metrics.alpha:g})")
        bottom.set_xlabel(f"statistic `{mine['statistic'].iloc[0]}`, sign(x)·log10(1+|x|)")
        top.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "scores.png", dpi=120)
    plt.close(fig)
    # robustness-quality trade-off
    if not det.empty and not qual.empty and "distinct2" in qual:
        # the last meaning-preserving paragraph paraphrase (an unfaithful rewrite says
        # nothing about robustness to paraphrase)
        unfaithful = unfaithful_attacks(att)
        hardest = next(
            (
                a.label
                for a in reversed(exp.attacks)
                if attack_is_paraphrase(a.name) and a.label not in unfaithful
            ),
            NO_ATTACK,
        )
        fig, ax = plt.subplots(figsize=(5, 4))
        for _, q in qual.iterrows():
            d = det[(det["scheme"] == q["scheme"]) & (det["attack"] == hardest)]
            if len(d) and math.isfinite(q["distinct2"]):
                x, y = q["distinct2"], 100 * d.iloc[0][fpr_tag(exp.metrics.fprs[0])]
                ax.scatter([x], [y])
                ax.annotate(q["scheme"], (x, y), fontsize=7)
        ax.set_xlabel("Distinct-2 (quality)")
        ax.set_ylabel(f"{fpr_tag(exp.metrics.fprs[0]).replace('tp@fp', 'TP@FP')} under {hardest}")
        fig.tight_layout()
        fig.savefig(folder / "tradeoff.png", dpi=120)
        plt.close(fig)


def write_length_plot(run: Run, by_length: pd.DataFrame, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tag = fpr_tag(run.experiment.metrics.fprs[0])
    attacks = list(dict.fromkeys(by_length["attack"]))
    fig, axes = plt.subplots(1, len(attacks), figsize=(5 * len(attacks), 4), squeeze=False)
    for ax, attack in zip(axes[0], attacks, strict=True):
        for scheme, sub in by_length[by_length["attack"] == attack].groupby("scheme", sort=False):
            sub = sub.sort_values("sentences")
            ax.plot(sub["sentences"], 100 * sub[tag], marker="o", lw=1.2, label=scheme)
        ax.set_title(attack)
        ax.set_xlabel("sentences")
        ax.set_ylabel(tag.replace("tp@fp", "TP@FP") + " (%)")
        ax.set_ylim(0, 101)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "length.png", dpi=120)
    plt.close(fig)
