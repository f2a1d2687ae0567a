"""``samark eval``: run experiments (TOML), follow them, compact their records and write
their reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from samark.cli.app import eval_app
from samark.cli.common import (
    err,
    fail,
    out,
)
from samark.errors import SamarkError


def _need_eval_extra() -> None:
    import importlib.util

    missing = [m for m in ("pandas", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise fail(f"`samark eval` needs {', '.join(missing)}: pip install 'samark[eval]'")


@eval_app.command("run")
def eval_run(
    config: Annotated[Path, typer.Argument(help="Experiment file (TOML).")],
    run_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run folder (default: runs/<name>).")
    ] = None,
    stages: Annotated[
        str,
        typer.Option(
            help="Comma-separated stages: generate,attack,detect,length,quality (length "
            "does work only with [metrics] lengths)."
        ),
    ] = "generate,attack,detect,length,quality",
    prompts: Annotated[
        int | None, typer.Option(help="Use only the first N prompts (a slice of the run).")
    ] = None,
    schemes: Annotated[
        str | None,
        typer.Option(help="Comma-separated scheme labels to run (default: all of them)."),
    ] = None,
    attacks: Annotated[
        str | None,
        typer.Option(
            help="Semicolon-separated attack labels to run (default: all of them).",
        ),
    ] = None,
    reverse: Annotated[
        bool,
        typer.Option(
            help="Generate items last-first, so that a second process on the same folder "
            "shares the work instead of repeating it."
        ),
    ] = False,
    report: Annotated[bool, typer.Option(help="Write the report when done.")] = True,
) -> None:
    """Run (or resume) an experiment; finished work is never redone."""
    _need_eval_extra()
    from samark.evaluation.experiment import Experiment
    from samark.evaluation.runner import Run

    try:
        exp = Experiment.load(config)
        if prompts is not None:
            exp = exp.with_prompts(prompts)
        if schemes:
            exp = exp.only_schemes([x.strip() for x in schemes.split(",") if x.strip()])
        if attacks:
            exp = exp.only_attacks([x.strip() for x in attacks.split(";") if x.strip()])
        folder = run_dir or Path("runs") / exp.name
        with Run(exp, folder, reverse=reverse) as run:  # released when done, even in-process
            run.run([s.strip() for s in stages.split(",") if s.strip()])
        if report:
            from samark.evaluation.report import write_report

            written = write_report(folder)
            err.print(f"report: {written}")
    except SamarkError as exc:
        raise fail(str(exc)) from None


@eval_app.command("status")
def eval_status(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
    prompts: Annotated[
        int | None, typer.Option(help="Count against the first N prompts (a slice).")
    ] = None,
) -> None:
    """What a run has done and what is left, per scheme row and stage (done/asked)."""
    _need_eval_extra()
    from samark.evaluation.runner import Run

    try:
        rows = Run.open(run_dir, prompts=prompts).status()
    except SamarkError as exc:
        raise fail(str(exc)) from None
    columns = ("generate", "attack", "detect", "human", "length", "quality")
    table = Table("scheme", *columns)
    for row in rows:
        cells = []
        for stage in columns:
            done, asked = row[stage]
            cells.append(f"[green]{done}/{asked}[/]" if done >= asked else f"{done}/{asked}")
        table.add_row(row["scheme"], *cells)
    out.print(table)


@eval_app.command("compact")
def eval_compact(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
) -> None:
    """Seal a run folder's records into gzip files (the same records, a seventh of the bytes).

    Later runs append to it as before. Refused while a run writes to it."""
    _need_eval_extra()
    from samark.evaluation.runner import Run

    try:
        sealed = Run.compact(run_dir)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if not sealed:
        out.print(f"{run_dir}: nothing to compact")
    for name, before, after in sealed:
        out.print(f"{name}: {before / 1e6:.1f} MB -> {name}.gz {after / 1e6:.1f} MB")


@eval_app.command("report")
def eval_report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Report folder (default: RUN_DIR/report).")
    ] = None,
) -> None:
    """Write tables (markdown + CSV) and plots (PNG) for a run folder."""
    _need_eval_extra()
    from samark.evaluation.report import write_report

    try:
        written = write_report(run_dir, out_dir)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    out.print(f"report: {written}")


@eval_app.command("adopt")
def eval_adopt(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
    old_config: Annotated[
        Path, typer.Option("--from", help="The experiment TOML the records were made under.")
    ],
    row: Annotated[str, typer.Option(help="The row's label in --from.")],
    as_row: Annotated[str, typer.Option("--as", help="The row's label in RUN_DIR's experiment.")],
) -> None:
    """Hand a row's records to another row of the same configuration.

    For a changed default: the row that now takes it holds what a row that named it
    wrote. Refused unless both rows build the same scheme with the run's key; nothing is
    overwritten."""
    _need_eval_extra()
    from samark.evaluation.experiment import Experiment
    from samark.evaluation.runner import Run

    try:
        moved = Run.adopt(run_dir, Experiment.load(old_config), row, as_row)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    for name, n in moved.items():
        if n:
            out.print(f"{name}: {n} records of {row!r} are now {as_row!r}'s")
