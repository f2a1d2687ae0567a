"""Append-only JSONL stage files: the harness's cache and its resume mechanism.

Every record carries a ``key`` (a list of strings). A record is written with one ``write``
of a full line, flushed and fsynced, so a run killed at any moment (SIGKILL included) leaves
at most one torn last line; reading skips it, and the next append first truncates it away.
Records are never rewritten, so a key is done exactly when a record with it exists.

A finished folder can be compacted (``samark eval compact``): each stage's records move into
a sealed ``<stage>.jsonl.gz`` (byte-for-byte the same lines, gzip with no timestamp, so the
same records give the same file), read before the live ``.jsonl``, to which later records
are appended as before. A run opened for writing holds a shared lock on its folder and
compaction an exclusive one, so a folder is never compacted under a writer.
"""

from __future__ import annotations

import gzip
import json
import os
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from samark.detection_result import json_safe
from samark.errors import SamarkError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: folders are not locked
    fcntl = None  # type: ignore[assignment]

Key = tuple[str, ...]
FileId = tuple[int, int]


class RecordStore:
    """One stage's records, e.g. ``generations.jsonl`` (and its sealed
    ``generations.jsonl.gz`` once the folder was compacted)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.sealed_path = sealed_path(self.path)
        self._records: dict[Key, dict[str, Any]] | None = None
        self._offset = 0  # bytes of the live file read into ``_records``
        self._live_id: FileId | None = None  # that file's (device, inode)
        self._sealed_id: FileId | None = None  # the sealed file's, when read
        self._checked_tail = False

    def _load(self) -> dict[Key, dict[str, Any]]:
        if self._records is None:
            self._records = {}
            self._offset = 0
            # the live file first: a compaction between the two reads moves its records
            # into the sealed file, where the second read finds them
            self._live_id, live = _read_from(self.path, 0)
            self._sealed_id = _file_id(self.sealed_path)
            for raw in _sealed_lines(self.sealed_path):
                self._take(raw)
            self._take_lines(live)
        return self._records

    def _take(self, raw: bytes) -> None:
        assert self._records is not None
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            return  # not ours to repair; never hides later records
        self._records.setdefault(tuple(rec["key"]), rec)

    def _take_lines(self, data: bytes) -> None:
        """Parse the complete lines of ``data`` (read at ``_offset``) into the records (the
        first record of a key wins) and move the offset to the end of the last one."""
        end = data.rfind(b"\n") + 1  # a torn last line (a killed or busy writer) waits
        for raw in data[:end].splitlines():
            self._take(raw)
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
        score the same item. After a compaction (another live file, or none) it reads
        everything again."""
        if self._records is None:
            self._load()
            return
        live_id, data = _read_from(self.path, self._offset)
        compacted = self._live_id is not None and live_id != self._live_id
        if compacted or _file_id(self.sealed_path) != self._sealed_id:
            self._records = None
            self._load()
            return
        self._live_id = live_id
        self._take_lines(data)

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
        rec = json_safe({"key": list(key), **record})
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


def sealed_path(path: str | os.PathLike[str]) -> Path:
    """Where a stage file's compacted records live: ``detections.jsonl.gz`` beside
    ``detections.jsonl``."""
    path = Path(path)
    return path.with_name(path.name + ".gz")


def _file_id(path: Path) -> FileId | None:
    """(device, inode): a compaction replaces the sealed file and removes the live one."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _read_from(path: Path, offset: int) -> tuple[FileId | None, bytes]:
    """The identity of the file at ``path`` and its bytes from ``offset`` (None, b"" when
    there is no such file)."""
    try:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            f.seek(offset)
            return (st.st_dev, st.st_ino), f.read()
    except FileNotFoundError:
        return None, b""


def _sealed_lines(path: Path) -> Iterable[bytes]:
    if not path.exists():
        return []
    with gzip.open(path, "rb") as f:
        return f.read().splitlines()


def _unique_lines(stage_path: Path) -> list[bytes]:
    """A stage's records as stored, sealed then live, first line of a key only; a torn last
    line left by a killed writer is dropped."""
    seen: set[Key] = set()
    lines = []
    _, live = _read_from(stage_path, 0)
    for raw in [
        *_sealed_lines(sealed_path(stage_path)),
        *live[: live.rfind(b"\n") + 1].splitlines(),
    ]:
        try:
            key = tuple(json.loads(raw)["key"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        if key not in seen:
            seen.add(key)
            lines.append(raw)
    return lines


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def seal(stage_path: str | os.PathLike[str]) -> None:
    """Move a stage's live records into its sealed gzip file (the caller holds the folder's
    exclusive lock: see ``compact_folder``). The new sealed file is written beside, synced
    and renamed over the old one before the live file goes, so a crash at any point keeps
    every record (at worst in both files, where the first copy wins)."""
    live = Path(stage_path)
    if not live.exists():
        return
    sealed = sealed_path(live)
    lines = _unique_lines(live)
    tmp = sealed.with_name(sealed.name + ".tmp")
    with tmp.open("wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            for line in lines:
                gz.write(line + b"\n")
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(tmp, sealed)
    _fsync_dir(sealed.parent)
    live.unlink()
    _fsync_dir(live.parent)


class FolderLock:
    """A lock on a run folder: shared for each process writing records into it, exclusive
    for compaction. Released by ``release`` or when the owner is collected or exits."""

    def __init__(self, folder: str | os.PathLike[str], *, exclusive: bool = False) -> None:
        self._fd: int | None = None
        if fcntl is None:  # pragma: no cover
            if exclusive:
                raise SamarkError("compacting a run folder needs POSIX file locks")
            return
        fd = os.open(folder, os.O_RDONLY)
        try:
            if exclusive:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits for a compaction to finish
        except BlockingIOError:
            os.close(fd)
            raise SamarkError(
                f"{folder}: a run is writing to this folder; compact it when the run is done"
            ) from None
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        if self._fd is not None:
            self._finalizer()
            self._fd = None


def compact_folder(
    folder: str | os.PathLike[str], stage_files: Iterable[str]
) -> list[tuple[str, int, int]]:
    """Seal these stage files of a run folder; returns (stage file, bytes before, bytes
    after) for each that had live records. Refuses while a run writes to the folder."""
    folder = Path(folder)
    lock = FolderLock(folder, exclusive=True)
    try:
        done = []
        for name in stage_files:
            live, sealed = folder / name, sealed_path(folder / name)
            if not live.exists():
                continue
            before = live.stat().st_size + (sealed.stat().st_size if sealed.exists() else 0)
            seal(live)
            done.append((name, before, sealed.stat().st_size))
        return done
    finally:
        lock.release()
