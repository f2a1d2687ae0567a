"""Append-only JSONL stage files: the harness's cache and its resume mechanism.

Every record carries a ``key`` (a list of strings). A record is written with one ``write``
of a full line, flushed and fsynced, so a run killed at any moment (SIGKILL included) leaves
at most one torn last line; reading skips it, and the next append first truncates it away.
Records are never rewritten, so a key is done exactly when a record with it exists.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Key = tuple[str, ...]


class Stage:
    """One stage's records, e.g. ``generations.jsonl``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._records: dict[Key, dict[str, Any]] | None = None
        self._offset = 0  # bytes of the file read into ``_records``
        self._checked_tail = False

    def _load(self) -> dict[Key, dict[str, Any]]:
        if self._records is None:
            self._records = {}
            self._offset = 0
            self._read_new_lines()
        return self._records

    def _read_new_lines(self) -> None:
        """Parse the complete lines past ``_offset`` into the records (the first record of
        a key wins) and move the offset to the end of the last complete line."""
        assert self._records is not None
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a torn last line (a killed or busy writer) waits
        for raw in data[:end].splitlines():
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                continue  # not ours to repair; never hides later records
            self._records.setdefault(tuple(rec["key"]), rec)
        self._offset += end

    def _drop_torn_tail(self) -> None:
        """Before this object's first append: cut a torn last line left by a killed writer.
        Readers never truncate, so a report may read a file that a run is appending to;
        each record is one ``write`` in append mode, so concurrent writers of different
        keys (e.g. two ``--schemes`` runs) never see each other's lines half-written."""
        if self._checked_tail or not self.path.exists():
            self._checked_tail = True
            return
        with self.path.open("r+b") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
        self._checked_tail = True

    def refresh(self) -> None:
        """Read only what was appended since the last read (by this process or another):
        cheap enough before every item, so that two processes sharing a folder do not
        score the same item."""
        if self._records is None:
            self._load()
        else:
            self._read_new_lines()

    def __contains__(self, key: Key) -> bool:
        return tuple(key) in self._load()

    def __len__(self) -> int:
        return len(self._load())

    def get(self, key: Key) -> dict[str, Any] | None:
        return self._load().get(tuple(key))

    def records(self) -> Iterator[dict[str, Any]]:
        return iter(list(self._load().values()))

    def append(self, key: Key, record: dict[str, Any]) -> dict[str, Any]:
        records = self._load()
        key = tuple(str(k) for k in key)
        if key in records:
            raise ValueError(f"{self.path.name}: record {key} already exists")
        rec = _finite({"key": list(key), **record})
        line = json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()
        data = line.encode("utf-8")
        with self.path.open("ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        records[key] = rec
        return rec


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: store them as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
