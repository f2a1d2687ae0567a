"""``samark record``: the provenance record's upkeep (retention, deletion, a summary, a
copy into another store), and what ``generate --record`` and ``detect --record`` share
(docs/provenance.md)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from samark.cli.app import app
from samark.cli.common import err, fail, load_key, progress
from samark.errors import SamarkError
from samark.text import counted

if TYPE_CHECKING:
    from samark.embed import Embedder
    from samark.provenance import ProvenanceRecord
    from samark.provenance.store import ProvenanceStore

record_app = typer.Typer(
    help="The provenance record of served sentences: retention, deletion and migration.",
    no_args_is_help=True,
)
app.add_typer(record_app, name="record")

_URL_HELP = (
    "The provenance record: sqlite:///relative/record.db, sqlite:////absolute/record.db, "
    "a file path, or postgresql://user@host/dbname, its password in PGPASSWORD or ~/.pgpass, "
    "never in the URL (docs/provenance.md)."
)

#: ``--record URL`` of generate and detect
RecordOption = Annotated[str | None, typer.Option("--record", help=_URL_HELP)]
UrlArgument = Annotated[str, typer.Argument(help=_URL_HELP)]


def check_record_url(url: str | None) -> None:
    """Fail (exit 2) on a record URL no backend reads, before any model loads."""
    if url is None:
        return
    from samark.provenance import ProvenanceError, check_url

    try:
        check_url(url)
    except ProvenanceError as exc:
        raise fail(str(exc)) from None


def check_record_options(url: str | None, store_text: bool, keyring: Path | None) -> None:
    """generate's record options, checked before any model loads."""
    if store_text and url is None:
        raise fail("--store-text stores the text in a --record")
    if url is not None and keyring is not None:
        raise fail("--record records under one --key; a keyring's record is not supported yet")
    check_record_url(url)


def open_record(
    url: str, key: Path, embedder: Embedder | None = None, *, threshold: float | None = None
) -> ProvenanceRecord:
    """The record at ``url`` under the key file's record key, with ``embedder`` (the
    scheme's, where it has one; else the key's own embedder, loaded)."""
    from samark.embed import load_embedder
    from samark.provenance import ProvenanceRecord

    try:
        watermark_key = load_key(key)
        if embedder is None:
            embedder = load_embedder(watermark_key.embedder.name)
        watermark_key.check_embedder(embedder.identity)
        return ProvenanceRecord.open(url, watermark_key, embedder, threshold=threshold)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None


def record_served(record: ProvenanceRecord, sentences: Sequence[str], *, store_text: bool) -> str:
    """Record one generation's sentences under a fresh request id; says so on stderr."""
    from samark.provenance.store import redact

    try:
        request_id: str = record.record(list(sentences), store_text=store_text)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    kept = "with their text" if store_text else "hashes and embeddings, no text"
    err.print(
        f"recorded {counted(len(sentences), 'sentence')} ({kept}) in "
        f"{redact(record.store.url)} as request {request_id}",
        highlight=False,
        soft_wrap=True,
    )
    return request_id


@contextlib.contextmanager
def _failing(store: ProvenanceStore) -> Iterator[ProvenanceStore]:
    """``store``, closed at the end; its errors (a database gone mid-command) a clear
    message and exit 2, not a traceback."""
    from samark.provenance import ProvenanceError

    try:
        yield store
    except ProvenanceError as exc:
        raise fail(str(exc)) from None
    finally:
        store.close()


def _open_keyless(url: str) -> ProvenanceStore:
    from samark.provenance import ProvenanceError, open_store

    try:
        return open_store(url)
    except ProvenanceError as exc:
        raise fail(str(exc)) from None


@record_app.command("prune")
def prune(
    url: UrlArgument,
    older_than: Annotated[
        float,
        typer.Option(
            "--older-than", help="Delete every sentence stored more than DAYS days ago.", min=0
        ),
    ],
) -> None:
    """Retention: delete the sentences stored more than DAYS days ago.

    Needs no key: deletion reveals nothing."""
    from samark.provenance.entries import iso_utc, utc_now

    cutoff = utc_now() - timedelta(days=older_than)
    with _failing(_open_keyless(url)) as store:
        deleted = store.delete_older_than(cutoff)
        left = store.count()
    typer.echo(json.dumps({"deleted": deleted, "before": iso_utc(cutoff), "stored": left}))
    err.print(
        f"deleted {counted(deleted, 'sentence')} stored before {iso_utc(cutoff)}; {left} left",
        highlight=False,
    )


@record_app.command("forget")
def forget(
    url: UrlArgument,
    request: Annotated[
        list[str],
        typer.Option("--request", help="A request id whose sentences to delete (repeatable)."),
    ],
) -> None:
    """Delete every sentence of the requests named (a person's erasure request).

    Needs no key. Exits 1 when none of them was found."""
    with _failing(_open_keyless(url)) as store:
        deleted = {r: store.delete_request(r) for r in request}
    typer.echo(json.dumps({"deleted": deleted}))
    total = sum(deleted.values())
    err.print(
        f"deleted {counted(total, 'sentence')} of {counted(len(request), 'request')}",
        highlight=False,
    )
    raise typer.Exit(0 if total else 1)


@record_app.command("info")
def info(url: UrlArgument) -> None:
    """What a record holds: its count of sentences and its public binding.

    The binding is the record key's fingerprint (never the key) and the embedder. Needs
    no key."""
    with _failing(_open_keyless(url)) as store:
        binding = store.binding
        out: dict[str, object] = {"stored": store.count()}
    if binding is not None:
        out.update(binding.to_meta())
        out["dim"] = binding.dim
    typer.echo(json.dumps(out))


@record_app.command("migrate")
def migrate(
    source: Annotated[
        str, typer.Argument(help="The record to copy: usually the SQLite default. " + _URL_HELP)
    ],
    destination: Annotated[
        str,
        typer.Argument(
            help="Where to copy it: usually postgresql://user@host/dbname (the password in "
            "PGPASSWORD or ~/.pgpass); made there where it is new."
        ),
    ],
    batch_size: Annotated[
        int,
        typer.Option("--batch-size", help="Sentences a batch (one transaction).", min=1),
    ] = 1000,
) -> None:
    """Copy a record into another store (the embedded SQLite default into PostgreSQL).

    Every sentence is copied whole (keyed hash, embedding, request, key id, time, text),
    in batches of one transaction each. Running it again copies only what the destination
    lacks, so an interrupted copy is resumed, and a copy taken while the service still
    writes the source is completed after the service has moved. A destination that holds
    a record of another key or embedder is refused. The source is only read. Needs no
    key."""
    from samark.provenance import ProvenanceError
    from samark.provenance.migrate import migrate_record
    from samark.provenance.store import redact

    with progress() as bar:
        tasks = []

        def started(total: int) -> None:
            tasks.append(bar.add_task(f"copying {redact(source)}", total=total, unit="sentences"))

        try:
            result = migrate_record(
                source,
                destination,
                batch=batch_size,
                started=started,
                progress=lambda done: bar.advance(tasks[0], done),
            )
        except ProvenanceError as exc:
            raise fail(str(exc)) from None
    typer.echo(
        json.dumps(
            {"source": redact(source), "destination": redact(destination), **result.to_dict()}
        )
    )
    err.print(
        f"copied {counted(result.copied, 'sentence')} of {result.read} into "
        f"{redact(destination)} ({result.present} there already); it holds {result.stored}",
        highlight=False,
        soft_wrap=True,
    )


@record_app.command("index")
def index(url: UrlArgument) -> None:
    """Build (or rebuild) the approximate index of an SQLite record, with progress.

    The index (faiss IVF over 8-bit vectors, a file beside the record: RECORD.index) is
    what the record searches from 100,000 sentences on; a search builds it the first time
    it finds the record that large, and this builds it ahead, or anew. Needs the
    ``record-index`` extra (faiss-cpu) and no key. PostgreSQL indexes with pgvector's
    HNSW instead (docs/provenance.md)."""
    from samark.provenance import ProvenanceError
    from samark.provenance.ivf_index import faiss_available
    from samark.provenance.sqlite_store import SqliteStore
    from samark.provenance.store import redact

    if not faiss_available():
        raise fail("the record's index needs faiss: pip install 'samark[record-index]'")
    store = _open_keyless(url)
    if not isinstance(store, SqliteStore):
        store.close()
        raise fail(
            f"{redact(url)} is not an SQLite record: a PostgreSQL record is indexed with "
            "pgvector's HNSW (docs/provenance.md)"
        )
    with _failing(store), progress() as bar:
        tasks = []

        def started(total: int) -> None:
            tasks.append(bar.add_task(f"indexing {redact(url)}", total=total, unit="sentences"))

        try:
            built = store.build_index(
                started=started, progress=lambda done: bar.advance(tasks[0], done)
            )
        except ProvenanceError as exc:
            raise fail(str(exc)) from None
        out: dict[str, Any] = {
            "record": redact(url),
            "index": str(built.path),
            "indexed": len(built),
            "lists": built.lists,
            "bytes": built.path.stat().st_size,
            "threshold": store.index.threshold,
        }
    typer.echo(json.dumps(out))
    err.print(
        f"indexed {counted(out['indexed'], 'sentence')} of {redact(url)} in {built.path} "
        f"({out['lists']} lists, {out['bytes'] / 1e6:.1f} MB)",
        highlight=False,
        soft_wrap=True,
    )
