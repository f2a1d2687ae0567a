"""One row's records handed to another row of the same run folder, when both rows are one
configuration under two names (``samark eval adopt``).

A row's records are keyed by its label and parameter fingerprint. When a scheme's default
changes, the row that takes the default gets a new fingerprint, though an older row that
named the new value explicitly may already hold exactly its records (the same scheme
config, the same key, the same per-item seeds: generation and every attack seed depend on
the item and the attack, never on the row's label). Re-keying those records is then the
same as re-running them. :func:`same_configuration` is the check that decides it; the
command refuses without it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from samark.errors import SamarkError
from samark.evaluation.store import FolderLock, sealed_path

if TYPE_CHECKING:
    from samark.schemes.base import Watermark

#: the kinds of record keyed by (kind, row label, row fingerprint, ...)
ROW_KINDS = frozenset({"gen", "attack", "detect", "length", "quality", "judge"})


def same_configuration(a: Watermark, b: Watermark) -> list[str]:
    """What differs between two built schemes as they write and detect (empty: nothing):
    their class, config, detector and, for a layered mark, token layer and combination."""
    diffs = []
    if type(a) is not type(b):
        diffs.append(f"class {type(a).__name__} != {type(b).__name__}")
    for name in ("config", "token_config", "combine", "contradiction", "generator_name"):
        x, y = _resolved(a, name), _resolved(b, name)
        if x != y:
            diffs.append(f"{name}: {x!r} != {y!r}")
    if a.detector_id() != b.detector_id():
        diffs.append(f"detector {a.detector_id()} != {b.detector_id()}")
    if a.key_id != b.key_id:
        diffs.append("key")
    return diffs


def _resolved(scheme: Watermark, name: str) -> object:
    """A scheme's attribute as it acts: a config's ``cells`` left to the key (None) is the
    key's own, as the scheme resolved it."""
    value = getattr(scheme, name, None)  # any attribute, compared with ==
    if (
        name == "config"
        and value is not None
        and getattr(value, "cells", 0) is None
        and hasattr(scheme, "cells")
    ):
        return value.replace(cells=scheme.cells)
    return value


def adopt_row(
    folder: str | os.PathLike[str],
    stage_files: tuple[str, ...],
    old: tuple[str, str],
    new: tuple[str, str],
) -> dict[str, int]:
    """Re-key every record of row ``old`` = (label, fingerprint) as row ``new`` in the
    folder's live stage files; returns the records moved per file. Refuses while a run
    writes to the folder, on sealed (compacted) records, and where ``new`` already has
    records (nothing is overwritten)."""
    folder = Path(folder)
    lock = FolderLock(folder, exclusive=True)
    try:
        for name in stage_files:
            if sealed_path(folder / name).exists():
                raise SamarkError(
                    f"{folder / name} has sealed records (samark eval compact): adopt works "
                    "on live records only"
                )
        rewritten: dict[str, list[str]] = {}
        moved: dict[str, int] = {}
        for name in stage_files:
            path = folder / name
            if not path.exists():
                continue
            lines, count = [], 0
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                key = record.get("key")
                if isinstance(key, list) and key[:1] and key[0] in ROW_KINDS:
                    if (key[1], key[2]) == new:
                        raise SamarkError(
                            f"row {new[0]!r} ({new[1]}) already has records in {name}: "
                            "nothing adopted"
                        )
                    if (key[1], key[2]) == old:
                        record["key"] = [key[0], new[0], new[1], *key[3:]]
                        if record.get("scheme") == old[0]:
                            record["scheme"] = new[0]
                        line = json.dumps(record, ensure_ascii=False)
                        count += 1
                lines.append(line)
            rewritten[name], moved[name] = lines, count
        if not any(moved.values()):
            raise SamarkError(f"{folder} holds no records of row {old[0]!r} ({old[1]})")
        for name, lines in rewritten.items():
            if moved[name]:
                tmp = folder / f".{name}.adopt"
                tmp.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
                os.replace(tmp, folder / name)
        return moved
    finally:
        lock.release()
