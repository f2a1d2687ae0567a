"""The report's plots (PNG): ROC curves, p-value histograms, the robustness-quality
trade-off and power against length.

Every plot is a grid of small panels, at most ``COLUMNS`` across (readable at 1,600 px),
with at most ``MAX_SERIES`` series per panel, each in its own colour and marker, and the
legend outside the panels. The paper's rows and the research rows (``research = true``
in the experiment) go to separate files (``roc.png`` and ``roc-research.png``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from samark.evaluation.attacks.base import attack_is_paraphrase
from samark.evaluation.detection_metrics import evidence
from samark.evaluation.experiment import MAX_PLOT_ATTACKS, NO_ATTACK, SchemeSpec
from samark.evaluation.report_tables import fpr_tag, human_records, unfaithful_attacks
from samark.evaluation.runner import Run

COLUMNS = 4
MAX_SERIES = 8
PANEL = (3.2, 2.7)  # inches per panel; 120 dpi
DPI = 120
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _style(i: int) -> dict[str, Any]:
    """Series ``i`` of a panel: its own colour (tab10, skipping grey) and marker."""
    import matplotlib

    tab10 = matplotlib.colormaps["tab10"]
    colours = [tab10(k) for k in (0, 1, 2, 3, 4, 5, 6, 8)]
    return {"color": colours[i % MAX_SERIES], "marker": MARKERS[i % MAX_SERIES]}


def _grid(panels: int, legend_rows: int) -> tuple[Any, list[Any], float]:
    """A figure of ``panels`` axes, ``COLUMNS`` across, with room below for a legend of
    ``legend_rows`` rows; returns the figure, the used axes and the legend's height share."""
    import matplotlib.pyplot as plt

    cols = min(COLUMNS, panels)
    rows = math.ceil(panels / cols)
    legend = 0.25 * legend_rows + 0.3
    height = PANEL[1] * rows + legend
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL[0] * cols + 0.4, height), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels], legend / height


def _save(
    fig: Any, path: Path, handles: Sequence[Any], labels: Sequence[str], share: float
) -> None:
    import matplotlib.pyplot as plt

    fig.legend(
        handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False
    )
    fig.tight_layout(rect=(0, share, 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _groups(schemes: list[SchemeSpec]) -> list[tuple[str, list[SchemeSpec]]]:
    """(file suffix, rows): the paper's rows, then the research rows."""
    main = [s for s in schemes if not s.research]
    research = [s for s in schemes if s.research]
    return [(suffix, rows) for suffix, rows in (("", main), ("-research", research)) if rows]


def plot_attacks(run: Run) -> list[str]:
    """The attacks a ROC panel draws beside no attack: the experiment's ``plot_attacks``,
    else its first ones."""
    chosen = run.experiment.metrics.plot_attacks
    return list(chosen) if chosen else [a.label for a in run.experiment.attacks][:MAX_PLOT_ATTACKS]


def write_plots(
    run: Run, det: pd.DataFrame, qual: pd.DataFrame, att: pd.DataFrame, folder: Path
) -> list[str]:
    """Write the ROC, p-value and trade-off plots; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")

    exp = run.experiment
    records = pd.DataFrame(run.current_records(run.detections))
    if records.empty:
        return []
    schemes = [s for s in exp.schemes if (records["scheme"] == s.label).any()]
    humans_of = {
        spec.label: human_records(
            run, records, records.loc[records["scheme"] == spec.label, "detector"].iloc[0]
        )
        for spec in schemes
    }
    written = []
    for suffix, rows in _groups(schemes):
        _roc(run, records, humans_of, rows, folder / f"roc{suffix}.png")
        _p_values(run, records, humans_of, rows, folder / f"p-values{suffix}.png")
        written += [f"roc{suffix}.png", f"p-values{suffix}.png"]
        if _tradeoff(run, det, qual, att, rows, folder / f"tradeoff{suffix}.png"):
            written.append(f"tradeoff{suffix}.png")
    return written


def _roc(
    run: Run,
    records: pd.DataFrame,
    humans_of: dict[str, pd.DataFrame],
    rows: list[SchemeSpec],
    path: Path,
) -> None:
    """One panel per row: its ROC under no attack and the plotted attacks."""
    attacks = [NO_ATTACK, *plot_attacks(run)]
    fig, axes, share = _grid(len(rows), math.ceil(len(attacks) / 4))
    handles: dict[str, Any] = {}
    for ax, spec in zip(axes, rows, strict=True):
        mine = records[records["scheme"] == spec.label]
        neg = evidence(humans_of[spec.label]["p_value"], humans_of[spec.label]["z"])
        for i, a in enumerate(attacks):
            sub = mine[mine["attack"] == a]
            if sub.empty or not len(neg):
                continue
            pos = evidence(sub["p_value"], sub["z"])
            thr = np.unique(np.concatenate([neg, pos, [np.inf]]))[::-1]
            fpr = [(neg >= t).mean() for t in thr]
            tpr = [(pos >= t).mean() for t in thr]
            (line,) = ax.plot(fpr, tpr, lw=1.1, ms=4, markevery=0.25, label=a, **_style(i))
            handles.setdefault(a, line)
        ax.plot([0, 1], [0, 1], color="0.7", ls=":", lw=0.6)
        ax.axvline(run.experiment.metrics.fprs[0], color="0.6", lw=0.6)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(spec.label, fontsize=9)
        ax.set_xlabel("FPR on human text (symlog)", fontsize=8)
        ax.set_ylabel("TPR", fontsize=8)
        ax.tick_params(labelsize=7)
    labels = [a for a in attacks if a in handles]
    _save(fig, path, [handles[a] for a in labels], labels, share)


def _p_values(
    run: Run,
    records: pd.DataFrame,
    humans_of: dict[str, pd.DataFrame],
    rows: list[SchemeSpec],
    path: Path,
) -> None:
    """One panel per row: -log10 p of human, watermarked and attacked texts, with the
    decision's line."""
    alpha = run.experiment.metrics.alpha
    fig, axes, share = _grid(len(rows), 1)
    handles: dict[str, Any] = {}
    for ax, spec in zip(axes, rows, strict=True):
        mine = records[records["scheme"] == spec.label]
        groups = {
            "human texts": humans_of[spec.label],
            "watermarked, no attack": mine[mine["attack"] == NO_ATTACK],
            "watermarked, attacked": mine[mine["attack"] != NO_ATTACK],
        }
        logp = {
            n: -np.log10(np.clip(g["p_value"].astype(float), 1e-300, 1)) for n, g in groups.items()
        }
        hi = max([float(v.max()) for v in logp.values() if len(v)] + [3.0])
        bins = np.linspace(0, hi * 1.02, 31)
        for i, name in enumerate(groups):
            if len(logp[name]):
                # the human texts filled, the watermarked ones as outlines over them
                *_, patches = ax.hist(
                    logp[name],
                    bins=bins,
                    color=_style(i)["color"],
                    label=name,
                    **({"alpha": 0.45} if i == 0 else {"histtype": "step", "lw": 1.4}),
                )
                handles.setdefault(name, patches[0])
        ax.axvline(-math.log10(alpha), color="k", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_title(spec.label, fontsize=9)
        ax.set_xlabel(f"-log10 p (dashed: p = {alpha:g})", fontsize=8)
        ax.set_ylabel("texts", fontsize=8)
        ax.tick_params(labelsize=7)
    _save(fig, path, list(handles.values()), list(handles), share)


def _tradeoff(
    run: Run,
    det: pd.DataFrame,
    qual: pd.DataFrame,
    att: pd.DataFrame,
    rows: list[SchemeSpec],
    path: Path,
) -> bool:
    """Detection under the hardest faithful paraphrase against Distinct-2: each row a
    numbered point, its name in the legend (no label over another)."""
    import matplotlib.pyplot as plt

    if det.empty or qual.empty or "distinct2" not in qual:
        return False
    exp = run.experiment
    unfaithful = unfaithful_attacks(att)
    hardest = next(
        (
            a.label
            for a in reversed(exp.attacks)
            if attack_is_paraphrase(a.name) and a.label not in unfaithful
        ),
        NO_ATTACK,
    )
    tag = fpr_tag(exp.metrics.fprs[0])
    points = []
    for spec in rows:
        q = qual[qual["scheme"] == spec.label]
        d = det[(det["scheme"] == spec.label) & (det["attack"] == hardest)]
        if len(q) and len(d) and math.isfinite(q.iloc[0]["distinct2"]):
            points.append((spec.label, q.iloc[0]["distinct2"], 100 * d.iloc[0][tag]))
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.4 + 0.25 * math.ceil(len(points) / 3)))
    handles = []
    for i, (_, x, y) in enumerate(points):
        handles.append(
            ax.scatter([x], [y], s=36, color=_style(i)["color"], marker=MARKERS[(i // 8) % 8])
        )
        ax.annotate(str(i + 1), (x, y), xytext=(4, 3), textcoords="offset points", fontsize=8)
    ax.set_xlabel("Distinct-2 (quality, higher is better)")
    ax.set_ylabel(f"{tag.replace('tp@fp', 'TP@FP')} (%) under {hardest}")
    ax.set_ylim(-3, 103)
    share = (0.25 * math.ceil(len(points) / 3) + 0.3) / fig.get_figheight()
    fig.legend(
        handles,
        [f"{i + 1} {p[0]}" for i, p in enumerate(points)],
        loc="lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, share, 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def write_length_plot(run: Run, by_length: pd.DataFrame, folder: Path) -> list[str]:
    """Power against length: one row of panels (an attack each) per group of at most
    ``MAX_SERIES`` rows (token rows, then sentence rows), the group's legend beside it; the
    research rows in ``length-research.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from samark.schemes.base import scheme_info

    tag = fpr_tag(run.experiment.metrics.fprs[0])
    attacks = list(dict.fromkeys(by_length["attack"]))
    present = set(by_length["scheme"])
    written = []
    for suffix, rows in _groups([s for s in run.experiment.schemes if s.label in present]):
        bands: list[list[SchemeSpec]] = []
        for unit in ("token", "sentence"):
            same = [s for s in rows if scheme_info(s.name).unit == unit]
            bands += [same[i : i + MAX_SERIES] for i in range(0, len(same), MAX_SERIES)]
        cols = len(attacks) + 1  # the last column holds the band's legend
        width = min(PANEL[0] * cols, 13.2)
        fig, axes = plt.subplots(
            len(bands), cols, figsize=(width, PANEL[1] * len(bands)), squeeze=False
        )
        for band, axrow in zip(bands, axes, strict=True):
            handles, labels = [], []
            for ax, attack in zip(axrow[:-1], attacks, strict=True):
                for i, spec in enumerate(band):
                    sub = by_length[
                        (by_length["attack"] == attack) & (by_length["scheme"] == spec.label)
                    ].sort_values("sentences")
                    if sub.empty:
                        continue
                    (line,) = ax.plot(
                        sub["sentences"],
                        100 * sub[tag],
                        lw=1.1,
                        ms=4,
                        label=spec.label,
                        **_style(i),
                    )
                    if spec.label not in labels:
                        handles.append(line)
                        labels.append(spec.label)
                ax.set_title(attack, fontsize=9)
                ax.set_xlabel("sentences", fontsize=8)
                ax.set_ylabel(tag.replace("tp@fp", "TP@FP") + " (%)", fontsize=8)
                ax.set_ylim(-3, 103)
                ax.tick_params(labelsize=7)
            axrow[-1].axis("off")
            axrow[-1].legend(handles, labels, loc="center left", fontsize=8, frameon=False)
        fig.tight_layout()
        fig.savefig(folder / f"length{suffix}.png", dpi=DPI)
        plt.close(fig)
        written.append(f"length{suffix}.png")
    return written
