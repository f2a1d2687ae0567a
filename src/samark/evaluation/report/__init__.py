"""A run's report: the tables (:mod:`samark.evaluation.report.tables`) as CSV files, the
plots (:mod:`samark.evaluation.report.plots`) and the markdown
(:mod:`samark.evaluation.report.markdown`), written into one folder."""

from __future__ import annotations

from pathlib import Path

from samark.evaluation.report.markdown import ReportTables, markdown_report
from samark.evaluation.report.plots import write_length_plot, write_plots
from samark.evaluation.report.tables import (
    attack_table,
    corpus_fpr_table,
    detection_table,
    efficiency_table,
    generation_signal_table,
    length_table,
    quality_table,
    signal_table,
)
from samark.evaluation.runner import Run

#: the file names the report's plots take (``scores.png``: an earlier layout's), removed
#: before a report is written so that no plot of an earlier run stays beside it
PLOT_FILES = (
    "roc*.png",
    "p-values*.png",
    "tradeoff*.png",
    "cost*.png",
    "length*.png",
    "scores.png",
)


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the tables and plots into ``out_dir`` (default: ``report/`` inside the run
    folder); returns the markdown file."""
    run_dir = Path(run_dir)
    run = Run.open(run_dir)
    folder = Path(out_dir) if out_dir is not None else run_dir / "report"
    folder.mkdir(parents=True, exist_ok=True)
    det, qual = detection_table(run), quality_table(run)
    eff, att, sig = efficiency_table(run), attack_table(run), signal_table(run)
    gsig = generation_signal_table(run)
    corpora = corpus_fpr_table(run)
    by_length = length_table(run)
    for name, df in (
        ("generation_signal", gsig),
        ("detection", det),
        ("quality", qual),
        ("efficiency", eff),
        ("attacks", att),
        ("signal", sig),
        ("corpus_fpr", corpora),
        ("length", by_length),
    ):
        df.to_csv(folder / f"{name}.csv", index=False)
    md = folder / "report.md"
    for pattern in PLOT_FILES:  # the report's plots of an earlier run or layout; not others
        for stale in folder.glob(pattern):
            stale.unlink()
    plots = write_plots(run, det, qual, att, folder, eff)
    if not by_length.empty:
        plots += write_length_plot(run, by_length, folder)
    tables = ReportTables(det, qual, eff, att, sig, gsig, corpora, by_length)
    md.write_text(markdown_report(run, tables, plots), encoding="utf-8")
    return md


__all__ = [
    "attack_table",
    "corpus_fpr_table",
    "detection_table",
    "efficiency_table",
    "generation_signal_table",
    "length_table",
    "quality_table",
    "signal_table",
    "write_report",
]
