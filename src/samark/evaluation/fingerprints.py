"""An experiment row's fingerprint: what its records depend on (part of every cache key)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from samark.schemes.base import scheme_info
from samark.schemes.catalog import SchemeInfo


def row_fingerprint(
    name: str,
    params: Mapping[str, object],
    revision: int,
    pivot_space: str | None,
    preset: str,
    ring_keys: int | None = None,
) -> str:
    """The scheme, its parameters as :func:`fingerprint_params` sees them, its revision
    (0: as before revisions existed), the row's pivot space, preset (the paper's: none)
    and keyring size (one key: none)."""
    parts: list[object] = [name, fingerprint_params(params, scheme_info(name))]
    if revision:
        parts.append({"revision": revision})
    if pivot_space is not None:
        parts.append({"pivot_space": pivot_space})
    parts += [] if preset == "paper" else [{"preset": preset}]
    parts += [] if ring_keys is None else [{"ring_keys": ring_keys}]
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def fingerprint_params(params: Mapping[str, object], info: SchemeInfo) -> dict[str, object]:
    """A row's parameters as its fingerprint sees them, across the scheme's changed
    defaults (``SchemeInfo.changed_defaults``): a row that names a field's old default is
    the row that once left it out (its records stay found), and a row that leaves it out
    now takes the new default, so it names it (its old records, written under the old
    default, are not its own)."""
    out = dict(params)
    for field, old, new in info.changed_defaults:
        if field not in out:
            out[field] = new
        elif out[field] == old:
            del out[field]
    return out
