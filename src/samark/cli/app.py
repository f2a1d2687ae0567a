"""The ``samark`` application object and its command groups; every command module adds its
commands to them."""

from __future__ import annotations

import typer
import typer.core

from samark.cli.keyring import keyring_app


def _hide_flag_types() -> None:
    """No ``<bool>`` beside a flag in ``--help`` (typer's rich help shows every option's
    type, and a flag takes no value); options that take one keep theirs."""
    option = typer.core.TyperOption
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "_samark", False):
        return

    def display_type_rich(self: typer.core.TyperOption, ctx: object) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich._samark = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich  # type: ignore[method-assign]


_hide_flag_types()

app = typer.Typer(
    help="samark: robust sentence-level watermarks for LLM text, with calibrated p-values.",
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


centring_app = typer.Typer(
    help="Centring references: hold each key's false-positive rate on your own domain.",
    no_args_is_help=True,
)
app.add_typer(centring_app, name="centring")
