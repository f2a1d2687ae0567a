"""When the SQLite record searches its approximate index, and how the index is kept in step
with the record's table (:mod:`~samark.provenance.ivf_index` is the index itself).

- **Chosen by size**: searches use it from ``threshold`` stored sentences on, where faiss
  is installed; below, the store's exact search answers, as before. A record that grows
  past the threshold has its index built by the first search that finds it so large
  (``samark record index`` builds it ahead, without that wait).
- **In step**: every insert of this process adds its rows to a loaded index; a search
  first replays the rows any other process added; a deletion drops its rows and rewrites
  the file at once (where faiss is not installed to read the file, the file goes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from samark.provenance import ivf_index
from samark.provenance.ivf_index import SentenceIndex
from samark.provenance.store import ProvenanceError, StoreBinding, redact

ReadTransaction = Callable[[], AbstractContextManager[sqlite3.Connection]]
Failures = Callable[[str], AbstractContextManager[None]]


class IndexKeeper:
    """The approximate index of one open SQLite record (its caller holds the store's lock).

    ``read`` opens one read transaction of the store, ``failures(what)`` turns SQLite's
    and the file system's errors into :class:`ProvenanceError`, ``table`` and ``meta``
    are the store's tables."""

    def __init__(
        self,
        url: str,
        path: Path,
        threshold: int | None,
        read: ReadTransaction,
        failures: Failures,
        table: str,
        meta: str,
    ) -> None:
        self.url = url
        self.path = path
        self.threshold = threshold
        self.index: SentenceIndex | None = None
        self._tried = False
        self._read = read
        self._failures = failures
        self._table = table
        self._meta = meta

    def deletions(self, conn: sqlite3.Connection) -> int:
        """How many deletions the record has seen (any process's)."""
        row = conn.execute(f"SELECT value FROM {self._meta} WHERE name = 'deletions'").fetchone()
        return int(row[0])

    def build(
        self,
        binding: StoreBinding | None,
        started: Callable[[int], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> SentenceIndex:
        """The index of every stored sentence, built anew and written."""
        if binding is None:
            raise ProvenanceError(f"the record {redact(self.url)} holds nothing yet")
        with self._read() as conn:
            if started is not None:
                started(int(conn.execute(f"SELECT COUNT(*) FROM {self._table}").fetchone()[0]))
            index = ivf_index.build(
                self.path,
                conn,
                self._table,
                binding.dim,
                owner(binding),
                self.deletions(conn),
                progress,
            )
        self._save(index)
        self.index, self._tried = index, True
        return index

    def loaded(self, binding: StoreBinding | None) -> SentenceIndex | None:
        """The index, read from its file the first time (None: no file, or no faiss)."""
        if self.index is None and not self._tried and binding is not None:
            self._tried = True
            if ivf_index.faiss_available():
                self.index = SentenceIndex.load(self.path, binding.dim, owner(binding))
        return self.index

    def catch_up(self) -> None:
        """The loaded index brought up to the record (its file written where due)."""
        index = self.index
        if index is None:
            return
        with self._read() as conn:
            ivf_index.catch_up(index, conn, self._table, self.deletions(conn))
        if index.save_due():
            self._save(index)

    def searched(
        self, binding: StoreBinding | None, stored: Callable[[], int]
    ) -> SentenceIndex | None:
        """The index where a search uses it (see the module docstring); ``stored()``
        counts the record's sentences, where there is no index yet."""
        if self.threshold is None or not ivf_index.faiss_available():
            return None
        index = self.loaded(binding)
        if index is not None:
            self.catch_up()
            return index if len(index) >= self.threshold else None
        count = stored()
        if count < self.threshold:
            return None
        ivf_index.log.warning(
            "building the approximate index of the record %s (%d sentences); build it "
            "ahead with `samark record index`",
            redact(self.url),
            count,
        )
        return self.build(binding)

    def stored_count(self) -> int:
        """The rows stored, or only the highest row id (an upper bound, found at once)
        where that is below the threshold."""
        with self._read() as conn:
            top = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {self._table}").fetchone()
            if self.threshold is not None and int(top[0]) < self.threshold:
                return int(top[0])
            return int(conn.execute(f"SELECT COUNT(*) FROM {self._table}").fetchone()[0])

    def deleted(self, binding: StoreBinding | None) -> None:
        """After a deletion: the erasure reaches the index file now."""
        if not self.path.exists():
            return
        index = self.loaded(binding)
        if index is None:
            self.path.unlink(missing_ok=True)
            return
        self.catch_up()
        self._save(index)

    def close(self) -> None:
        """Write what the file lacks (where writing fails, the next open replays it from
        the record, which holds every row)."""
        index, self.index = self.index, None
        if index is not None and index.unsaved:
            try:
                index.save()
            except OSError as exc:
                ivf_index.log.warning("could not write %s: %s", self.path, exc)

    def _save(self, index: SentenceIndex) -> None:
        with self._failures("write the index of"):
            try:
                index.save()
            except OSError as exc:
                raise ProvenanceError(f"cannot write the record index {self.path}: {exc}") from None


def owner(binding: StoreBinding) -> str:
    """What binds an index file to its record: the record key's and the embedder's public
    fingerprints."""
    return f"{binding.record_key}/{binding.embedder_fingerprint}"
