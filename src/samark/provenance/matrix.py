"""Exact nearest-neighbour search over a growing matrix of unit embeddings in memory.

Rows are kept in a buffer that doubles when full, so appending is amortised O(1). The
SQLite store keeps them as float32 (4 bytes a dimension: 3 KB a sentence at 768-d), since
converting float16 rows for every search costs several times the product itself (0.5 s
against 0.08 s for 100,000 rows of 768 on one core); a float16 matrix works too, one
block of rows converted at a time.
"""

from __future__ import annotations

import numpy as np

#: rows converted and multiplied at once
BLOCK = 32768


class EmbeddingMatrix:
    """Stored unit embeddings and their row ids (increasing), with exact top-k search."""

    def __init__(self, dim: int, dtype: np.dtype) -> None:
        self.dim = dim
        self._ids = np.zeros(0, dtype=np.int64)
        self._rows = np.zeros((0, dim), dtype=dtype)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def last_id(self) -> int:
        """The highest row id held (0 when empty)."""
        return int(self._ids[self._size - 1]) if self._size else 0

    def extend(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Append rows with increasing ids above :attr:`last_id`."""
        n = len(ids)
        if n == 0:
            return
        need = self._size + n
        if need > len(self._ids):
            capacity = max(need, 2 * len(self._ids), 1024)
            ids_buf = np.zeros(capacity, dtype=np.int64)
            rows_buf = np.zeros((capacity, self.dim), dtype=self._rows.dtype)
            ids_buf[: self._size] = self._ids[: self._size]
            rows_buf[: self._size] = self._rows[: self._size]
            self._ids, self._rows = ids_buf, rows_buf
        self._ids[self._size : need] = ids
        self._rows[self._size : need] = rows
        self._size = need

    def top_k(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """For each query row, the ids and cosines of its ``k`` highest rows, highest
        first, shape ``(queries, min(k, len))``; -1 ids where the matrix is empty."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        q = np.asarray(queries, dtype=np.float32)
        k = min(k, self._size)
        if k == 0:
            return np.full((len(q), 0), -1, dtype=np.int64), np.zeros((len(q), 0), np.float32)
        best_idx = np.zeros((len(q), 0), dtype=np.int64)
        best_cos = np.zeros((len(q), 0), dtype=np.float32)
        for start in range(0, self._size, BLOCK):
            stop = min(start + BLOCK, self._size)
            cos = q @ self._rows[start:stop].astype(np.float32, copy=False).T
            take = min(k, stop - start)
            part = np.argpartition(-cos, take - 1, axis=1)[:, :take]
            best_idx = np.concatenate([best_idx, part + start], axis=1)
            best_cos = np.concatenate([best_cos, np.take_along_axis(cos, part, axis=1)], axis=1)
            if best_idx.shape[1] > k:
                keep = np.argpartition(-best_cos, k - 1, axis=1)[:, :k]
                best_idx = np.take_along_axis(best_idx, keep, axis=1)
                best_cos = np.take_along_axis(best_cos, keep, axis=1)
        order = np.argsort(-best_cos, axis=1, kind="stable")
        best_idx = np.take_along_axis(best_idx, order, axis=1)
        best_cos = np.take_along_axis(best_cos, order, axis=1)
        return self._ids[best_idx], best_cos
