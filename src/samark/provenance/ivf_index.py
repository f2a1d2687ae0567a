"""An approximate nearest-sentence index beside an SQLite record: faiss IVF over 8-bit
scalar-quantised embeddings, keyed by the record's row ids, with exact re-ranking of its
best candidates by the stored float16 rows (docs/results/2026-11-28-record-at-scale chose
it: 4,096 lists, re-rank 10, at 10M sentences; :data:`NPROBE` says how many are probed).

- **SQLite is the truth; the index is a cache of it.** Its file (``<record>.index``, mode
  0600: it holds the embeddings) names the highest row id it holds and the record's
  deletion count when it was written. Opening it replays the rows added since, and where
  the deletion count moved, drops the rows no longer in the record. A process killed at
  any moment loses nothing: the file is replaced atomically (written beside, fsynced,
  renamed), and what it lacks is read back from SQLite.
- **Written now and then**, not on every insert: when the rows it holds beyond its file
  reach :data:`SAVE_FRACTION` of it (at least :data:`SAVE_MIN`), after a deletion (an
  erasure reaches the file at once), after a build and on close.
- **Needs** ``faiss-cpu`` (the ``record-index`` extra); without it the store searches
  exactly, as before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NotRequired, TypedDict

import numpy as np

from samark.provenance.entries import EMBEDDING_DTYPE
from samark.provenance.store import ProvenanceError

log = logging.getLogger(__name__)

MAGIC = b"samark-record-index 1\n"
#: IVF lists probed a query: 128 answered recall@1 0.998 at 200,000 sentences (2,048
#: lists; 64 gave 0.972) and 0.9976 at 10M (4,096 lists, p99 35 ms on a loaded machine)
#: in docs/results/2026-12-05-record-index and 2026-11-28-record-at-scale
NPROBE = 128
#: candidates re-ranked exactly, at least (the study's 10)
RERANK = 10
#: most lists (the study's); fewer for a smaller record (about 4 sqrt(n))
MAX_LISTS = 4096
MIN_LISTS = 16
#: training rows a list (faiss warns below 39)
TRAIN_PER_LIST = 40
SAVE_MIN = 10_000
SAVE_FRACTION = 0.05
#: rows read from SQLite at once
BATCH = 65_536


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _faiss() -> ModuleType:
    try:
        import faiss
    except ImportError:
        raise ProvenanceError(
            "the record's approximate index needs faiss: pip install 'samark[record-index]'"
        ) from None
    return faiss


def index_path(record: Path) -> Path:
    """The index file of the record file ``record``."""
    return record.with_name(record.name + ".index")


def lists_for(n: int) -> int:
    """IVF lists for ``n`` rows: the power of two nearest 4 sqrt(n), within
    [:data:`MIN_LISTS`, :data:`MAX_LISTS`]."""
    want = 4 * math.sqrt(max(n, 1))
    return int(min(MAX_LISTS, max(MIN_LISTS, 2 ** round(math.log2(want)))))


class IndexHeader(TypedDict):
    """An index file's header line (JSON): its dimension and owner and, once saved, the
    record's last row id and deletions it reflects, its size and its lists."""

    dim: int
    owner: str
    last_id: NotRequired[int]
    deletions: NotRequired[int]
    ntotal: NotRequired[int]
    lists: NotRequired[int]


class SentenceIndex:
    """The IVF index of one record, in memory, and its file (see the module docstring).

    ``owner`` is what binds it to its record (the record key's and the embedder's
    fingerprints): a file of another record is not used."""

    # faiss' stubs type the IVF wrapper's numpy calls (remove_ids) as its C++ ones
    def __init__(self, path: Path, index: Any, header: IndexHeader) -> None:
        self.path = path
        self.index = index
        self.dim = int(header["dim"])
        self.owner = str(header["owner"])
        self.last_id = int(header.get("last_id", 0))
        self.deletions = int(header.get("deletions", 0))
        self.unsaved = 0

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @property
    def lists(self) -> int:
        return int(self.index.nlist)

    # -- making and reading ---------------------------------------------------------------
    @classmethod
    def trained(cls, path: Path, dim: int, owner: str, sample: np.ndarray, n: int) -> SentenceIndex:
        """A new, empty index for about ``n`` rows, its lists and 8-bit ranges trained on
        ``sample`` (unit rows)."""
        faiss = _faiss()
        lists = min(lists_for(n), max(1, len(sample) // TRAIN_PER_LIST) or 1)
        lists = max(1, min(lists, len(sample)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        index.cp.seed = 1234
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        index.nprobe = min(NPROBE, lists)
        return cls(path, index, {"dim": dim, "owner": owner})

    @classmethod
    def load(cls, path: Path, dim: int, owner: str) -> SentenceIndex | None:
        """The index in ``path``; None where there is none, or it is another record's,
        damaged, or of another format (it is then rebuilt from the record)."""
        faiss = _faiss()
        try:
            with path.open("rb") as f:
                if f.readline() != MAGIC:
                    raise ValueError("not a samark record index")
                header = json.loads(f.readline())
                if int(header["dim"]) != dim or header["owner"] != owner:
                    log.warning("%s is another record's index: it will be rebuilt", path)
                    return None
                index = faiss.read_index(faiss.PyCallbackIOReader(f.read))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            log.warning("the record index %s is unreadable (%s): it will be rebuilt", path, exc)
            return None
        if int(header.get("ntotal", -1)) != index.ntotal:
            log.warning("the record index %s is incomplete: it will be rebuilt", path)
            return None
        index.nprobe = min(NPROBE, index.nlist)
        return cls(path, index, header)

    def save(self) -> None:
        """Write the file whole, atomically: beside it, fsynced, then renamed over it."""
        faiss = _faiss()
        header: IndexHeader = {
            "dim": self.dim,
            "owner": self.owner,
            "last_id": self.last_id,
            "deletions": self.deletions,
            "ntotal": len(self),
            "lists": self.lists,
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC)
                f.write(json.dumps(header).encode() + b"\n")
                faiss.write_index(self.index, faiss.PyCallbackIOWriter(f.write))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        with contextlib.suppress(OSError):  # the rename itself, durable
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self.unsaved = 0

    def save_due(self) -> bool:
        return self.unsaved >= max(SAVE_MIN, int(SAVE_FRACTION * len(self)))

    # -- rows -----------------------------------------------------------------------------
    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Rows with increasing ids above :attr:`last_id`."""
        if len(ids) == 0:
            return
        self.index.add_with_ids(
            np.ascontiguousarray(rows, dtype=np.float32), np.ascontiguousarray(ids, np.int64)
        )
        self.last_id = int(ids[-1])
        self.unsaved += len(ids)

    def ids(self) -> np.ndarray:
        """Every row id held."""
        faiss = _faiss()
        lists = self.index.invlists
        parts = [
            faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
            for i in range(self.index.nlist)
            if lists.list_size(i)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def remove(self, ids: np.ndarray) -> int:
        if len(ids) == 0:
            return 0
        removed = int(self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64)))
        self.unsaved += removed
        return removed

    def candidates(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Each query's best ``max(k, RERANK)`` row ids by the 8-bit scores (-1: none)."""
        want = max(k, RERANK)
        _, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), want)
        return np.asarray(ids, dtype=np.int64)


# -- kept in step with the record's table --------------------------------------------------
def _embeddings(rows: list[tuple[int, bytes]], dim: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    emb = np.frombuffer(b"".join(r[1] for r in rows), EMBEDDING_DTYPE).reshape(len(rows), dim)
    return ids, emb


def stream(
    conn: sqlite3.Connection, table: str, dim: int, after: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, float16 rows) of every row after ``after``, in id order, a batch at a time."""
    cursor = conn.execute(
        f"SELECT id, embedding FROM {table} WHERE id > ? ORDER BY id", (int(after),)
    )
    while batch := cursor.fetchmany(BATCH):
        yield _embeddings(batch, dim)


def catch_up(
    index: SentenceIndex,
    conn: sqlite3.Connection,
    table: str,
    deletions: int,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Bring ``index`` up to the table as ``conn`` sees it (inside one read transaction):
    drop the rows deleted since its deletion count, add the rows after its last id."""
    if deletions != index.deletions:
        kept = np.fromiter(
            (r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE id <= ?", (index.last_id,))),
            dtype=np.int64,
        )
        held = index.ids()
        index.remove(np.setdiff1d(held, kept, assume_unique=True))
        index.deletions = deletions
    for ids, rows in stream(conn, table, index.dim, index.last_id):
        index.add(ids, rows)
        if progress is not None:
            progress(len(ids))


def build(
    path: Path,
    conn: sqlite3.Connection,
    table: str,
    dim: int,
    owner: str,
    deletions: int,
    progress: Callable[[int], None] | None = None,
) -> SentenceIndex:
    """A new index of every row of ``table`` (inside one read transaction): trained on an
    even sample of the rows, then filled; not yet saved."""
    n, top = conn.execute(f"SELECT COUNT(*), COALESCE(MAX(id), 0) FROM {table}").fetchone()
    if not n:
        raise ProvenanceError("the record is empty: there is nothing to index")
    want = TRAIN_PER_LIST * lists_for(int(n))
    step = max(1, int(top) // want)
    sample_rows = conn.execute(
        f"SELECT id, embedding FROM {table} WHERE id % ? = 0 ORDER BY id LIMIT ?",
        (step, want),
    ).fetchall()
    if len(sample_rows) < min(int(n), want) // 2:  # ids far from even: take the first rows
        sample_rows = conn.execute(
            f"SELECT id, embedding FROM {table} ORDER BY id LIMIT ?", (want,)
        ).fetchall()
    _, sample = _embeddings(sample_rows, dim)
    index = SentenceIndex.trained(path, dim, owner, sample, int(n))
    index.deletions = deletions
    catch_up(index, conn, table, deletions, progress)
    return index


def rerank(
    conn: sqlite3.Connection, table: str, dim: int, queries: np.ndarray, cand: np.ndarray, k: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each query's ``k`` best candidates by the exact cosine with the stored row (float16
    as stored, float32 products, as the exact search computes it), highest first."""
    wanted = np.unique(cand[cand >= 0])
    stored: dict[int, np.ndarray] = {}
    for start in range(0, len(wanted), 500):
        part = [int(i) for i in wanted[start : start + 500]]
        marks = ",".join("?" * len(part))
        got = conn.execute(f"SELECT id, embedding FROM {table} WHERE id IN ({marks})", part)
        ids, rows = _embeddings(got.fetchall(), dim)
        stored.update(zip(ids.tolist(), rows, strict=True))
    out_ids, out_cos = [], []
    for q, row in zip(queries, cand, strict=True):
        keep = np.array([i for i in row.tolist() if i in stored], dtype=np.int64)
        if len(keep) == 0:
            out_ids.append(keep)
            out_cos.append(np.zeros(0, dtype=np.float32))
            continue
        mat = np.stack([stored[int(i)] for i in keep]).astype(np.float32)
        cos = mat @ q.astype(np.float32)
        order = np.argsort(-cos, kind="stable")[:k]
        out_ids.append(keep[order])
        out_cos.append(cos[order])
    return out_ids, out_cos
