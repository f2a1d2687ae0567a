"""The shared-server store: PostgreSQL with the pgvector extension (``psycopg`` 3 client;
``pip install 'samark[record-pg]'``).

- **URL.** ``postgresql://user:password@host:5432/dbname`` (or ``postgres://``), any
  libpq connection URI: ``?sslmode=require``, ``?host=/run/postgresql`` for a socket. The
  record's two tables (``samark_provenance_meta``, ``samark_provenance_sentences``) live
  in the connection's schema; several records share one database by giving each its own
  schema (``?options=-csearch_path%3Drecord_a``, the schema made beforehand). The
  password is never printed: every message shows the URL redacted.
- **Durable.** Every :meth:`PostgresStore.add` is one transaction (``COPY`` of its rows)
  committed with ``synchronous_commit = on``: once it returns, its rows are in the
  server's write-ahead log on disk; a client killed mid-write leaves nothing of its
  unfinished transaction. (The server's own ``fsync`` must be on, its default.)
- **Shared.** However many processes and machines write one record: rows are appended
  (no row is updated), so writers never wait on each other.
- **Search.** Embeddings are ``halfvec`` (float16, as the SQLite store keeps them).
  Nearest neighbours are exact: the server orders every row by inner product with the
  query rounded to float16 (a sequential scan, no vector index), and the candidates are
  re-ranked here in float32, as the SQLite store computes them, fetching more until no
  row left out could rank higher (the float16 rounding moves a cosine by at most the
  query's rounding error's norm). The answers are the SQLite store's, on the same rows.
  An HNSW index is faster at millions of rows but approximate; where an operator adds
  one (docs/provenance.md), the server uses it and the search is no longer exact. It is
  searched with ``hnsw.ef_search`` :data:`HNSW_EF_SEARCH` (pgvector's default, 40,
  found the exact nearest sentence of 96.7% of real paraphrase queries at 1M rows, 200
  found 99.8% with p99 24 ms: docs/results/2026-11-28-record-at-scale), unless the URL
  sets another (``?options=-chnsw.ef_search%3D400``).
- **Erasure.** A deleted row is gone for every reader at once; its bytes stay in the
  table's pages until ``VACUUM`` reuses them (``VACUUM FULL`` rewrites the table), and
  in the write-ahead log and base backups until those are recycled (docs/provenance.md).
"""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import quote

import numpy as np

from samark.provenance.entries import EMBEDDING_DTYPE, Neighbour, RecordEntry, StoredSentence
from samark.provenance.store import (
    BACKENDS,
    ProvenanceError,
    StoreBinding,
    redact,
    unit_embedding,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

META = "samark_provenance_meta"
SENTENCES = "samark_provenance_sentences"
_COLUMNS = "id, request_id, key_id, created, text"
#: candidates fetched beyond k before the exactness check asks for more
_SPARE = 16
#: the candidate list an HNSW index is searched with, where the URL sets none (pgvector's
#: default is 40); harmless where the record has no such index
HNSW_EF_SEARCH = 200
_PGVECTOR_EF_SEARCH_DEFAULT = "40"
#: a lock every opener takes while it makes or checks the schema (two processes making one
#: record at once must not both create it)
_SCHEMA_LOCK = 0x5A4D_5052  # "SMPR"
#: PostgreSQL's epoch for binary timestamps
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)


def _psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise ProvenanceError(
            "a postgresql:// record needs the psycopg client: pip install 'samark[record-pg]'"
        ) from None
    return psycopg


def _check_url(url: str) -> None:
    """Raise :class:`ProvenanceError` unless ``url`` is a libpq URI and psycopg is here."""
    psycopg = _psycopg()
    try:
        parsed = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise ProvenanceError(
            f"{redact(url)} is not a PostgreSQL connection URI "
            f"(postgresql://user:password@host:5432/dbname): {_scrub(str(exc), url)}"
        ) from None
    if redact(url) != url and "user" not in parsed and "password" not in parsed:
        # 'user:pa/ss@host': libpq stops the user part at the '/' and reads host 'user',
        # port 'pa' (the password's head, which its errors would then quote)
        raise ProvenanceError(
            f"{redact(url)}: the password holds a character a URL cannot carry as is; "
            "percent-encode it ('/' as %2F, '@' as %40, ':' as %3A) or use PGPASSWORD"
        )


@BACKENDS.register("postgres")
@BACKENDS.register("postgresql")
class PostgresStore:
    """A record in a PostgreSQL database with pgvector (see the module's docstring)."""

    check_url = staticmethod(_check_url)

    def __init__(
        self, url: str, binding: StoreBinding | None, *, connect_timeout: int = 10
    ) -> None:
        _check_url(url)
        pg = _psycopg()
        self.url = url
        self._lock = threading.RLock()
        self._keyed = binding is not None
        self._closed = False
        self._params: dict[str, object] = {"autocommit": True}
        if "connect_timeout" not in pg.conninfo.conninfo_to_dict(url):
            self._params["connect_timeout"] = connect_timeout
        self._conn = self._connect()
        try:
            self._binding = self._open(binding)
        except pg.Error as exc:
            self._conn.close()
            raise ProvenanceError(
                f"cannot open the record at {redact(url)}: {_scrub(str(exc), url)}"
            ) from None
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> psycopg.Connection[TupleRow]:
        pg = _psycopg()
        try:
            conn: psycopg.Connection[TupleRow] = pg.connect(self.url, **self._params)
            # durable once add returns, whatever the server's default
            conn.execute("SET synchronous_commit = on")
            # an operator's HNSW index searched wide enough (an ef_search the URL or the
            # server's configuration sets, other than pgvector's default, is kept)
            row = conn.execute("SELECT current_setting('hnsw.ef_search', true)").fetchone()
            if row is None or row[0] in (None, "", _PGVECTOR_EF_SEARCH_DEFAULT):
                conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
        except pg.Error as exc:
            raise ProvenanceError(
                f"cannot reach the record at {redact(self.url)}: {_scrub(str(exc), self.url)}"
            ) from None
        return conn

    @property
    def binding(self) -> StoreBinding | None:
        return self._binding

    # -- opening ------------------------------------------------------------------------
    def _open(self, binding: StoreBinding | None) -> StoreBinding | None:
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
                    ([META, SENTENCES],),
                )
            }
            if SENTENCES in tables and META not in tables:
                raise ProvenanceError(
                    f"{redact(self.url)} has a table {SENTENCES} but no {META}: not a samark "
                    "record; refusing to write into it"
                )
            if META not in tables:
                if binding is None:
                    raise ProvenanceError(f"there is no record at {redact(self.url)}")
                self._create(conn, binding)
            meta = dict(conn.execute(f"SELECT name, value FROM {META}").fetchall())
        stored = StoreBinding.read(meta, redact(self.url))
        if binding is not None:
            binding.check(stored, redact(self.url))
        return stored

    def _create(self, conn: psycopg.Connection[TupleRow], binding: StoreBinding) -> None:
        has_vector = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        if has_vector is None:
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except _psycopg().Error as exc:
                raise ProvenanceError(
                    f"the database at {redact(self.url)} lacks the pgvector extension and "
                    f"it cannot be created here ({type(exc).__name__}): install pgvector on "
                    "the server and run CREATE EXTENSION vector as its owner"
                ) from None
        dim = int(binding.dim)
        conn.execute(f"CREATE TABLE {META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            f"""CREATE TABLE {SENTENCES} (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                digest BYTEA NOT NULL,
                embedding HALFVEC({dim}) NOT NULL,
                request_id TEXT NOT NULL,
                key_id TEXT NOT NULL,
                created TIMESTAMPTZ NOT NULL,
                text TEXT
            )"""
        )
        if 2 * dim + 8 < 2000:
            # kept in the row, never compressed or moved out: the scan reads it in place
            conn.execute(f"ALTER TABLE {SENTENCES} ALTER COLUMN embedding SET STORAGE PLAIN")
        for column in ("digest", "request_id", "created"):
            conn.execute(f"CREATE INDEX {SENTENCES}_{column} ON {SENTENCES} ({column})")
        fresh = binding.new_store_meta()
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {META} VALUES (%s, %s)", list(fresh.items()))

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[TupleRow]]:
        """One transaction on the store's connection, committed or rolled back whole. A
        connection the server dropped (a restart, a terminated backend) is made anew
        here; the call that met the drop has failed (a write is not retried: whether its
        commit reached the server is unknown)."""
        with self._lock:
            if self._closed:
                raise ProvenanceError(f"the record {redact(self.url)} is closed")
            if self._conn.closed:
                self._conn = self._connect()
            with self._conn.transaction():
                yield self._conn

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
        if not entries:
            return
        data = bytearray(_COPY_HEADER)
        for e in entries:
            _copy_row(data, e, unit_embedding(e.embedding, dim).astype(">f2"))
        data += _COPY_TRAILER
        try:
            with (
                self._transaction() as conn,
                conn.cursor() as cur,
                cur.copy(
                    f"COPY {SENTENCES} (digest, embedding, request_id, key_id, created, text) "
                    "FROM STDIN (FORMAT BINARY)"
                ) as copy,
            ):
                copy.write(bytes(data))
        except _psycopg().Error as exc:
            raise self._failed("write to", exc) from None

    def lookup(self, digests: Sequence[bytes]) -> list[list[StoredSentence]]:
        self._bound()
        found: dict[bytes, list[StoredSentence]] = {}
        wanted = list(dict.fromkeys(bytes(d) for d in digests))
        if wanted:
            rows = self._query(
                f"SELECT digest, {_COLUMNS} FROM {SENTENCES} WHERE digest = ANY(%s) ORDER BY id",
                (wanted,),
            )
            for row in rows:
                found.setdefault(bytes(row[0]), []).append(_stored(row[1:]))
        return [found.get(bytes(d), []) for d in digests]

    def scan(self, after: int, limit: int) -> list[tuple[int, RecordEntry]]:
        self._bound()
        rows = self._query(
            f"SELECT id, digest, embedding::text, request_id, key_id, created, text "
            f"FROM {SENTENCES} WHERE id > %s ORDER BY id LIMIT %s",
            (int(after), int(limit)),
        )
        return [
            (
                int(row[0]),
                RecordEntry(
                    digest=bytes(row[1]),
                    # halfvec's text form: each float16 value's exact float32 repr
                    embedding=np.array(row[2][1:-1].split(","), dtype=np.float32).astype(
                        EMBEDDING_DTYPE
                    ),
                    request_id=str(row[3]),
                    key_id=str(row[4]),
                    created=row[5].astimezone(UTC),
                    text=row[6],
                ),
            )
            for row in rows
        ]

    def nearest(self, embeddings: np.ndarray, k: int = 1) -> list[list[Neighbour]]:
        dim = self._bound().dim
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        queries = np.atleast_2d(np.asarray(embeddings, dtype=np.float32))
        if queries.shape[1] != dim:
            raise ProvenanceError(f"the record holds {dim}-d embeddings, got {queries.shape[1]}-d")
        return [self._nearest_one(q, k) for q in queries]

    def _nearest_one(self, query: np.ndarray, k: int) -> list[Neighbour]:
        """The ``k`` rows of highest float32 cosine with ``query``: the server ranks by
        the float16-rounded query, whose cosines differ from the float32 ones by at most
        ``slack``; candidates are fetched until the last one's rank cosine is below the
        k-th best exact cosine by more than twice that."""
        q16 = query.astype(np.float16)
        slack = float(np.linalg.norm(query - q16.astype(np.float32))) * 1.01 + 1e-6
        literal = _vector_literal(q16)
        limit = k + _SPARE
        while True:
            # the text form of the few rows kept only (not of every row scanned)
            rows = self._query(
                f"SELECT {_COLUMNS}, embedding::text, -distance FROM (SELECT {_COLUMNS}, "
                f"embedding, embedding <#> %s::halfvec AS distance FROM {SENTENCES} "
                "ORDER BY distance LIMIT %s) AS nearest ORDER BY distance",
                (literal, limit),
            )
            if not rows:
                return []
            vectors = np.array(
                [np.array(r[5][1:-1].split(","), dtype=np.float32) for r in rows],
                dtype=np.float32,
            )
            cosines = vectors @ query
            order = np.argsort(-cosines, kind="stable")[:k]
            kth = float(cosines[order[-1]])
            if len(rows) < limit or float(rows[-1][6]) < kth - 2 * slack:
                return [Neighbour(_stored(rows[i][:5]), float(cosines[i])) for i in order]
            limit *= 4

    def delete_request(self, request_id: str) -> int:
        return self._delete("request_id = %s", (request_id,))

    def delete_older_than(self, when: datetime) -> int:
        if when.tzinfo is None:
            raise ValueError("the retention time must be timezone-aware (UTC)")
        return self._delete("created < %s", (when,))

    def count(self) -> int:
        return int(self._query(f"SELECT COUNT(*) FROM {SENTENCES}", ())[0][0])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._conn.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r})"

    # -- helpers ------------------------------------------------------------------------
    def _query(self, sql: str, params: tuple[object, ...]) -> list[TupleRow]:
        """A read, tried once more on a new connection where the server dropped this one
        (a read is safe to repeat)."""
        pg = _psycopg()
        for attempt in (1, 2):
            try:
                with self._transaction() as conn:
                    return conn.execute(sql, params).fetchall()
            except pg.OperationalError as exc:
                if attempt == 2 or not self._conn.closed:
                    raise self._failed("read", exc) from None
            except pg.Error as exc:
                raise self._failed("read", exc) from None
        raise AssertionError("unreachable")

    def _delete(self, where: str, params: tuple[object, ...]) -> int:
        try:
            with self._transaction() as conn:
                return int(conn.execute(f"DELETE FROM {SENTENCES} WHERE {where}", params).rowcount)
        except _psycopg().Error as exc:
            raise self._failed("delete from", exc) from None

    def _failed(self, what: str, exc: Exception) -> ProvenanceError:
        return ProvenanceError(
            f"cannot {what} the record at {redact(self.url)}: {_scrub(str(exc), self.url)}"
        )


def _copy_row(data: bytearray, entry: RecordEntry, embedding: np.ndarray) -> None:
    """One row of a binary COPY: six fields, each its length and its bytes."""
    vector = struct.pack(">hh", len(embedding), 0) + embedding.tobytes()
    micros = (entry.created - _PG_EPOCH) // _MICROSECOND
    fields: list[bytes | None] = [
        bytes(entry.digest),
        vector,
        entry.request_id.encode("utf-8"),
        entry.key_id.encode("utf-8"),
        struct.pack(">q", micros),
        None if entry.text is None else entry.text.encode("utf-8"),
    ]
    data += struct.pack(">h", len(fields))
    for value in fields:
        if value is None:
            data += struct.pack(">i", -1)
        else:
            data += struct.pack(">i", len(value))
            data += value


def _vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form; each float16 value written exactly (as its float32 repr)."""
    return "[" + ",".join(repr(float(np.float32(x))) for x in vector) + "]"


def _stored(row: TupleRow) -> StoredSentence:
    created: datetime = row[3]
    return StoredSentence(
        row=int(row[0]),
        request_id=str(row[1]),
        key_id=str(row[2]),
        created=created.astimezone(UTC),
        text=row[4],
    )


def _scrub(message: str, url: str) -> str:
    """A server's or client's message without the URL's password, whatever quotes it."""
    psycopg = _psycopg()
    try:
        password = psycopg.conninfo.conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    if password:
        message = message.replace(str(password), "***").replace(quote(str(password)), "***")
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", message, flags=re.IGNORECASE)
