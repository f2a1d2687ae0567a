"""``samark attack``: every record of a JSONL file attacked, with its measured fidelity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from samark.cli.app import app
from samark.cli.common import (
    err,
    fail,
    out,
    progress,
)
from samark.errors import SamarkError


@app.command()
def attack(
    name: Annotated[
        str | None, typer.Argument(help="A registered attack (see --list).", show_default=False)
    ] = None,
    source: Annotated[
        Path | None, typer.Argument(help="JSONL file of records with a text field.")
    ] = None,
    output: Annotated[Path | None, typer.Option("--out", "-o", help="JSONL file to write.")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Attack parameter NAME=VALUE (repeatable)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same output.")] = 0,
    field: Annotated[str, typer.Option(help="Text field of the records.")] = "text",
    human_field: Annotated[
        str | None, typer.Option(help="Field with each record's human text (human-mix).")
    ] = None,
    embedder: Annotated[
        str,
        typer.Option(help="Embedder that measures fidelity (not your watermark's)."),
    ] = "all-minilm-l6-v2",
    list_attacks: Annotated[
        bool, typer.Option("--list", help="List the registered attacks and exit.")
    ] = False,
) -> None:
    """Attack every record of a JSONL file and measure each attack's fidelity.

    Each output record keeps its fields and gets the attacked text, the original, and the
    attack's measured fidelity."""
    try:
        from samark.evaluation.attack_file import attack_jsonl, parse_params
        from samark.evaluation.attacks import ATTACKS, create_attack
    except ImportError as exc:
        raise fail(
            f"`samark attack` needs the eval extra ({exc}): pip install 'samark[eval]'"
        ) from None
    if list_attacks:
        for known in ATTACKS.names():
            out.print(f"{known:<16} {ATTACKS.get(known).summary}", highlight=False, soft_wrap=True)
        return
    if name is None or source is None or output is None:
        raise fail("usage: samark attack NAME INPUT.jsonl -o OUTPUT.jsonl [--param k=v]")
    try:  # the attack's name and parameters, then the files, before any model loads
        ATTACKS.get(name)
        params = parse_params(param or [])
    except SamarkError as exc:
        raise fail(str(exc)) from None
    total = _check_files(source, output, field, human_field)
    from samark.embed import load_embedder

    try:
        attacker = create_attack(name, **params)
        encoder = load_embedder(embedder)
        with progress() as bar:
            task = bar.add_task(f"{name} on {source.name}", total=total, unit="records")
            summary = attack_jsonl(
                attacker,
                params,
                source,
                output,
                encoder,
                seed=seed,
                text_field=field,
                human_field=human_field,
                progress=lambda done: bar.update(task, completed=done),
            )
    except SamarkError as exc:
        raise fail(str(exc)) from None
    err.print(f"{output}: {summary.line()}", highlight=False, soft_wrap=True)


def _check_files(source: Path, output: Path, field: str, human_field: str | None) -> int:
    """The count of records of ``source``, every one read and checked; fails (exit 2)
    where it is missing, empty or holds a record the attack cannot use (named by its
    line), or where ``output`` is a folder."""
    from samark.evaluation.attack_file import check_records

    if not source.is_file():
        what = "is a folder, not a file" if source.is_dir() else "no such file"
        raise fail(f"{source}: {what}")
    if output.is_dir():
        raise fail(f"{output} is a folder: name the JSONL file to write")
    try:
        total = check_records(source, field, human_field)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if total == 0:
        raise fail(f"{source} holds no records: nothing to attack")
    return total
