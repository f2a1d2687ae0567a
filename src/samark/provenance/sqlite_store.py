"""The embedded default store: one SQLite file (stdlib ``sqlite3``), no setup.

- **Durable.** WAL journal, ``synchronous=FULL``: an insert is one transaction, and once
  :meth:`SqliteStore.add` returns it survives a crash of the process (SIGKILL) and of the
  machine; a process killed mid-transaction leaves the file readable, without its
  uncommitted rows.
- **Shared.** Several processes may write one file: SQLite locks it, each waits up to
  ``timeout`` seconds for another's transaction (a network file system is not safe for
  SQLite: use a server backend there).
- **Search.** Below :data:`INDEX_THRESHOLD` sentences, exact nearest neighbours by numpy
  over every stored embedding (float16 on disk), held in memory as float32
  (:mod:`~samark.provenance.matrix`), loaded on the first search and then refreshed by
  row id: only rows added since are read; a deletion by any process makes the next search
  reload (3 KB and one 768-d product a sentence). From the threshold on, where faiss is
  installed (the ``record-index`` extra), an approximate IVF index in a file beside the
  record (:mod:`~samark.provenance.ivf_index`), built the first time a search finds the
  record that large (or ahead, by ``samark record index``), kept in step with every
  insert and deletion, and replayed from the record where a process died before writing
  it: 8-bit vectors (about 780 bytes a sentence), its best 10 candidates re-ranked by
  their exact stored rows.
- **Erasure.** ``secure_delete`` is on, so deleted rows are overwritten, and the WAL is
  checkpointed after a deletion; copies outside the file (backups) are the operator's.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from samark.provenance import ivf_index
from samark.provenance.entries import EMBEDDING_DTYPE, Neighbour, RecordEntry, StoredSentence
from samark.provenance.ivf_index import SentenceIndex
from samark.provenance.matrix import EmbeddingMatrix
from samark.provenance.sqlite_index import IndexKeeper
from samark.provenance.store import (
    BACKENDS,
    ProvenanceError,
    StoreBinding,
    redact,
    unit_embedding,
)

META = "provenance_meta"
SENTENCES = "provenance_sentences"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    f"""CREATE TABLE IF NOT EXISTS {SENTENCES} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        digest BLOB NOT NULL,
        embedding BLOB NOT NULL,
        request_id TEXT NOT NULL,
        key_id TEXT NOT NULL,
        created REAL NOT NULL,
        text TEXT
    )""",
    f"CREATE INDEX IF NOT EXISTS {SENTENCES}_digest ON {SENTENCES} (digest)",
    f"CREATE INDEX IF NOT EXISTS {SENTENCES}_request ON {SENTENCES} (request_id)",
    f"CREATE INDEX IF NOT EXISTS {SENTENCES}_created ON {SENTENCES} (created)",
)
_COLUMNS = "id, request_id, key_id, created, text"
#: at most this many values in one ``IN (...)`` (SQLite's default limit is 32766)
_BATCH = 500
#: from this many stored sentences on, search the approximate index where faiss is
#: installed (exact below). On a loaded 2-core machine the exact search's p99 stayed under
#: 50 ms below it (38 ms at 50,000; the 2026-11-28 study's 9.8 ms at 100,000) and went over
#: above it (69-166 ms at 100,000, 169-198 ms at 200,000; the study's 175 ms at 300,000),
#: while the index answered at p99 14-68 ms with recall@1 0.998-0.999 from 50,000 to
#: 200,000 and built in about 20 s at 100,000 (docs/results/2026-12-05-record-index)
INDEX_THRESHOLD = 100_000


def sqlite_path(url: str) -> Path:
    """The file of an SQLite URL: ``sqlite:///relative/path.db``,
    ``sqlite:////absolute/path.db`` (as SQLAlchemy writes them), or a plain path."""
    if "://" not in url:
        return Path(url).expanduser()
    rest = url.split("://", 1)[1]
    if not rest.startswith("/") or rest == "/" or "?" in rest:
        raise ProvenanceError(
            f"an SQLite record URL is sqlite:///relative/path.db or "
            f"sqlite:////absolute/path.db, got {redact(url)}"
        )
    return Path(rest[1:]).expanduser()


def _create_private(path: Path) -> None:
    """Make a new record file readable by its owner alone (0600), before SQLite opens it:
    the record is personal data (what was served, to whom). SQLite gives its WAL and shared
    memory files the database file's permissions. An existing file is left as it is."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise ProvenanceError(f"cannot create the record {path}: {exc.strerror}") from None
    os.close(fd)


@BACKENDS.register("sqlite")
class SqliteStore:
    """A record in one SQLite file (see the module's docstring)."""

    @staticmethod
    def check_url(url: str) -> None:
        sqlite_path(url)

    def __init__(
        self,
        url: str,
        binding: StoreBinding | None,
        *,
        timeout: float = 30.0,
        index_threshold: int | None = INDEX_THRESHOLD,
    ) -> None:
        self.url = url
        self.path = sqlite_path(url)
        if binding is None and not self.path.exists():
            raise ProvenanceError(f"there is no record at {redact(url)}")
        if not self.path.parent.is_dir():
            raise ProvenanceError(f"{self.path.parent} is not a folder: cannot make {redact(url)}")
        self._lock = threading.RLock()
        self._keyed = binding is not None
        self._closed = False
        _create_private(self.path)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.DatabaseError as exc:
            raise ProvenanceError(f"cannot open the record {redact(url)}: {exc}") from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            _set_wal(self._conn, timeout)
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA secure_delete = ON")
            self._binding = self._open(binding)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise ProvenanceError(f"{redact(url)} is not a readable samark record: {exc}") from None
        except ProvenanceError:
            self._conn.close()
            raise
        self._matrix: EmbeddingMatrix | None = None
        self._deletions = -1
        self.index = IndexKeeper(
            url,
            ivf_index.index_path(self.path),
            index_threshold,
            self._read,
            self._failures,
            SENTENCES,
            META,
        )

    @property
    def binding(self) -> StoreBinding | None:
        return self._binding

    # -- opening ------------------------------------------------------------------------
    def _open(self, binding: StoreBinding | None) -> StoreBinding | None:
        with self._write() as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if tables and META not in tables:
                raise ProvenanceError(
                    f"{self.path} is an SQLite file but not a samark record; refusing to "
                    "write into it"
                )
            for statement in _SCHEMA:
                conn.execute(statement)
            meta = dict(conn.execute(f"SELECT name, value FROM {META}").fetchall())
            if not meta and binding is not None:
                fresh = {**binding.new_store_meta(), "deletions": "0"}
                conn.executemany(f"INSERT INTO {META} VALUES (?, ?)", fresh.items())
                meta = fresh
        if not meta:
            return None
        stored = StoreBinding.read(meta, str(self.path))
        if binding is not None:
            binding.check(stored, redact(self.url))
        return stored

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE: no deadlock between
        two writers that both read first), committed or rolled back whole."""
        with self._lock, self._failures("write to"):
            conn = self._open_conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: a consistent snapshot across its statements."""
        with self._lock, self._failures("read"):
            conn = self._open_conn()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def _open_conn(self) -> sqlite3.Connection:
        if self._closed:
            raise ProvenanceError(f"the record {redact(self.url)} is closed")
        return self._conn

    @contextmanager
    def _failures(self, what: str) -> Iterator[None]:
        """SQLite's own errors (a lock held past the timeout, a full or failing disk) as
        :class:`ProvenanceError`, as every backend reports them (a server answers 503)."""
        try:
            yield
        except sqlite3.Error as exc:
            raise ProvenanceError(
                f"cannot {what} the record at {redact(self.url)}: {exc}"
            ) from None

    def _bound(self) -> StoreBinding:
        if not self._keyed or self._binding is None:
            raise ProvenanceError(
                f"the record {redact(self.url)} was opened without a key: it can be counted "
                "and pruned, not written or searched"
            )
        return self._binding

    # -- the protocol -------------------------------------------------------------------
    def add(self, entries: Sequence[RecordEntry]) -> None:
        dim = self._bound().dim
        rows = [
            (
                e.digest,
                unit_embedding(e.embedding, dim).astype(EMBEDDING_DTYPE).tobytes(),
                e.request_id,
                e.key_id,
                e.created.timestamp(),
                e.text,
            )
            for e in entries
        ]
        if not rows:
            return
        with self._write() as conn:
            conn.executemany(
                f"INSERT INTO {SENTENCES} (digest, embedding, request_id, key_id, created, "
                "text) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
        with self._lock:
            self.index.catch_up()

    def lookup(self, digests: Sequence[bytes]) -> list[list[StoredSentence]]:
        self._bound()
        found: dict[bytes, list[StoredSentence]] = {}
        wanted = list(dict.fromkeys(digests))
        with self._read() as conn:
            for start in range(0, len(wanted), _BATCH):
                part = wanted[start : start + _BATCH]
                marks = ",".join("?" * len(part))
                for row in conn.execute(
                    f"SELECT digest, {_COLUMNS} FROM {SENTENCES} WHERE digest IN ({marks}) "
                    "ORDER BY id",
                    part,
                ):
                    found.setdefault(bytes(row[0]), []).append(_stored(row[1:]))
        return [found.get(d, []) for d in digests]

    def scan(self, after: int, limit: int) -> list[tuple[int, RecordEntry]]:
        dim = self._bound().dim
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT id, digest, embedding, request_id, key_id, created, text "
                f"FROM {SENTENCES} WHERE id > ? ORDER BY id LIMIT ?",
                (int(after), int(limit)),
            ).fetchall()
        return [
            (
                int(row[0]),
                _entry(
                    self.url,
                    int(row[0]),
                    row[1],
                    np.frombuffer(row[2], EMBEDDING_DTYPE).copy(),
                    dim,
                    row[3:],
                ),
            )
            for row in rows
        ]

    def nearest(self, embeddings: np.ndarray, k: int = 1) -> list[list[Neighbour]]:
        dim = self._bound().dim
        queries = np.atleast_2d(np.asarray(embeddings, dtype=np.float32))
        if queries.shape[1] != dim:
            raise ProvenanceError(f"the record holds {dim}-d embeddings, got {queries.shape[1]}-d")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        with self._lock:
            index = self.index.searched(self._binding, self._stored_count)
            if index is not None:
                with self._read() as conn:
                    cand = index.candidates(queries, k)
                    ids, cosines = ivf_index.rerank(conn, SENTENCES, dim, queries, cand, k)
            else:
                found = self._refreshed().top_k(queries, k)
                ids, cosines = list(found[0]), list(found[1])
            rows = self._rows({int(i) for row in ids for i in row if i >= 0})
        return [
            [
                Neighbour(rows[int(i)], float(c))
                for i, c in zip(id_row, cos_row, strict=True)
                if int(i) in rows
            ]
            for id_row, cos_row in zip(ids, cosines, strict=True)
        ]

    def delete_request(self, request_id: str) -> int:
        return self._delete("request_id = ?", (request_id,))

    def delete_older_than(self, when: datetime) -> int:
        if when.tzinfo is None:
            raise ValueError("the retention time must be timezone-aware (UTC)")
        return self._delete("created < ?", (when.timestamp(),))

    def count(self) -> int:
        with self._read() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {SENTENCES}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self.index.close()
            self._closed = True
            self._conn.close()
            self._matrix = None

    def build_index(
        self,
        started: Callable[[int], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> SentenceIndex:
        """Build the approximate index of every stored sentence anew and write it
        (``samark record index``): ``started(total)``, then ``progress(rows)`` as rows
        are added. Needs faiss (the ``record-index`` extra)."""
        with self._lock:
            index = self.index.build(self._binding, started, progress)
            self._matrix = None
            return index

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteStore({redact(self.url)!r})"

    # -- helpers ------------------------------------------------------------------------
    def _delete(self, where: str, params: tuple[str | float, ...]) -> int:
        deleted = self._delete_rows(where, params)
        if deleted:
            with self._lock:
                self.index.deleted(self._binding)
        return deleted

    def _delete_rows(self, where: str, params: tuple[str | float, ...]) -> int:
        with self._write() as conn:
            deleted = conn.execute(f"DELETE FROM {SENTENCES} WHERE {where}", params).rowcount
            if deleted:
                conn.execute(
                    f"UPDATE {META} SET value = CAST(value AS INTEGER) + 1 WHERE name = 'deletions'"
                )
        if deleted:
            # write the erasure through to the main file now (where another process is
            # reading, a later checkpoint does it)
            with self._lock, contextlib.suppress(sqlite3.OperationalError):
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(deleted)

    def _stored_count(self) -> int:
        """The rows stored (where the search is exact, as its matrix holds them)."""
        if self._matrix is not None:
            return len(self._refreshed())
        return self.index.stored_count()

    def _refreshed(self) -> EmbeddingMatrix:
        """The in-memory matrix brought up to date: rows added since the last search, or
        every row where any process deleted some since."""
        dim = self._bound().dim
        with self._read() as conn:
            deletions = self.index.deletions(conn)
            if self._matrix is None or deletions != self._deletions:
                self._matrix = EmbeddingMatrix(dim, np.dtype(np.float32))
                self._deletions = deletions
            cursor = conn.execute(
                f"SELECT id, embedding FROM {SENTENCES} WHERE id > ? ORDER BY id",
                (self._matrix.last_id,),
            )
            while batch := cursor.fetchmany(65536):
                self._matrix.extend(
                    np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch)),
                    np.frombuffer(b"".join(r[1] for r in batch), EMBEDDING_DTYPE).reshape(
                        len(batch), dim
                    ),
                )
        return self._matrix

    def _rows(self, ids: set[int]) -> dict[int, StoredSentence]:
        out: dict[int, StoredSentence] = {}
        wanted = sorted(ids)
        with self._read() as conn:
            for start in range(0, len(wanted), _BATCH):
                part = wanted[start : start + _BATCH]
                marks = ",".join("?" * len(part))
                for row in conn.execute(
                    f"SELECT {_COLUMNS} FROM {SENTENCES} WHERE id IN ({marks})", part
                ):
                    out[int(row[0])] = _stored(row)
        return out


def _set_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode. Changing the journal mode answers "database is locked"
    at once, without waiting out the busy timeout, while another process opens or closes
    the same file (as when several processes make a new record together): retried."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


#: a stored sentence's columns (``_COLUMNS``): row id, request, key id, time (POSIX
#: seconds) and text (NULL where not kept)
StoredRow = tuple[int, str, str, float, str | None]


def _entry(
    url: str,
    row: int,
    digest: bytes,
    embedding: np.ndarray,
    dim: int,
    rest: tuple[str, str, float, str | None],
) -> RecordEntry:
    """A stored row as a :class:`RecordEntry`, or :class:`ProvenanceError` (naming the row,
    not its content) where it is not one."""
    request_id, key_id, created, text = rest
    if embedding.shape != (dim,):
        raise ProvenanceError(f"row {row} of the record {redact(url)} holds no {dim}-d embedding")
    try:
        return RecordEntry(
            digest=bytes(digest),
            embedding=embedding,
            request_id=str(request_id),
            key_id=str(key_id),
            created=datetime.fromtimestamp(float(created), UTC),
            text=text,
        )
    except (TypeError, ValueError) as exc:
        raise ProvenanceError(f"row {row} of the record {redact(url)} is damaged: {exc}") from None


def _stored(row: StoredRow) -> StoredSentence:
    return StoredSentence(
        row=int(row[0]),
        request_id=str(row[1]),
        key_id=str(row[2]),
        created=datetime.fromtimestamp(float(row[3]), UTC),
        text=row[4],
    )
