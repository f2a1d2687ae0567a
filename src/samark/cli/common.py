"""What every command of the ``samark`` command line shares: its consoles, errors,
progress display, and how it reads text and keys."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from samark.errors import SamarkError
from samark.schemes.catalog import option_help
from samark.text import counted

if TYPE_CHECKING:
    from samark.keys import WatermarkKey

err = Console(stderr=True)
out = Console()


def _check_key_file(
    ctx: typer.Context, param: typer.CallbackParam, value: Path | None
) -> Path | None:
    """--key is read as the command line is parsed, before any model loads: a missing or
    damaged key file fails at once (exit 2). The default (``samark.key``) is not needed
    where --keyring is given (typer parses the options given before the defaults)."""
    if ctx.resilient_parsing or value is None:
        return value
    # by name: typer may bring its own copy of click's ParameterSource
    source = ctx.get_parameter_source(param.name or "key")
    given = getattr(source, "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")
    if not given:
        if ctx.params.get("keyring") is not None:
            return value
        if not value.exists():
            raise fail(
                f"no key file {value}: make one with `samark keygen {value}`, or name "
                "yours with --key"
            )
    from samark.keys import WatermarkKey

    try:
        WatermarkKey.load(value)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    return value


KeyOption = Annotated[
    Path,
    typer.Option("--key", "-k", help="Key file from `samark keygen`.", callback=_check_key_file),
]


def require_positive(**options: int) -> None:
    """Fail (exit 2) unless every option is at least 1; named as the user typed them."""
    for name, value in options.items():
        if value < 1:
            raise fail(f"--{name.replace('_', '-')} must be at least 1, got {value}")


def fail(message: str, code: int = 2) -> typer.Exit:
    # the message is text, not markup: "pip install 'samark[server]'" keeps its brackets
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def progress() -> Progress | LineProgress:
    """A live bar on a terminal; elsewhere (CI logs, nohup) plain lines, so that a long job
    is never silent."""
    if not err.is_terminal:
        return LineProgress()
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


class LineTask(TypedDict):
    """A :class:`LineProgress` task: its description, total and unit, its count, the
    count last printed and when its line was last shown."""

    description: str
    total: float | None
    unit: object
    done: float
    printed: float
    shown: float


class LineProgress:
    """The subset of rich's Progress the commands use, as stderr lines: a task's
    description when it starts, each new one as it stands (it says what happened: a
    sentence chosen), and while the description stays the same, its count at most once
    every ``every`` seconds and once at the end ("detecting runs.jsonl: 40/210 records
    (12 s)")."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self.tasks: dict[TaskID, LineTask] = {}
        self.start = time.monotonic()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task, state in self.tasks.items():
            if state["done"] != state["printed"]:
                self._print_count(task)

    def add_task(self, description: str, total: float | None = None, **fields: object) -> TaskID:
        task = TaskID(len(self.tasks))
        self.tasks[task] = {
            "description": description,
            "total": total,
            "unit": fields.get("unit", ""),
            "done": 0,
            "printed": 0,
            "shown": time.monotonic(),
        }
        err.print(description, highlight=False, soft_wrap=True)  # what starts now
        return task

    def update(
        self, task: TaskID, *, completed: float | None = None, description: str | None = None
    ) -> None:
        state = self.tasks[task]
        if completed is not None:
            state["done"] = completed
        if description is not None and description != state["description"]:
            state["description"] = description
            state["shown"] = time.monotonic()
            state["printed"] = state["done"]
            err.print(description, highlight=False, soft_wrap=True)
        elif time.monotonic() - state["shown"] >= self.every:
            self._print_count(task)

    def advance(self, task: TaskID, amount: float = 1) -> None:
        self.update(task, completed=self.tasks[task]["done"] + amount)

    def _print_count(self, task: TaskID) -> None:
        state = self.tasks[task]
        state["shown"] = time.monotonic()
        state["printed"] = state["done"]
        total = state["total"]
        count = f"{state['done']:g}/{total:g}" if total else f"{state['done']:g}"
        unit = f" {state['unit']}" if state["unit"] else ""
        elapsed = time.monotonic() - self.start
        err.print(
            f"{state['description']}: {count}{unit} ({elapsed:.0f} s)",
            highlight=False,
            soft_wrap=True,
        )


def duration(seconds: float) -> str:
    """A time a person reads at a glance: "40 s", "3 min", "1 h 5 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def sentence_progress(
    bar: Progress | LineProgress, task: TaskID, total: int
) -> Callable[[str, Mapping[str, Any]], None]:
    """An ``on_sentence`` callback that shows, per chosen sentence, its candidates, how
    many matched the key's pattern, its time, and the time the rest will take at the
    pace so far."""
    last = time.monotonic()
    done = 0

    start = last

    def on_sentence(sentence: str, step: Mapping[str, Any]) -> None:
        nonlocal last, done
        now = time.monotonic()
        done += 1
        left = (now - start) / done * (total - done)
        eta = f"; about {duration(left)} left" if done < total else ""
        bar.update(
            task,
            completed=done,
            description=(
                f"sentence {done}/{total}: {counted(step['candidates'], 'candidate')}, "
                f"{step['matched']} matched, {now - last:.1f} s{eta}"
            ),
        )
        last = now

    return on_sentence


#: ``--cells``, ``--null-stop`` and ``--statistic``: options some schemes declare
#: (:mod:`samark.schemes.options`), with their declared help; a scheme that does not
#: declare one refuses it (:func:`refuse_scheme_options`)
CellsOption = Annotated[int | None, typer.Option("--cells", help=option_help("cells"))]
NullStopOption = Annotated[int | None, typer.Option(help=option_help("null_stop"), min=1)]
StatisticOption = Annotated[str | None, typer.Option(help=option_help("statistic"))]


def refuse_scheme_options(scheme_name: str, **given: object) -> None:
    """Fail (exit 2) on a given option (not None) that scheme ``scheme_name`` does not
    declare, or a value outside its choices: the declaration's one wording."""
    from samark.schemes.base import scheme_info
    from samark.schemes.options import refuse_undeclared

    try:
        refuse_undeclared(scheme_name, scheme_info(scheme_name).options, given)
    except SamarkError as exc:
        raise fail(str(exc)) from None


def cells_field(cells: int | None) -> dict[str, Any]:
    """The scheme field of a --cells value (none where it was left out: the scheme's
    default)."""
    return {} if cells is None else {"cells": cells}


def check_cells(cells: int | None, scheme_name: str) -> None:
    """Fail (exit 2) on a --cells value that scheme ``scheme_name`` cannot use."""
    if cells is None:
        return
    refuse_scheme_options(scheme_name, cells=cells)
    from samark.keys.samark_material import check_cells as valid

    try:
        valid(cells)
    except ValueError as exc:
        raise fail(f"--{exc}") from None


#: ``--text``: the argument is the text itself, even where it looks like a file name
TextFlag = Annotated[
    bool,
    typer.Option(
        "--text",
        help="Take the argument as the text itself, never as a file name.",
    ),
]

#: a one-word argument with a path separator, a leading '~', or a file extension: meant as
#: a file name (``nofile.txt``, ``runs/a``), never scored or continued as text
_PATH_LIKE = re.compile(r"[^\s]*(?:[/\\][^\s]*|\.[A-Za-z][A-Za-z0-9]{0,9})|~[^\s]*")


def looks_like_path(source: str) -> bool:
    """Whether ``source`` reads as a file name: one word (no whitespace) that contains a
    path separator, starts with '~', or ends in an extension such as ``.txt``."""
    return _PATH_LIKE.fullmatch(source) is not None


@dataclass(frozen=True)
class TextInput:
    """A text a command read, and where from (for its messages)."""

    text: str
    origin: str  # "the text", "stdin", or the file's path


def read_text(source: str | None, *, literal: bool = False) -> TextInput:
    """The text a command was given: with ``literal`` (``--text``) the argument itself;
    else stdin ('-' or nothing), a file ('@file', or an existing file's path), or the
    argument as text. A one-word argument that looks like a file name but names no file
    is an error (exit 2), never text: a mistyped file name is not scored."""
    if literal:
        if source is None:
            raise fail("--text takes the text itself as the argument")
        return TextInput(source, "the text")
    if source is None or source == "-":
        if sys.stdin.isatty():
            raise fail("no text given: pass TEXT, a file, or pipe text on stdin")
        return TextInput(_decode(sys.stdin.buffer.read(), "stdin"), "stdin")
    if source.startswith("@"):
        return _read_file(Path(source[1:]))
    if len(source) < 4096 and "\n" not in source:
        path = Path(source).expanduser()
        if is_file(path):
            return _read_file(path)
        if looks_like_path(source):
            if _is_dir(path):
                raise fail(f"{source} is a folder, not a text file")
            raise fail(f"{source}: no such file (to use these words as the text, add --text)")
    return TextInput(source, "the text")


def _read_file(path: Path) -> TextInput:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror}") from None
    return TextInput(_decode(data, str(path)), str(path))


def _decode(data: bytes, origin: str) -> str:
    """``data`` as text, refused as the server refuses it (:mod:`samark.intake`)."""
    from samark.intake import TextRefused, decode

    try:
        return decode(data, origin)
    except TextRefused as exc:
        raise fail(str(exc)) from None


def require_sentences(given: TextInput, what: str = "text") -> None:
    """Fail (exit 2) before any model loads when ``given`` has no sentence."""
    from samark.segment import split_sentences

    if not split_sentences(given.text):
        raise fail(f"{given.origin} is empty: no sentence to {what}")


def is_file(path: Path) -> bool:
    """Whether ``path`` names a file; a text too long to be a file name is not one."""
    try:
        return path.is_file()
    except OSError:  # ENAMETOOLONG: a one-line text of more than 255 bytes
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def check_new_file(path: Path, what: str, *, force: bool = False) -> None:
    """Fail (exit 2) before any work where ``path`` cannot be written as a new ``what``:
    it exists (unless ``force``), is a folder, or its folder is missing or read-only."""
    if _is_dir(path):
        raise fail(f"{path} is a folder: name the {what} to write")
    if path.exists() and not force:
        raise fail(f"{path} exists; refusing to overwrite a {what} (--force replaces it)")
    parent = path.parent
    if not _is_dir(parent):
        raise fail(f"cannot write {what} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise fail(f"cannot write {what} {path}: folder {parent} is not writable")


def check_embedder_name(name: str) -> None:
    """Fail (exit 2) before loading where ``name`` is neither an embedder preset nor a
    folder (the preset's package may still be missing: loading says so)."""
    from samark.models import preset

    known = preset(name)
    if known is not None and known.kind == "embedder":
        return
    if not _is_dir(Path(name).expanduser()):
        from samark.models import PRESETS

        names = ", ".join(n for n, p in PRESETS.items() if p.kind == "embedder")
        raise fail(
            f"unknown embedder {name!r}: use a preset ({names}) or a local "
            "sentence-transformers folder"
        )


def load_key(key: Path) -> WatermarkKey:
    from samark.keys import WatermarkKey

    loaded = WatermarkKey.load(key)
    if WatermarkKey.permissions_too_open(key):
        err.print(
            f"[yellow]warning:[/] {key} is readable by other users; a watermark key is a "
            f"secret (chmod 600 {key})",
            soft_wrap=True,
        )
    return loaded
