"""``samark keyring``: make, grow, list and retire a ring of labelled keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from samark.cli.common import err, fail, load_key, out
from samark.errors import SamarkError
from samark.models import DEFAULT_EMBEDDER

keyring_app = typer.Typer(
    help="Keyrings: every key you have used, for rotation, attribution and payload "
    "(docs/operators.md).",
    no_args_is_help=True,
)
RingArgument = Annotated[Path, typer.Argument(help="The keyring folder.")]


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
) -> None:
    """Create a keyring folder (mode 0700) and make its first keys (mode 0600)."""
    from samark.embed import load_embedder, new_key
    from samark.keyring import Keyring, check_label

    if keys < 0:
        raise fail("--keys must be >= 0")
    width = max(2, len(str(keys - 1)))
    try:
        check_label(f"{prefix}-0")
        emb = load_embedder(embedder)
        made = Keyring.create(ring, emb.identity)
        for i in range(keys):
            made.add(new_key(emb), f"{prefix}-{i:0{width}d}")
    except SamarkError as exc:
        raise fail(str(exc)) from None
    bits = made.payload_bits
    carries = f"; it carries a {bits}-bit payload" if bits else ""
    err.print(f"made keyring {ring} with {len(made)} keys for {emb.name}{carries}")


@keyring_app.command("add")
def keyring_add(
    ring: RingArgument,
    label: Annotated[str, typer.Option(help="The new key's label (a deployment, a date).")],
    key: Annotated[
        Path | None,
        typer.Option("--key", "-k", help="Add this existing key file (else make a new key)."),
    ] = None,
) -> None:
    """Add a key to the ring: an existing key file (copied in) or a new one. The newest
    key that is not retired marks text by default."""
    from samark.embed import load_embedder, new_key
    from samark.keyring import Keyring

    try:
        opened = Keyring.load(ring)
        added = load_key(key) if key else new_key(load_embedder(opened.embedder.name))
        entry = opened.add(added, label)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    err.print(f"added key {entry.key_id} as {entry.label!r} (position {len(opened) - 1})")


@keyring_app.command("list")
def keyring_list(
    ring: RingArgument,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """The ring's keys: position, label, public id, dates (never a secret)."""
    from samark.keyring import Keyring

    try:
        opened = Keyring.load(ring)
        current = opened.current().label if any(e.active for e in opened.entries) else None
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if as_json:
        record = {
            "embedder": opened.embedder.name,
            "payload_bits": opened.payload_bits,
            "current": current,
            "keys": [e.to_dict() for e in opened.entries],
        }
        typer.echo(json.dumps(record))
        return
    table = Table(title=f"{ring} ({opened.embedder.name})")
    for column in ("#", "label", "key id", "created", "retired", ""):
        table.add_column(column)
    for i, e in enumerate(opened.entries):
        mark = "current" if e.label == current else ""
        table.add_row(str(i), e.label, e.key_id, e.created, e.retired or "", mark)
    out.print(table)
    if opened.payload_bits:
        out.print(f"payload: {opened.payload_bits} bits (the key's position)")


@keyring_app.command("retire")
def keyring_retire(
    ring: RingArgument,
    label: Annotated[str, typer.Argument(help="The key to retire.")],
) -> None:
    """Retire a key: it stops marking text and still detects it (old text stays provable)."""
    from samark.keyring import Keyring

    try:
        entry = Keyring.load(ring).retire(label)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    err.print(f"retired {entry.label!r} (key {entry.key_id}) on {entry.retired}")
