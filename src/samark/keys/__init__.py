"""Watermark keys: secret bytes, the embedder they belong to, and the key file.

A key's secret derives every scheme's key material one-way: SAMark's pivots (their
geometry lives in :mod:`samark.schemes.samark.pivots`; the key holds its public law, the avoided
directions or the pivot space) and any other scheme's integers (:meth:`derive_ints`,
:func:`keyed_rng`). The file is JSON with owner-only permissions; a key's repr, str and
errors show only its public id.
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
from typing import TYPE_CHECKING

import numpy as np

from samark.errors import EmbedderMismatchError, KeyFileError

if TYPE_CHECKING:
    from samark.schemes.samark.pivot_spaces import PivotSpace
    from samark.schemes.samark.pivots import PivotLaw

KEY_FORMAT = "samark-key"
KEY_VERSION = 1
#: the format of a key that draws its pivots in a pivot space (a samark that reads only
#: version 1 would ignore the space and derive other pivots, so it must refuse the file)
KEY_VERSION_SPACE = 2
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
    """A secret watermark key. Its repr and str show only a public key id."""

    __slots__ = ("_secret", "avoid", "embedder", "space")

    def __init__(
        self,
        secret: bytes,
        embedder: EmbedderIdentity,
        avoid: np.ndarray | None = None,
        space: PivotSpace | None = None,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise KeyFileError("a key secret must be at least 16 bytes")
        self._secret = secret
        self.embedder = embedder
        #: public directions (rows) that the pivots are orthogonal to; may have no rows
        self.avoid = np.zeros((0, 0)) if avoid is None else np.asarray(avoid, dtype=np.float64)
        #: the public subspace the pivots are drawn in (then no avoided directions)
        self.space = space
        if space is not None and self.avoid.size:
            raise ValueError(
                "a key draws its pivots either in a pivot space or away from avoided "
                "directions, not both"
            )

    @classmethod
    def generate(
        cls,
        embedder: EmbedderIdentity,
        avoid: np.ndarray | None = None,
        space: PivotSpace | None = None,
    ) -> WatermarkKey:
        return cls(secrets.token_bytes(SECRET_BYTES), embedder, avoid, space)

    def in_space(self, space: PivotSpace) -> WatermarkKey:
        """The same secret drawing its pivots in ``space`` instead (another key id: the
        pivots differ)."""
        return WatermarkKey(self._secret, self.embedder, None, space)

    @property
    def key_id(self) -> str:
        """A short public identifier (a hash of the secret), safe to print and store."""
        law = b"" if self.space is None else f"/space/{self.space.sha256}".encode()
        return hashlib.sha256(_ID_DOMAIN + self._secret + law).hexdigest()[:16]

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

    def pivots(self, dim: int, channels: int) -> np.ndarray:
        """The ``channels`` orthonormal pivot vectors in R^dim, shape ``(channels, dim)``."""
        from samark.schemes.samark.pivots import derive_pivots, derive_pivots_in_space

        if self.space is not None:
            self._check_space(dim)
            return derive_pivots_in_space(self._secret, self.space.basis, channels)
        return derive_pivots(self._secret, dim, channels, self.avoid_for(dim))

    def pivot_law(self, dim: int) -> PivotLaw:
        """The public law this key's pivots are drawn from, in R^dim: what the detector's
        null pivots must follow."""
        from samark.schemes.samark.pivots import PivotLaw

        if self.space is not None:
            self._check_space(dim)
            return PivotLaw.of("space", self.space.basis)
        return PivotLaw.of("avoid", self.avoid_for(dim))

    def null_pivots(self, count: int, dim: int, channels: int, seed: int) -> np.ndarray:
        """``count`` public pivot sets from this key's law (the detector's exchangeable
        stand-ins), shape ``(count, channels, dim)``."""
        return self.pivot_law(dim).null_pivots(count, dim, channels, seed)

    def _check_space(self, dim: int) -> None:
        assert self.space is not None
        if self.space.dim != dim:
            raise EmbedderMismatchError(
                f"this key's pivot space is {self.space.dim}-d, but the embedder is {dim}-d"
            )

    def avoid_for(self, dim: int) -> np.ndarray | None:
        """The avoided directions if they live in R^dim (else ``None``)."""
        if self.avoid.size == 0:
            return None
        if self.avoid.shape[1] != dim:
            raise EmbedderMismatchError(
                f"this key's avoided directions are {self.avoid.shape[1]}-d, "
                f"but the embedder is {dim}-d"
            )
        return self.avoid

    # -- file I/O -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the key file with owner-only permissions (0600)."""
        path = Path(path)
        record: dict[str, object] = {
            "format": KEY_FORMAT,
            "version": KEY_VERSION if self.space is None else KEY_VERSION_SPACE,
            "key_id": self.key_id,
            "secret": base64.b64encode(self._secret).decode("ascii"),
            "embedder": {"name": self.embedder.name, "fingerprint": self.embedder.fingerprint},
            "avoid": {
                "rows": int(self.avoid.shape[0]),
                "dim": int(self.avoid.shape[1]) if self.avoid.size else 0,
                "float64_le": base64.b64encode(self.avoid.astype("<f8").tobytes()).decode("ascii"),
            },
        }
        if self.space is not None:
            record["space"] = self.space.to_record()
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

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WatermarkKey:
        """Read a key file; every failure is a :class:`KeyFileError` naming the file only."""
        from samark.schemes.samark.pivot_spaces import UnknownPivotSpaceError, load_pivot_space

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
            raise KeyFileError(f"{path} is not a samark key file (not JSON)") from None
        if not isinstance(record, dict) or record.get("format") != KEY_FORMAT:
            raise KeyFileError(f"{path} is not a samark key file")
        version = record.get("version")
        if version not in (KEY_VERSION, KEY_VERSION_SPACE):
            raise KeyFileError(
                f"{path} has key format version {version!r}; "
                f"this samark reads versions {KEY_VERSION} and {KEY_VERSION_SPACE}"
            )
        if (version == KEY_VERSION_SPACE) != ("space" in record):
            raise KeyFileError(f"{path} is a damaged samark key file (version and space disagree)")
        try:
            secret = base64.b64decode(record["secret"], validate=True)
            emb = record["embedder"]
            embedder = EmbedderIdentity(name=str(emb["name"]), fingerprint=str(emb["fingerprint"]))
            avoid_rec = record.get("avoid") or {"rows": 0, "dim": 0, "float64_le": ""}
            flat = np.frombuffer(base64.b64decode(avoid_rec["float64_le"], validate=True), "<f8")
            rows, dim = int(avoid_rec["rows"]), int(avoid_rec["dim"])
            avoid = flat.reshape(rows, dim) if rows else None
            space_rec = record.get("space")
            space = None
            if space_rec is not None:
                space = load_pivot_space(
                    str(space_rec["name"]),
                    fingerprint=embedder.fingerprint,
                    sha256=str(space_rec["sha256"]),
                )
            key = cls(secret, embedder, avoid, space)
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
