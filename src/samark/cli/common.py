"""What every command of the ``samark`` command line shares: its consoles, errors,
progress display, and how it reads text and keys."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

err = Console(stderr=True)
out = Console()

KeyOption = Annotated[Path, typer.Option("--key", "-k", help="Key file from `samark keygen`.")]


def fail(message: str, code: int = 2) -> typer.Exit:
    # the message is text, not markup: "pip install 'samark[server]'" keeps its brackets
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def progress() -> Any:
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


class LineProgress:
    """The subset of rich's Progress the commands use, as stderr lines: one when the
    description changes (a new sentence), else at most one every ``every`` seconds."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self.tasks: dict[int, dict[str, Any]] = {}
        self.start = time.monotonic()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task, state in self.tasks.items():
            if state["done"] != state["printed"]:
                self._print(task)

    def add_task(self, description: str, total: float | None = None) -> int:
        task = len(self.tasks)
        self.tasks[task] = {
            "description": description,
            "total": total,
            "done": 0,
            "printed": None,
            "shown": 0.0,
        }
        return task

    def update(
        self, task: int, *, completed: float | None = None, description: str | None = None
    ) -> None:
        state = self.tasks[task]
        changed = description is not None and description != state["description"]
        if description is not None:
            state["description"] = description
        if completed is not None:
            state["done"] = completed
        if changed or time.monotonic() - state["shown"] >= self.every:
            self._print(task)

    def advance(self, task: int, amount: float = 1) -> None:
        self.update(task, completed=self.tasks[task]["done"] + amount)

    def _print(self, task: int) -> None:
        state = self.tasks[task]
        state["shown"] = time.monotonic()
        state["printed"] = state["done"]
        total = state["total"]
        count = f"{state['done']:g}/{total:g}" if total else f"{state['done']:g}"
        elapsed = time.monotonic() - self.start
        err.print(f"{state['description']}: {count} ({elapsed:.0f} s)", highlight=False)


def sentence_progress(bar: Any, task: int, total: int) -> Any:
    """An ``on_sentence`` callback that shows, per chosen sentence, its candidates, how
    many matched the key's pattern, and its time."""
    last = time.monotonic()
    done = 0

    def on_sentence(sentence: str, step: Any) -> None:
        nonlocal last, done
        now = time.monotonic()
        done += 1
        bar.update(
            task,
            completed=done,
            description=(
                f"sentence {done}/{total}: {step['candidates']} candidates, "
                f"{step['matched']} matched, {now - last:.1f} s"
            ),
        )
        last = now

    return on_sentence


def read_text(source: str | None) -> str:
    """Text from an argument, '@file' / an existing file path, or stdin ('-' or nothing)."""
    if source is None or source == "-":
        if sys.stdin.isatty():
            raise fail("no text given: pass TEXT, a file, or pipe text on stdin")
        data = sys.stdin.buffer.read()
        origin = "stdin"
    else:
        path = Path(source[1:] if source.startswith("@") else source)
        if source.startswith("@") or (len(source) < 4096 and "\n" not in source and _is_file(path)):
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise fail(f"cannot read {path}: {exc.strerror}") from None
            origin = str(path)
        else:
            return source
    if b"\0" in data:
        raise fail(f"{origin} is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(f"{origin} is not UTF-8 text") from None


def _is_file(path: Path) -> bool:
    """Whether ``path`` names a file; a text too long to be a file name is not one."""
    try:
        return path.is_file()
    except OSError:  # ENAMETOOLONG: a one-line text of more than 255 bytes
        return False


def load_key(key: Path) -> Any:
    from samark.keys import WatermarkKey

    loaded = WatermarkKey.load(key)
    if WatermarkKey.permissions_too_open(key):
        err.print(
            f"[yellow]warning:[/] {key} is readable by other users; a watermark key is a "
            f"secret (chmod 600 {key})",
            soft_wrap=True,
        )
    return loaded
