"""The report's plot layout: the legend beside the last panels (not below a blank area),
and points named beside themselves without one name covering another."""

from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib", reason="plots need samark[eval]")
matplotlib.use("Agg")

from samark.evaluation.report.plot_style import _grid  # noqa: E402
from samark.evaluation.report.plots import _name_points  # noqa: E402


def test_the_legend_fills_the_free_cells_of_the_last_row() -> None:
    import matplotlib.pyplot as plt

    fig, axes, legend_ax = _grid(13, 2)  # 4 across: the last row has one panel, 3 free
    last = axes[-1].get_position()
    spot = legend_ax.get_position()
    assert len(axes) == 13 and len(fig.axes) == 14  # no empty panel drawn
    assert spot.y0 == pytest.approx(last.y0) and spot.x0 > last.x1  # beside the last panel
    plt.close(fig)
    fig, axes, legend_ax = _grid(12, 2)  # a full grid: the legend below the panels
    assert legend_ax.get_position().y1 <= min(ax.get_position().y0 for ax in axes)
    plt.close(fig)


def test_point_names_do_not_cover_each_other() -> None:
    import matplotlib.pyplot as plt

    # a crowded corner, as the research rows' trade-off has
    points = [
        ("SAMark (3 channels + margin)", 0.761, 80.0),
        ("SAMark (margin)", 0.7615, 95.0),
        ("SAMark (N = 16 + steer)", 0.749, 85.0),
        ("SAMark (adaptive)", 0.777, 77.5),
        ("SAMark (N = 16)", 0.783, 80.0),
        ("SAMark (layered N = 16)", 0.8155, 85.0),
        ("SAMark (quiet space)", 0.8165, 80.0),
        ("SAMark (N = 128)", 0.802, 100.0),
    ]
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    ax.scatter([x for _, x, _ in points], [y for *_, y in points])
    ax.set_xlim(0.725, 0.84)
    ax.set_ylim(64, 106)
    fig.tight_layout()
    _name_points(ax, points)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert sorted(t.get_text() for t in ax.texts) == sorted(p[0] for p in points)
    frame = ax.get_window_extent(renderer)
    for i, box in enumerate(boxes):
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
        assert not any(box.overlaps(other) for other in boxes[i + 1 :])
    plt.close(fig)
