"""The report's plots (PNG): ROC curves, p-value histograms, the robustness-quality
trade-off and power against length.

Every plot is a grid of small panels, at most ``COLUMNS`` across (readable at 1,600 px),
with at most ``MAX_SERIES`` series per panel, each in its own colour and marker, and the
legend in the grid's free cells beside the last panels (below them only where the grid is
full). Text is set at ``FONT`` sizes, legible when the figure is shown at page width. The
paper's rows and the research rows (``research = true`` in the experiment) go to separate
files (``roc.png`` and ``roc-research.png``, ...).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from samark.evaluation.attacks.base import ATTACKS
from samark.evaluation.detection_metrics import evidence
from samark.evaluation.experiment import MAX_PLOT_ATTACKS, NO_ATTACK, SchemeSpec
from samark.evaluation.report.plot_style import (
    DPI,
    FONT,
    LEADER,
    MAX_SERIES,
    PANEL,
    _decorate,
    _grid,
    _groups,
    _legend,
    _save,
    _style,
)
from samark.evaluation.report.tables import fpr_tag, human_records, unfaithful_attacks
from samark.evaluation.runner import Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.transforms import Bbox

    from samark.evaluation.report.plot_style import LegendHandle


def plot_attacks(run: Run) -> list[str]:
    """The attacks a ROC panel draws beside no attack: the experiment's ``plot_attacks``,
    else its first ones."""
    chosen = run.experiment.metrics.plot_attacks
    return list(chosen) if chosen else [a.label for a in run.experiment.attacks][:MAX_PLOT_ATTACKS]


def write_plots(
    run: Run,
    det: pd.DataFrame,
    qual: pd.DataFrame,
    att: pd.DataFrame,
    folder: Path,
    eff: pd.DataFrame | None = None,
) -> list[str]:
    """Write the ROC, p-value, trade-off and cost plots; returns the files written."""
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
        if eff is not None and _cost(run, det, eff, rows, folder / f"cost{suffix}.png"):
            written.append(f"cost{suffix}.png")
    return written


def _cost(
    run: Run, det: pd.DataFrame, eff: pd.DataFrame, rows: list[SchemeSpec], path: Path
) -> bool:
    """Strength against price: per attack (no attack and the plotted ones) each row's
    detection at the first FPR with its 95% interval, against Tok/Out (tokens decoded per
    token kept, log scale). Rows of equal Tok/Out are set a few percent apart so that
    neither hides the other. Rows without a generation record (no Tok/Out) are left out;
    nothing is drawn unless two rows have one."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    if det.empty or eff.empty or "tok_per_out" not in eff:
        return False
    tok_out = {
        str(r["scheme"]): float(r["tok_per_out"])
        for _, r in eff.iterrows()
        if math.isfinite(float(r["tok_per_out"])) and float(r["tok_per_out"]) > 0
    }
    shown = [spec for spec in rows if spec.label in tok_out]
    if len(shown) < 2:
        return False
    tag = fpr_tag(run.experiment.metrics.fprs[0])
    attacks = [a for a in [NO_ATTACK, *plot_attacks(run)] if (det["attack"] == a).any()]
    fig, axes, legend_ax = _grid(len(attacks), math.ceil(len(shown) / 3))
    handles: dict[str, LegendHandle] = {}
    xs = [tok_out[spec.label] for spec in shown]
    # a row's place: its Tok/Out, moved 4% a step from rows within 10% of it
    place = {}
    for i, spec in enumerate(shown):
        near = [s for s in shown[:i] if abs(math.log(tok_out[s.label] / xs[i])) < 0.1]
        place[spec.label] = xs[i] * 1.04 ** len(near)
    ticks = [t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256) if min(xs) / 1.5 <= t <= max(xs) * 1.5]
    for ax, attack in zip(axes, attacks, strict=True):
        for i, spec in enumerate(shown):
            d = det[(det["scheme"] == spec.label) & (det["attack"] == attack)]
            if d.empty:
                continue
            y, lo, hi = (100 * float(d.iloc[0][k]) for k in (tag, f"{tag}_lo", f"{tag}_hi"))
            bar = ax.errorbar(
                [place[spec.label]],
                [y],
                yerr=[[max(y - lo, 0.0)], [max(hi - y, 0.0)]],
                ms=6,
                lw=1.0,
                capsize=2.5,
                ls="none",
                **_style(i),
            )
            handles.setdefault(spec.label, bar)
        ax.set_xscale("log")
        ax.set_xlim(min(xs) / 1.4, max(xs) * 1.4)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(-4, 104)
        ax.grid(color="0.92", lw=0.6)
        _decorate(ax, attack, "Tok/Out (log)", f"{tag.replace('tp@fp', 'TP@FP')} (%)")
    labels = [spec.label for spec in shown if spec.label in handles]
    _legend(
        legend_ax,
        [handles[label] for label in labels],
        labels,
        title="row (bars: 95% bootstrap interval)",
        title_fontsize=FONT["legend"],
    )
    _save(fig, path)
    return True


def _roc(
    run: Run,
    records: pd.DataFrame,
    humans_of: dict[str, pd.DataFrame],
    rows: list[SchemeSpec],
    path: Path,
) -> None:
    """One panel per row: its ROC under no attack and the plotted attacks."""
    attacks = [NO_ATTACK, *plot_attacks(run)]
    fig, axes, legend_ax = _grid(len(rows), math.ceil(len(attacks) / 4))
    handles: dict[str, LegendHandle] = {}
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
            (line,) = ax.plot(fpr, tpr, lw=1.3, ms=5, markevery=0.25, label=a, **_style(i))
            handles.setdefault(a, line)
        ax.plot([0, 1], [0, 1], color="0.7", ls=":", lw=0.7)
        ax.axvline(run.experiment.metrics.fprs[0], color="0.6", lw=0.7)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        _decorate(ax, spec.label, "FPR on human text (symlog)", "TPR")
    labels = [a for a in attacks if a in handles]
    level = run.experiment.metrics.fprs[0]
    _legend(
        legend_ax,
        [handles[a] for a in labels],
        labels,
        title=f"attack (grey line: FPR = {level:g})",
        title_fontsize=FONT["legend"],
    )
    _save(fig, path)


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
    fig, axes, legend_ax = _grid(len(rows), 1)
    handles: dict[str, LegendHandle] = {}
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
                    bins=bins.tolist(),
                    color=_style(i)["color"],
                    label=name,
                    **({"alpha": 0.45} if i == 0 else {"histtype": "step", "lw": 1.4}),
                )
                # one data set: its bars (a BarContainer) or its outline ([Polygon])
                assert isinstance(patches, list | tuple)
                handles.setdefault(name, patches[0])
        ax.axvline(-math.log10(alpha), color="k", lw=0.9, ls="--")
        ax.set_yscale("log")
        _decorate(ax, spec.label, f"-log10 p (dashed: p = {alpha:g})", "texts")
    _legend(legend_ax, list(handles.values()), list(handles))
    _save(fig, path)


def _tradeoff(
    run: Run,
    det: pd.DataFrame,
    qual: pd.DataFrame,
    att: pd.DataFrame,
    rows: list[SchemeSpec],
    path: Path,
) -> bool:
    """Detection under the hardest faithful paraphrase against Distinct-2: each row a
    point named beside it (placed so that no name covers another or a point), its marker
    and colour the unit its mark lives in (token or sentence), explained in the legend."""
    import matplotlib.pyplot as plt

    from samark.schemes.base import scheme_info

    if det.empty or qual.empty or "distinct2" not in qual:
        return False
    exp = run.experiment
    unfaithful = unfaithful_attacks(att)
    hardest = next(
        (
            a.label
            for a in reversed(exp.attacks)
            if ATTACKS.get(a.name).paraphrase and a.label not in unfaithful
        ),
        NO_ATTACK,
    )
    tag = fpr_tag(exp.metrics.fprs[0])
    points = []
    for spec in rows:
        q = qual[qual["scheme"] == spec.label]
        d = det[(det["scheme"] == spec.label) & (det["attack"] == hardest)]
        if len(q) and len(d) and math.isfinite(q.iloc[0]["distinct2"]):
            unit = scheme_info(spec.name).unit
            points.append((spec.label, unit, q.iloc[0]["distinct2"], 100 * d.iloc[0][tag]))
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    units = list(dict.fromkeys(unit for _, unit, _, _ in points))
    for k, unit in enumerate(units):
        xs = [x for _, u, x, _ in points if u == unit]
        ys = [y for _, u, _, y in points if u == unit]
        ax.scatter(xs, ys, s=48, label=f"{unit}-level mark", zorder=3, **_style(k))
    xs = [x for *_, x, _ in points]
    pad = 0.08 * (max(xs) - min(xs) or 0.1)
    ax.set_xlim(min(xs) - pad, max(xs) + 2.5 * pad)  # room for the names on the right
    # 0-100, or the tens the points occupy where they all sit high (the research rows)
    low = min(y for *_, y in points)
    ax.set_ylim(max(-4.0, 10 * math.floor(low / 10) - 6), 106)
    ax.grid(color="0.92", lw=0.6)
    _decorate(
        ax,
        f"Robustness against quality ({hardest}, the hardest faithful paraphrase)",
        "Distinct-2 (quality, higher is better)",
        f"{tag.replace('tp@fp', 'TP@FP')} (%) under {hardest}",
    )
    # the legend between the title and the axes: it covers no point and no name
    ax.set_title(ax.get_title(), fontsize=FONT["label"], pad=30)
    ax.legend(
        fontsize=FONT["legend"],
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=len(units),
        frameon=False,
    )
    fig.tight_layout()
    _name_points(ax, [(label, x, y) for label, _, x, y in points])
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def _name_points(ax: Axes, points: list[tuple[str, float, float]]) -> None:
    """Write each point's name beside it, at the first of a few offsets (right, left,
    above, below, then farther out) where the name overlaps no name already placed, no
    point and no edge of the axes; the name keeps the point's nearest offset otherwise."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = ax.figure.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # the report's backend (``write_plots``)
    renderer = canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    dots = [ax.transData.transform((x, y)) for _, x, y in points]
    placed: list[Bbox] = []
    offsets = [  # points from the dot: beside it, above or below, then farther out
        (7, 0, "left"),
        (-7, 0, "right"),
        (0, 7, "center"),
        (0, -9, "center"),
        (10, 12, "left"),
        (10, -12, "left"),
        (-10, 12, "right"),
        (-10, -12, "right"),
        (0, 22, "center"),
        (0, -22, "center"),
        (24, 0, "left"),
        (-24, 0, "right"),
    ]
    # the most crowded names first: those with the nearest neighbour
    order = sorted(
        range(len(points)),
        key=lambda i: min(
            (float(np.hypot(*(dots[i] - d))) for j, d in enumerate(dots) if j != i),
            default=0.0,
        ),
    )
    for i in order:
        label, x, y = points[i]
        for dx, dy, ha in offsets:
            text = ax.annotate(
                label,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va="bottom" if dy > 0 else "top" if dy < -8 else "center",
                fontsize=FONT["tick"],
                arrowprops=LEADER,
            )
            box = text.get_window_extent(renderer).expanded(1.04, 1.1)
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            clear = not any(box.overlaps(other) for other in placed) and not any(
                box.contains(*dot) for j, dot in enumerate(dots) if j != i
            )
            if inside and clear:
                break
            text.remove()
        else:  # nowhere clear: the first offset, on top
            dx, dy, ha = offsets[0]
            text = ax.annotate(
                label, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha,
                va="center", fontsize=FONT["tick"], arrowprops=LEADER,
            )  # fmt: skip
            box = text.get_window_extent(renderer)
        placed.append(box)


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
        width = min(PANEL[0] * cols, 14.0)
        fig, axes = plt.subplots(
            len(bands), cols, figsize=(width, (PANEL[1] + 0.3) * len(bands)), squeeze=False
        )
        units = [scheme_info(band[0].name).unit for band in bands]
        for b, (band, axrow) in enumerate(zip(bands, axes, strict=True)):
            # each row of panels says whose rows it holds: "token-level rows (2 of 2)"
            name = f"{units[b]}-level rows"
            if units.count(units[b]) > 1:
                part = units[: b + 1].count(units[b])
                name += f" ({part} of {units.count(units[b])})"
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
                        lw=1.3,
                        ms=5,
                        label=spec.label,
                        **_style(i),
                    )
                    if spec.label not in labels:
                        handles.append(line)
                        labels.append(spec.label)
                ylabel = tag.replace("tp@fp", "TP@FP") + " (%)"
                if ax is axrow[0]:
                    ylabel = f"{name}\n{ylabel}"
                _decorate(ax, attack, "sentences", ylabel)
                ax.set_ylim(-3, 103)
            axrow[-1].axis("off")
            axrow[-1].legend(
                handles,
                labels,
                loc="center left",
                fontsize=FONT["legend"],
                frameon=False,
                title=name,
                title_fontproperties={"weight": "bold", "size": FONT["legend"]},
            )
        fig.tight_layout()
        fig.savefig(folder / f"length{suffix}.png", dpi=DPI)
        plt.close(fig)
        written.append(f"length{suffix}.png")
    return written
