"""Keyrings: the labelled keys an operator has used, for rotation, deployments and payload.

A ring is a folder (mode 0700) holding one key file per key (mode 0600) and ``ring.json``,
its public index: the embedder every key belongs to, and per key a label, the key's public
id, its file and its created and retired dates. Nothing in the index is secret.

- **Rotation.** A retired key no longer marks text but still detects it, so that old text
  stays provable. ``current`` is the newest key that is not retired.
- **Deployments / attribution.** Each model, tenant or region gets a labelled key;
  detection against the ring (:mod:`samark.detection.ring_detector`) names the key that marked a
  text, with a family-wise error guarantee.
- **Payload.** A ring of ``2**b`` keys carries ``b`` bits: generating with the key at
  position ``v`` writes the value ``v``, and detection decodes it. Positions are the order
  in which keys were added and never change (retiring a key keeps its place). A ring made
  with ``flag_bits = f`` carries ``f`` more bits in SAMark's flag pattern (at most its
  channels - 1): value ``v`` is written by the key at position ``v >> f``, with flags
  2..f+1 set relative to flag 1 from the low bits of ``v`` (:func:`flag_signs`; flag 1
  stays random), and detection reads them back from the flags it infers. They cost no
  detection power (docs/operators.md, "Payload").

Every key of a ring is bound to the ring's embedder: a key made for another embedder is
refused with a clear error, because its detection would be meaningless.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from samark.errors import EmbedderMismatchError, KeyFileError, SamarkError
from samark.keys import EmbedderIdentity, WatermarkKey

RING_FORMAT = "samark-keyring"
#: the index's version: 2 for a ring with flag bits (a reader of version 1 would decode
#: its payloads wrongly, so it must refuse the ring), else 1 (older rings' bytes)
RING_VERSION = 2
INDEX = "ring.json"
#: at most this many payload bits in the flag pattern (SAMark's channels - 1: 1 by default)
MAX_FLAG_BITS = 8
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class KeyringError(SamarkError):
    """A keyring is missing, malformed, or asked for a key it does not hold."""


class EntryFields(TypedDict):
    """:meth:`RingEntry.to_dict`: one key of a ring as JSON (never the key)."""

    label: str
    key_id: str
    created: str
    retired: str | None


@dataclass(frozen=True)
class RingEntry:
    """One key of a ring, as its public index lists it (never the secret)."""

    label: str
    key_id: str
    created: str  # ISO 8601, UTC
    retired: str | None = None

    @property
    def active(self) -> bool:
        return self.retired is None

    @property
    def file(self) -> str:
        return f"{self.label}.key"

    def to_dict(self) -> EntryFields:
        return {
            "label": self.label,
            "key_id": self.key_id,
            "created": self.created,
            "retired": self.retired,
        }


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def instant(value: str) -> datetime:
    """An ISO 8601 date or time as an aware UTC time (a date alone: its end, so that a
    key created that day counts as in use on it)."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise KeyringError(f"not an ISO 8601 date or time: {value!r}") from None
    if len(value) == 10:  # a date: the end of that day
        moment = moment.replace(hour=23, minute=59, second=59)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def flag_signs(value: int, bits: int) -> tuple[int, ...]:
    """The relative signs that write ``value`` in ``bits`` flag bits: bit i (least
    significant first) sets flag i + 2 to flag 1's sign (0) or the opposite (1)."""
    if not 0 <= value < 2**bits:
        raise KeyringError(f"{value} does not fit in {bits} flag bits")
    return tuple(-1 if value >> i & 1 else 1 for i in range(bits))


def flag_value(flags: Sequence[int], bits: int) -> int:
    """The value that ``flags`` (a whole flag pattern) write in ``bits`` flag bits: the
    signs of flags 2..bits+1 relative to flag 1 (:func:`flag_signs`' inverse). No bits
    read nothing: 0, whatever the scheme's flags (a token scheme has none)."""
    if bits == 0:
        return 0
    if len(flags) <= bits:
        raise KeyringError(
            f"{bits} flag bits need {bits + 1} flags; the detection has {len(flags)}"
        )
    return sum(1 << i for i in range(bits) if flags[i + 1] * flags[0] < 0)


def check_flag_bits(bits: int) -> int:
    """``bits`` if a ring may carry that many payload bits in the flags."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 0 <= bits <= MAX_FLAG_BITS:
        raise KeyringError(f"flag_bits must be in 0..{MAX_FLAG_BITS}, got {bits!r}")
    return bits


def check_label(label: str) -> str:
    """``label`` if it is a valid key label (it names a file): letters, digits, ``._-``,
    at most 64 characters, starting with a letter or digit."""
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise KeyringError(
            f"invalid key label {label!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return label


class Keyring:
    """A folder of labelled keys bound to one embedder. Build one with :meth:`create`,
    open one with :meth:`load`; every change is written to disk at once (atomically)."""

    def __init__(
        self,
        path: Path,
        embedder: EmbedderIdentity,
        entries: list[RingEntry],
        *,
        flag_bits: int = 0,
    ) -> None:
        check_flag_bits(flag_bits)
        self.path = path
        self.embedder = embedder
        self._entries = list(entries)
        #: payload bits written in SAMark's flag pattern, beside the key's position
        self.flag_bits = flag_bits

    # -- files ----------------------------------------------------------------------------
    @classmethod
    def create(
        cls, path: str | os.PathLike[str], embedder: EmbedderIdentity, *, flag_bits: int = 0
    ) -> Keyring:
        """A new, empty ring in folder ``path`` (created with mode 0700; an existing folder
        must be empty); ``flag_bits`` payload bits go in SAMark's flag pattern."""
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise KeyringError(f"{path} exists and is not an empty folder; refusing to use it")
        ring = cls(path, embedder, [], flag_bits=flag_bits)  # validated before any file
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)
        ring._write_index()
        return ring

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keyring:
        """Open the ring in folder ``path``; every failure is a :class:`KeyringError`."""
        path = Path(path)
        index = path / INDEX
        try:
            record = json.loads(index.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise KeyringError(f"{path} is not a samark keyring (no {INDEX})") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise KeyringError(f"cannot read keyring index {index}: {exc}") from None
        if not isinstance(record, dict) or record.get("format") != RING_FORMAT:
            raise KeyringError(f"{index} is not a samark keyring index")
        if record.get("version") not in (1, RING_VERSION):
            raise KeyringError(
                f"{index} has keyring version {record.get('version')!r}; "
                f"this samark reads versions 1 to {RING_VERSION}"
            )
        try:
            emb = record["embedder"]
            embedder = EmbedderIdentity(str(emb["name"]), str(emb["fingerprint"]))
            entries = [
                RingEntry(
                    label=check_label(str(e["label"])),
                    key_id=str(e["key_id"]),
                    created=str(e["created"]),
                    retired=None if e.get("retired") is None else str(e["retired"]),
                )
                for e in record["keys"]
            ]
        except (KeyError, TypeError) as exc:
            raise KeyringError(f"{index} is a damaged keyring index ({exc})") from None
        if len({e.label for e in entries}) != len(entries):
            raise KeyringError(f"{index} is a damaged keyring index (a label repeats)")
        flag_bits = record.get("flag_bits", 0)
        try:
            check_flag_bits(flag_bits)
            if (flag_bits > 0) != (record["version"] == 2):
                raise KeyringError("flag bits need version 2, and version 2 flag bits")
        except KeyringError:
            raise KeyringError(
                f"{index} is a damaged keyring index (flag_bits {flag_bits!r})"
            ) from None
        return cls(path, embedder, entries, flag_bits=flag_bits)

    def _write_index(self) -> None:
        record = {
            "format": RING_FORMAT,
            "version": RING_VERSION if self.flag_bits else 1,
            "embedder": {"name": self.embedder.name, "fingerprint": self.embedder.fingerprint},
            "keys": [e.to_dict() for e in self._entries],
        }
        if self.flag_bits:  # older rings have none: they stay byte-identical
            record["flag_bits"] = self.flag_bits
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".ring-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, indent=2)
                f.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path / INDEX)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- contents -------------------------------------------------------------------------
    @property
    def entries(self) -> tuple[RingEntry, ...]:
        """Every key in ring order (retired ones included: they still detect)."""
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        active = sum(e.active for e in self._entries)
        return (
            f"Keyring(path={str(self.path)!r}, keys={len(self)}, active={active}, "
            f"embedder={self.embedder.name!r})"
        )

    def entry(self, label: str) -> RingEntry:
        for e in self._entries:
            if e.label == label:
                return e
        raise KeyringError(f"the ring has no key labelled {label!r}; it has {self.labels()}")

    def labels(self) -> list[str]:
        return [e.label for e in self._entries]

    def position(self, label: str) -> int:
        return self._entries.index(self.entry(label))

    def key(self, label: str) -> WatermarkKey:
        """The key labelled ``label``, read from its file (its id checked against the
        index)."""
        entry = self.entry(label)
        key = WatermarkKey.load(self.path / entry.file)
        if key.key_id != entry.key_id:
            raise KeyringError(
                f"{self.path / entry.file} holds key {key.key_id}, but the index lists "
                f"{entry.key_id} for {label!r}: the ring is damaged"
            )
        return key

    def load_keys(self) -> list[tuple[RingEntry, WatermarkKey]]:
        """Every key with its entry, in ring order."""
        return [(e, self.key(e.label)) for e in self._entries]

    def current(self) -> RingEntry:
        """The newest key that is not retired: the one that marks text by default."""
        active = [e for e in self._entries if e.active]
        if not active:
            raise KeyringError(f"every key of {self.path} is retired: add one to mark text")
        return max(active, key=lambda e: (e.created, self._entries.index(e)))

    def in_use(self, at: str) -> list[RingEntry]:
        """The keys in use at ``at`` (an ISO 8601 date or time; UTC unless it says):
        created at or before it, and not retired by then."""
        moment = instant(at)
        return [
            e
            for e in self._entries
            if instant(e.created) <= moment and (e.retired is None or moment < instant(e.retired))
        ]

    @property
    def key_bits(self) -> int | None:
        """``b`` when the ring holds ``2**b`` keys (its position can carry ``b`` bits)."""
        n = len(self._entries)
        return n.bit_length() - 1 if n >= 1 and n & (n - 1) == 0 else None

    @property
    def payload_bits(self) -> int | None:
        """The bits a payload value carries: the key's position (a ring of ``2**b`` keys)
        and the flag bits; None when the ring carries none (its size is not a power of two,
        or it is one key without flag bits)."""
        bits = self.key_bits
        if bits is None or bits + self.flag_bits == 0:
            return None
        return bits + self.flag_bits

    def payload_entry(self, value: int) -> RingEntry:
        """The key that writes payload ``value`` (its position is ``value``'s high bits)."""
        bits = self.payload_bits
        if bits is None:
            raise KeyringError(
                f"a payload needs a ring of 2, 4, 8, ... keys (or flag bits); {self.path} "
                f"has {len(self)} keys"
            )
        if not 0 <= value < 2**bits:
            raise KeyringError(
                f"this ring carries {bits} bits: payload must be in 0..{2**bits - 1}"
            )
        entry = self._entries[value >> self.flag_bits]
        if not entry.active:
            raise KeyringError(f"payload {value}'s key {entry.label!r} is retired")
        return entry

    def payload_flags(self, value: int) -> tuple[int, ...]:
        """The relative flag signs that write payload ``value``'s low ``flag_bits`` bits
        (SAMarkGeneration.payload_flags; empty when the ring has no flag bits)."""
        self.payload_entry(value)  # validates the value
        return flag_signs(value & ((1 << self.flag_bits) - 1), self.flag_bits)

    # -- changes --------------------------------------------------------------------------
    def add(self, key: WatermarkKey, label: str, *, created: str | None = None) -> RingEntry:
        """Add ``key`` under ``label``: its file is written into the ring (mode 0600)."""
        check_label(label)
        if key.embedder.fingerprint != self.embedder.fingerprint:
            raise EmbedderMismatchError(
                f"key {key.key_id} was made for embedder {key.embedder.name!r} (fingerprint "
                f"{key.embedder.fingerprint[:12]}), but this ring holds keys of "
                f"{self.embedder.name!r} (fingerprint {self.embedder.fingerprint[:12]}): "
                "one ring detects with one embedder"
            )
        if label in self.labels():
            raise KeyringError(f"the ring already has a key labelled {label!r}")
        if any(e.key_id == key.key_id for e in self._entries):
            raise KeyringError(f"key {key.key_id} is already in the ring")
        try:
            key.save(self.path / f"{label}.key")
        except KeyFileError as exc:
            raise KeyringError(str(exc)) from None
        entry = RingEntry(label=label, key_id=key.key_id, created=created or _now())
        self._entries.append(entry)
        self._write_index()
        return entry

    def retire(self, label: str, *, when: str | None = None) -> RingEntry:
        """Retire the key ``label``: it stops marking text and keeps detecting it."""
        entry = self.entry(label)
        if not entry.active:
            raise KeyringError(f"key {label!r} was already retired on {entry.retired}")
        new = replace(entry, retired=when or _now())
        self._entries[self._entries.index(entry)] = new
        self._write_index()
        return new
