"""The report's plot style, shared by every plot (:mod:`samark.evaluation.report.plots`):
a grid of small panels, at most ``COLUMNS`` across (readable at 1,600 px), at most
``MAX_SERIES`` series per panel, each in its own colour and marker, the legend in the
grid's free cells, text at ``FONT`` sizes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypedDict

from samark.evaluation.experiment import SchemeSpec

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    #: what a legend shows for a series: an artist, or a container of them (error bars)
    LegendHandle: TypeAlias = Artist | tuple[Artist, ...]

COLUMNS = 4
MAX_SERIES = 8
PANEL = (3.4, 2.9)  # inches per panel; 120 dpi
DPI = 120
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: points: panel titles, axis labels, tick labels, legends
FONT = {"title": 12, "label": 11, "tick": 10, "legend": 11}
#: a thin line from a point's name to the point, for names set apart from it
LEADER = {"arrowstyle": "-", "color": "0.55", "lw": 0.6, "shrinkA": 1, "shrinkB": 4}


class Style(TypedDict):
    """A series' look: its colour (RGBA) and marker."""

    color: tuple[float, float, float, float]
    marker: str


def _style(i: int) -> Style:
    """Series ``i`` of a panel: its own colour (tab10, skipping grey) and marker."""
    import matplotlib

    tab10 = matplotlib.colormaps["tab10"]
    colours = [tab10(k) for k in (0, 1, 2, 3, 4, 5, 6, 8)]
    return {"color": colours[i % MAX_SERIES], "marker": MARKERS[i % MAX_SERIES]}


def _grid(panels: int, legend_rows: int) -> tuple[Figure, list[Axes], Axes]:
    """A figure of ``panels`` axes, ``COLUMNS`` across, and where its legend goes: an
    axes spanning the last row's free cells, or, where that row is full, a strip below
    the panels sized for ``legend_rows`` rows of entries."""
    import matplotlib.pyplot as plt

    cols = min(COLUMNS, panels)
    rows = math.ceil(panels / cols)
    free = rows * cols - panels
    strip = 0.0 if free else 0.32 * legend_rows + 0.2
    fig = plt.figure(figsize=(PANEL[0] * cols + 0.4, PANEL[1] * rows + strip))
    heights = [PANEL[1]] * rows + ([strip] if strip else [])
    grid = fig.add_gridspec(len(heights), cols, height_ratios=heights)
    axes = [fig.add_subplot(grid[i // cols, i % cols]) for i in range(panels)]
    legend_ax = fig.add_subplot(grid[rows - 1, cols - free :] if free else grid[rows, :])
    legend_ax.axis("off")
    return fig, axes, legend_ax


def _legend(
    legend_ax: Axes, handles: Sequence[LegendHandle], labels: Sequence[str], **kw: object
) -> None:
    """The figure's legend in its own cell(s), in columns that fit them."""
    figure = legend_ax.get_figure(root=True)
    assert figure is not None  # a legend cell of a figure (:func:`_grid`)
    width = legend_ax.get_position().width * figure.get_figwidth()
    longest = max((len(label) for label in labels), default=1)
    # an entry is about its label's width in characters of the legend font, plus its marker
    per_entry = (longest * 0.6 + 3.5) * FONT["legend"] / 72
    ncol = max(1, min(len(labels), int(width // per_entry)))
    legend_ax.legend(
        handles,
        labels,
        loc="center",
        ncol=ncol,
        fontsize=FONT["legend"],
        frameon=False,
        **kw,
    )


def _save(fig: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _decorate(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=FONT["title"])
    ax.set_xlabel(xlabel, fontsize=FONT["label"])
    ax.set_ylabel(ylabel, fontsize=FONT["label"])
    ax.tick_params(labelsize=FONT["tick"])


def _groups(schemes: list[SchemeSpec]) -> list[tuple[str, list[SchemeSpec]]]:
    """(file suffix, rows): the paper's rows, then the research rows."""
    main = [s for s in schemes if not s.research]
    research = [s for s in schemes if s.research]
    return [(suffix, rows) for suffix, rows in (("", main), ("-research", research)) if rows]
