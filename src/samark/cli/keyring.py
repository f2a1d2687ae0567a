"""``samark keyring``: make, grow, list and retire a ring of labelled keys."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from samark.cli.common import (
    check_cells,
    check_embedder_name,
    err,
    fail,
    load_key,
    out,
)
from samark.errors import SamarkError
from samark.models import DEFAULT_EMBEDDER

if TYPE_CHECKING:
    from samark.detection.key_check import KeyCheck
    from samark.embed import Embedder
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring
from samark.schemes.catalog import DEFAULT_SCHEME
from samark.text import counted

keyring_app = typer.Typer(
    help="Keyrings: every key you have used, for rotation, attribution and payload "
    "(docs/operators.md).",
    no_args_is_help=True,
)
RingArgument = Annotated[Path, typer.Argument(help="The keyring folder.")]
ScreenOption = Annotated[
    list[str] | None,
    typer.Option(
        "--screen",
        help="Human text every new key must pass `samark check-key` on (a data set name or "
        "a .jsonl / .parquet file; repeat for several domains); a key that fails is redrawn.",
    ),
]
ScreenTextsOption = Annotated[
    int, typer.Option(help="With --screen: texts per source (their first 10 sentences).")
]


def _screen_texts(screen: list[str] | None, texts: int) -> list[list[str]]:
    """The human texts of each --screen source (their first 10 sentences), read and
    checked before any model loads."""
    if not screen:
        return []
    from samark.cli.loading import human_heads
    from samark.detection.key_check import MIN_TEXTS

    if texts < MIN_TEXTS:
        raise fail(f"--screen-texts must be at least {MIN_TEXTS}, got {texts}")
    corpora = [human_heads(source, "text", 10, texts) for source in screen]
    for source, human in zip(screen, corpora, strict=True):
        if len(human) < MIN_TEXTS:
            raise fail(
                f"--screen {source}: a key check needs at least {MIN_TEXTS} human texts "
                f"of at least 3 sentences; it has {len(human)}"
            )
    return corpora


#: the scheme a new ring's keys are made for (its payload bits and cells are the layered
#: mark's)
RING_SCHEME = DEFAULT_SCHEME


def _key_maker(
    embedder: Embedder,
    corpora: list[list[str]],
    cells: int,
    null_draws: str | None = None,
    scheme: str | None = RING_SCHEME,
) -> Callable[[], tuple[WatermarkKey, int]]:
    """Draws a new key for ``embedder`` naming ``cells`` keyed cells (and ``null_draws``:
    default, a new key's), made for ``scheme``; with screening ``corpora``, one that passes
    ``check-key`` at p < 0.01 on each (redrawn otherwise). Returns (key, refused)."""
    from samark.embed import new_key

    def make() -> WatermarkKey:
        return new_key(embedder, cells=cells, null_draws=null_draws, scheme=scheme)

    if not corpora:
        return lambda: (make(), 0)
    from samark.detection.key_check import check_key, screen_key, screening_detector

    def audit(key: WatermarkKey) -> list[KeyCheck]:
        detector = screening_detector(key, embedder)
        return [check_key(detector, human) for human in corpora]

    err.print(f"screening each new key on {sum(map(len, corpora))} human texts ...")
    return lambda: screen_key(make, audit)


def _ring_cells(cells: int | None, flag_bits: int) -> int:
    """The keyed cells of a new ring's keys: 64 (``DEFAULT_CELLS``), or static pivots where
    the ring writes payload bits in the flag pattern (a cell's flags are the key's)."""
    from samark.keys.samark_material import DEFAULT_CELLS

    if cells is None:
        return 0 if flag_bits else DEFAULT_CELLS
    check_cells(cells, RING_SCHEME)
    if cells and flag_bits:
        raise fail(
            "--flag-bits writes the payload in the flag pattern, which keyed cells do not "
            "have (a cell's flags are the key's): use --cells 0, or no --flag-bits"
        )
    return cells


@keyring_app.command("new")
def keyring_new(
    ring: RingArgument,
    embedder: Annotated[
        str, typer.Option(help="Embedder preset or local folder every key is bound to.")
    ] = DEFAULT_EMBEDDER,
    keys: Annotated[
        int,
        typer.Option(
            help="Keys to make now (a payload of b bits needs 2**b keys; 0: an empty ring)."
        ),
    ] = 1,
    prefix: Annotated[str, typer.Option(help="Label prefix of the keys made now.")] = "key",
    screen: ScreenOption = None,
    screen_texts: ScreenTextsOption = 300,
    flag_bits: Annotated[
        int,
        typer.Option(
            help="Payload bits in the mark's flag pattern, beside the key's position (at most "
            "the channels - 1: 1 by default); free in detection power (docs/operators.md)."
        ),
    ] = 0,
    cells: Annotated[
        int | None,
        typer.Option(
            help="Keyed semantic cells every key names for its layered mark (default 64; 0: "
            "static pivots, the default with --flag-bits)."
        ),
    ] = None,
) -> None:
    """Create a keyring folder (mode 0700) and make its first keys (mode 0600).

    With --screen, every key is audited on human text first (docs/operators.md)."""
    from samark.embed import load_embedder
    from samark.keys.keyring import Keyring, check_flag_bits, check_label

    if keys < 0:
        raise fail(f"--keys must be 0 (an empty ring) or more, got {keys}")
    width = max(2, len(str(keys - 1)))
    if ring.exists() and (not ring.is_dir() or any(ring.iterdir())):
        raise fail(f"{ring} exists and is not an empty folder; refusing to use it")
    try:
        check_label(f"{prefix}-0")
        check_flag_bits(flag_bits)  # before any key is drawn
    except SamarkError as exc:
        raise fail(str(exc)) from None
    ring_cells = _ring_cells(cells, flag_bits)
    check_embedder_name(embedder)
    corpora = _screen_texts(screen, screen_texts)  # all before any model loads
    try:
        emb = load_embedder(embedder)
        with emb.remembering():  # the screening texts are embedded once for every key
            make = _key_maker(emb, corpora, ring_cells)
            drawn = [make() for _ in range(keys)]  # all keys before the folder exists
        made = Keyring.create(ring, emb.identity, flag_bits=flag_bits)
        for i, (key, _) in enumerate(drawn):
            made.add(key, f"{prefix}-{i:0{width}d}")
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    bits = made.payload_bits
    carries = f"; it carries a {bits}-bit payload" if bits else ""
    refused = sum(r for _, r in drawn)
    screened = f"; the screen refused {counted(refused, 'key')}" if screen else ""
    made_keys = counted(len(made), "key")
    err.print(f"made keyring {ring} with {made_keys} for {emb.name}{carries}{screened}")


@keyring_app.command("add")
def keyring_add(
    ring: RingArgument,
    label: Annotated[str, typer.Option(help="The new key's label (a deployment, a date).")],
    key: Annotated[
        Path | None,
        typer.Option("--key", "-k", help="Add this existing key file (else make a new key)."),
    ] = None,
    screen: ScreenOption = None,
    screen_texts: ScreenTextsOption = 300,
) -> None:
    """Add a key to the ring: an existing key file (copied in) or a new one.

    With --screen, the new key is one that passes check-key on human text. The newest key
    that is not retired marks text by default."""
    from samark.embed import load_embedder
    from samark.keys.keyring import Keyring, check_label

    if key is not None and screen:
        raise fail("--screen draws a new key; audit an existing one with `samark check-key`")
    refused = 0
    try:
        opened = Keyring.load(ring)  # before any model loads: the ring, the label, the texts
        check_label(label)
        if label in opened.labels():
            raise fail(f"the ring already has a key labelled {label!r}")
        if key is not None:
            added = load_key(key)
        else:
            corpora = _screen_texts(screen, screen_texts)
            emb = load_embedder(opened.embedder.name)
            with emb.remembering():
                added, refused = _key_maker(emb, corpora, *_draw_of(opened))()
        entry = opened.add(added, label)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    screened = f"; the screen refused {counted(refused, 'key')}" if screen else ""
    err.print(f"added key {entry.key_id} as {entry.label!r} (position {len(opened) - 1}){screened}")


def _draw_of(ring: Keyring) -> tuple[int, str | None, str | None]:
    """A new key's cells, null draws and scheme in ``ring``: its keys' (a ring scores its
    keys in one pass only when they share them), else a new ring's."""
    for entry in ring.entries:
        key = ring.key(entry.label)
        return int(key.samark.cells), str(key.samark.null_draws), key.made_for()
    return _ring_cells(None, ring.flag_bits), None, RING_SCHEME


@keyring_app.command("list")
def keyring_list(
    ring: RingArgument,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """The ring's keys: position, label, public id, dates (never a secret)."""
    from samark.keys.keyring import Keyring

    try:
        opened = Keyring.load(ring)
        current = opened.current().label if any(e.active for e in opened.entries) else None
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if as_json:
        record = {
            "embedder": opened.embedder.name,
            "payload_bits": opened.payload_bits,
            "flag_bits": opened.flag_bits,
            "current": current,
            "keys": [e.to_dict() for e in opened.entries],
        }
        typer.echo(json.dumps(record))
        return
    table = Table(title=f"{ring} ({opened.embedder.name})")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("label")
    table.add_column("key id", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    table.add_column("status")
    for i, e in enumerate(opened.entries):
        if e.retired:
            status = f"retired {_minute(e.retired)}"
        else:
            status = "current: marks text" if e.label == current else "in use"
        table.add_row(str(i), e.label, e.key_id, _minute(e.created), status)
    out.print(table)
    if opened.payload_bits:
        flags = f", then {opened.flag_bits} in the flags" if opened.flag_bits else ""
        out.print(f"payload: {opened.payload_bits} bits (the key's position{flags})")


def _minute(value: str) -> str:
    """An ISO 8601 time of the ring as ``YYYY-MM-DD HH:MM`` in UTC (``--json`` keeps it
    whole); a value that does not parse is shown as it is."""
    from datetime import UTC

    from samark.keys.keyring import KeyringError, instant

    try:
        return instant(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    except KeyringError:
        return value


@keyring_app.command("retire")
def keyring_retire(
    ring: RingArgument,
    label: Annotated[str, typer.Argument(help="The key to retire.")],
) -> None:
    """Retire a key: it stops marking text and still detects it (old text stays provable)."""
    from samark.keys.keyring import Keyring

    try:
        entry = Keyring.load(ring).retire(label)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    err.print(f"retired {entry.label!r} (key {entry.key_id}) on {entry.retired}")
