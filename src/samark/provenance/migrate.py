"""Copying a record into another store: ``samark record migrate`` (the embedded SQLite
default to PostgreSQL, when one machine's file is outgrown).

Every stored sentence is copied whole: its keyed hash, its embedding as stored (float16),
its request id, key id, time and text (where one was stored). The destination is opened
under the source's own binding, so it is made with the source's record key fingerprint
and embedder where it is new, and refused (:class:`ProvenanceError`, nothing written)
where it holds a record of another key or embedder. No key is needed: the keyed hashes
are copied as they are, never recomputed.

Rows go in batches, each one transaction in the destination, so an interrupted copy
leaves whole batches. Running it again adds only what the destination lacks: a sentence
counts as present when the destination holds as many rows with its hash, request id, key
id, time and text as the source holds up to it (a sentence served twice in one request is
copied twice, once). So a copy can be taken while the source is still written to, and
taken again after the service has moved to the destination, to bring over the tail. The
source is only read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from samark.provenance.entries import RecordEntry, StoredSentence
from samark.provenance.sqlite_store import sqlite_path
from samark.provenance.store import (
    ProvenanceError,
    ProvenanceStore,
    StoreBinding,
    check_url,
    open_store,
    redact,
    url_scheme,
)

#: sentences a batch (one read of the source, one transaction in the destination)
DEFAULT_BATCH = 1000

#: what makes two rows the same stored sentence (the row number aside)
_Identity = tuple[bytes, str, str, datetime, str | None]


@dataclass(frozen=True)
class Migration:
    """What a copy did: ``read`` source rows, of which ``copied`` were added to the
    destination and ``present`` were there already; ``stored``: the destination's count
    at the end."""

    read: int
    copied: int
    present: int
    stored: int

    def to_dict(self) -> dict[str, int]:
        return {
            "read": self.read,
            "copied": self.copied,
            "present": self.present,
            "stored": self.stored,
        }


def migrate_record(
    source_url: str,
    destination_url: str,
    *,
    batch: int = DEFAULT_BATCH,
    started: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Migration:
    """Copy the record at ``source_url`` into ``destination_url`` (made there where it is
    new; see the module's docstring). ``started`` is called with the source's count once
    both are open, ``progress`` with the number of rows of each batch done."""
    check_url(source_url)
    check_url(destination_url)
    if _same_store(source_url, destination_url):
        raise ProvenanceError(f"{redact(source_url)} is both the source and the destination")
    source, binding = open_existing(source_url)
    try:
        try:
            destination = open_store(destination_url, binding)
        except ProvenanceError as exc:
            raise ProvenanceError(
                f"refusing to copy {redact(source_url)} into {redact(destination_url)}: {exc}"
            ) from None
        with destination:
            if started is not None:
                started(source.count())
            return copy_entries(source, destination, batch=batch, progress=progress)
    finally:
        source.close()


def open_existing(url: str) -> tuple[ProvenanceStore, StoreBinding]:
    """The record at ``url`` opened under its own binding, to be read whole, and that
    binding; nothing is made where there is no record (:class:`ProvenanceError`)."""
    with open_store(url) as keyless:
        binding = keyless.binding
    if binding is None:
        raise ProvenanceError(f"{redact(url)} holds no record (it was never bound)")
    return open_store(url, binding), binding


def copy_entries(
    source: ProvenanceStore,
    destination: ProvenanceStore,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> Migration:
    """Copy every row of ``source`` that ``destination`` lacks, ``batch`` rows a
    transaction (both opened with one binding)."""
    if batch < 1:
        raise ValueError(f"a batch holds at least one sentence, got {batch}")
    _check_same_binding(source, destination)
    read = copied = 0
    after = 0
    while rows := source.scan(after, batch):
        after = rows[-1][0]
        missing = _missing(source, destination, rows)
        destination.add(missing)
        read += len(rows)
        copied += len(missing)
        if progress is not None:
            progress(len(rows))
    return Migration(read=read, copied=copied, present=read - copied, stored=destination.count())


def _missing(
    source: ProvenanceStore, destination: ProvenanceStore, rows: list[tuple[int, RecordEntry]]
) -> list[RecordEntry]:
    """The entries of ``rows`` (one batch of the source, in row order) that the
    destination lacks: for each stored sentence, as many as the source holds up to the
    batch's last row, less what the destination holds."""
    last = rows[-1][0]
    digests = list(dict.fromkeys(entry.digest for _, entry in rows))
    wanted: Counter[_Identity] = Counter()
    held: Counter[_Identity] = Counter()
    for digest, found in zip(digests, source.lookup(digests), strict=True):
        wanted.update(_identity(digest, s) for s in found if s.row <= last)
    for digest, found in zip(digests, destination.lookup(digests), strict=True):
        held.update(_identity(digest, s) for s in found)
    missing = []
    for _, entry in rows:
        key = (entry.digest, entry.request_id, entry.key_id, entry.created, entry.text)
        if held[key] < wanted[key]:
            missing.append(entry)
            held[key] += 1
    return missing


def _identity(digest: bytes, sentence: StoredSentence) -> _Identity:
    return (digest, sentence.request_id, sentence.key_id, sentence.created, sentence.text)


def _check_same_binding(source: ProvenanceStore, destination: ProvenanceStore) -> None:
    if source.binding is None or destination.binding is None:
        raise ProvenanceError("both records must be opened with their binding to copy one")
    source.binding.check(destination.binding, redact(destination.url))


def _same_store(a: str, b: str) -> bool:
    if url_scheme(a) == url_scheme(b) == "sqlite":
        return sqlite_path(a).resolve() == sqlite_path(b).resolve()
    return a == b
