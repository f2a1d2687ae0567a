"""Watermark keys: secret bytes, the embedder they belong to, and the key file.

A key holds what every scheme needs: the secret, its public id and the embedder it belongs
to. The secret derives each scheme's key material one-way: other schemes' integers
(:meth:`WatermarkKey.derive_ints`, :func:`keyed_rng`) and SAMark's pivots, whose public law
(avoided directions or a pivot space) the key carries as one part, ``key.samark``
(:mod:`samark.keys.samark_material`, with :mod:`samark.keys.pivots` and
:mod:`samark.keys.pivot_spaces`: key material, which every scheme's package reads and none
of it imports a scheme). The file is JSON with owner-only permissions;
a key's repr, str and errors show only its public id.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from samark.errors import EmbedderMismatchError, KeyFileError
from samark.keys.pivot_spaces import UnknownPivotSpaceError
from samark.keys.samark_material import PivotDraw, SAMarkKeyMaterial

KEY_FORMAT = "samark-key"
#: the key file versions this samark reads (SAMark's part says which one a key is written
#: as: 2 for pivots in a pivot space, 3 for a key that names its layered mark's cells, 4
#: for one that names the scheme it was made for or its cells' null draws, 5 for one that
#: carries a reference implementation's integer key)
KEY_VERSIONS = (1, 2, 3, 4, 5)
#: the version of a key that names its scheme or its cells' null draws
FILE_VERSION_SCHEME = 4
#: the version of a key that carries a reference implementation's integer key (``hash_key``)
FILE_VERSION_HASH_KEY = 5
#: the schemes that read a key's ``hash_key`` (the others ignore it)
HASH_KEY_SCHEMES = ("kgw", "unigram")
#: the largest ``hash_key``: the references seed with it as a signed 64-bit integer
MAX_HASH_KEY = 2**63 - 1
SECRET_BYTES = 32
_ID_DOMAIN = b"samark/key-id/v1"


@dataclass(frozen=True)
class EmbedderIdentity:
    """Which embedder a key belongs to: a name and a hash of its files."""

    name: str
    fingerprint: str

    def matches(self, other: EmbedderIdentity) -> bool:
        return self.fingerprint == other.fingerprint


class WatermarkKey:
    """A secret watermark key. Its repr and str show only a public key id.

    ``samark`` (a :class:`~samark.keys.samark_material.PivotDraw`) says where
    SAMark's pivots are drawn: away from avoided directions or in a pivot space; ``None``
    draws them anywhere. Other schemes ignore it. ``scheme`` is the scheme the key was made
    for (``samark keygen --scheme``; public, in the key file): commands mark and detect with
    it unless told otherwise (:meth:`made_for`). ``hash_key`` is a reference implementation's
    integer key (KGW's and Unigram's ``hash_key`` in transformers, MarkLLM and the authors'
    code; secret, in the key file only): the token baselines that have one use it instead of
    an integer derived from the secret, so they mark and detect as the reference does
    (docs/baselines.md)."""

    __slots__ = ("_draw", "_hash_key", "_secret", "embedder", "scheme")

    def __init__(
        self,
        secret: bytes,
        embedder: EmbedderIdentity,
        samark: PivotDraw | None = None,
        scheme: str | None = None,
        hash_key: int | None = None,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise KeyFileError("a key secret must be at least 16 bytes")
        if scheme is not None and (not isinstance(scheme, str) or not scheme):
            raise KeyFileError("a key's scheme is a scheme name")
        if hash_key is not None and (
            isinstance(hash_key, bool)
            or not isinstance(hash_key, int)
            or not 0 < hash_key <= MAX_HASH_KEY
        ):
            raise KeyFileError(f"a key's hash_key is an integer in [1, {MAX_HASH_KEY}]")
        self._secret = secret
        self.embedder = embedder
        self._draw = PivotDraw() if samark is None else samark
        self.scheme = scheme
        self._hash_key = hash_key

    @classmethod
    def generate(
        cls,
        embedder: EmbedderIdentity,
        samark: PivotDraw | None = None,
        scheme: str | None = None,
        hash_key: int | None = None,
    ) -> WatermarkKey:
        return cls(secrets.token_bytes(SECRET_BYTES), embedder, samark, scheme, hash_key)

    def with_samark(self, samark: PivotDraw) -> WatermarkKey:
        """The same secret drawing SAMark's pivots as ``samark`` says (a pivot space gives
        another key id: the pivots differ)."""
        return WatermarkKey(self._secret, self.embedder, samark, self.scheme, self._hash_key)

    def sibling(self, label: str) -> WatermarkKey:
        """Another key derived one-way from this one's secret and ``label`` (an
        experiment's keyring: the run's key and its siblings), drawing its pivots as this
        one does, for the same embedder and scheme; it carries a hash key where this one
        does (derived too)."""
        stream = hashlib.shake_256(b"samark/sibling/" + label.encode() + b"/" + self._secret)
        raw = stream.digest(SECRET_BYTES + 8)
        hash_key = None
        if self._hash_key is not None:
            hash_key = 1 + int.from_bytes(raw[SECRET_BYTES:], "little") % MAX_HASH_KEY
        return WatermarkKey(raw[:SECRET_BYTES], self.embedder, self._draw, self.scheme, hash_key)

    def with_hash_key(self, hash_key: int | None) -> WatermarkKey:
        """The same secret carrying the reference integer key ``hash_key`` (another key id)."""
        return WatermarkKey(self._secret, self.embedder, self._draw, self.scheme, hash_key)

    @property
    def hash_key(self) -> int | None:
        """The reference implementation's integer key this key carries (None: the token
        baselines derive theirs from the secret). Secret: never print it."""
        return self._hash_key

    def made_for(self) -> str | None:
        """The scheme this key was made for: the one it names; else ``samark-layered`` for
        a key that names keyed cells (keygen wrote those for the layered mark alone, before
        keys named their scheme); else None (an older key: it says nothing)."""
        if self.scheme is not None:
            return self.scheme
        return "samark-layered" if self._draw.cells else None

    @property
    def samark(self) -> SAMarkKeyMaterial:
        """SAMark's part of the key: its pivots, their public law, the null pivots."""
        return SAMarkKeyMaterial(self._secret, self._draw)

    @property
    def key_id(self) -> str:
        """A short public identifier (a hash of the secret), safe to print and store."""
        blob = _ID_DOMAIN + self._secret + self._draw.id_part
        if self._hash_key is not None:  # a key without one keeps the id it always had
            blob += b"/hash-key/" + self._hash_key.to_bytes(8, "little")
        return hashlib.sha256(blob).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"WatermarkKey(key_id={self.key_id!r}, embedder={self.embedder.name!r})"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("WatermarkKey is not picklable; pass the key file path instead")

    def derive_ints(self, label: str, count: int, bits: int = 62) -> list[int]:
        """``count`` secret integers for another scheme's key (e.g. KGW's hashing key),
        derived one-way from the secret and ``label``; the secret cannot be recovered."""
        stream = hashlib.shake_256(b"samark/derive/" + label.encode() + b"/" + self._secret)
        raw = stream.digest(8 * count)
        mask = (1 << bits) - 1
        return [int.from_bytes(raw[8 * i : 8 * i + 8], "little") & mask for i in range(count)]

    def check_embedder(self, embedder: EmbedderIdentity) -> None:
        """Raise unless ``embedder`` is the one this key was made for."""
        if not self.embedder.matches(embedder):
            raise EmbedderMismatchError(
                f"this key (id {self.key_id}) was made for embedder {self.embedder.name!r} "
                f"(fingerprint {self.embedder.fingerprint[:12]}), but embedder "
                f"{embedder.name!r} (fingerprint {embedder.fingerprint[:12]}) was given; "
                "detection with another embedder would silently give wrong answers"
            )

    # -- file I/O -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the key file with owner-only permissions (0600)."""
        path = Path(path)
        record: dict[str, object] = {
            "format": KEY_FORMAT,
            "version": self._file_version(),
            "key_id": self.key_id,
            "secret": base64.b64encode(self._secret).decode("ascii"),
            "embedder": {"name": self.embedder.name, "fingerprint": self.embedder.fingerprint},
            **self._draw.to_record(),
            **({"scheme": self.scheme} if self.scheme else {}),
            **({"hash_key": self._hash_key} if self._hash_key is not None else {}),
        }
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            raise KeyFileError(f"{path} exists; refusing to overwrite a key") from None
        except OSError as exc:
            raise KeyFileError(f"cannot write key file {path}: {exc.strerror}") from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
        os.chmod(path, 0o600)
        return path

    def _file_version(self) -> int:
        if self._hash_key is not None:
            return FILE_VERSION_HASH_KEY
        return FILE_VERSION_SCHEME if self.scheme else self._draw.file_version

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WatermarkKey:
        """Read a key file; every failure is a :class:`KeyFileError` naming the file only."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise KeyFileError(f"key file {path} does not exist") from None
        except OSError as exc:
            raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from None
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if f'"{KEY_FORMAT}"'.encode() in raw:  # a key file cut short or corrupted
                raise KeyFileError(
                    f"{path} is a damaged samark key file (cut short or corrupted: not valid "
                    "JSON); restore it from your backup"
                ) from None
            raise KeyFileError(f"{path} is not a samark key file (not JSON)") from None
        if not isinstance(record, dict) or record.get("format") != KEY_FORMAT:
            raise KeyFileError(f"{path} is not a samark key file")
        version = record.get("version")
        if version not in KEY_VERSIONS:
            raise KeyFileError(
                f"{path} has key format version {version!r}; "
                f"this samark reads versions {', '.join(map(str, KEY_VERSIONS))}"
            )
        if version in (1, 2) and (version == 2) != ("space" in record):
            raise KeyFileError(f"{path} is a damaged samark key file (version and space disagree)")
        if (version == 3 and "cells" not in record) or (version in (1, 2) and "cells" in record):
            raise KeyFileError(f"{path} is a damaged samark key file (version and cells disagree)")
        if (version == 5) != ("hash_key" in record):
            raise KeyFileError(
                f"{path} is a damaged samark key file (version and hash_key disagree)"
            )
        if version not in (4, 5) and ("null_draws" in record or "scheme" in record):
            raise KeyFileError(
                f"{path} is a damaged samark key file (version {version} names no scheme or "
                "null draws)"
            )
        try:
            secret = base64.b64decode(record["secret"], validate=True)
            emb = record["embedder"]
            embedder = EmbedderIdentity(name=str(emb["name"]), fingerprint=str(emb["fingerprint"]))
            draw = PivotDraw.from_record(record, fingerprint=embedder.fingerprint)
            scheme = record.get("scheme")
            if scheme is not None and not isinstance(scheme, str):
                raise TypeError("scheme")
            key = cls(secret, embedder, draw, scheme, record.get("hash_key"))
        except UnknownPivotSpaceError as exc:
            raise KeyFileError(f"{path}: {exc}") from None
        except (KeyError, TypeError, ValueError):
            raise KeyFileError(f"{path} is a damaged samark key file") from None
        if record.get("key_id") not in (None, key.key_id):
            raise KeyFileError(f"{path} is a damaged samark key file (key id does not match)")
        return key

    @staticmethod
    def permissions_too_open(path: str | os.PathLike[str]) -> bool:
        mode = Path(path).stat().st_mode
        return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


def keyed_rng(secret: int, parts: Sequence[int] | np.ndarray) -> np.random.Generator:
    """numpy's PCG64 seeded by a hash of a derived secret (``WatermarkKey.derive_ints``) and
    non-negative integers (a context's token ids, a region, a step): the same stream on
    every platform, a fresh one per context."""
    blob = secret.to_bytes(8, "little") + np.asarray(parts, dtype="<i8").tobytes()
    return np.random.default_rng(int.from_bytes(hashlib.sha256(blob).digest()[:8], "little"))
