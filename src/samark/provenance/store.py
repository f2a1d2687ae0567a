"""The record's store: a small protocol, and the URL that chooses a backend.

A backend is one module with a store class that follows :class:`ProvenanceStore` (made
as ``cls(url, binding)``, its URLs' form checked by ``cls.check_url(url)``: a
:class:`StoreBackend`), registered under its URL schemes with ``@BACKENDS.register``, plus
one entry per scheme in :data:`BACKEND_CATALOG` (URL scheme -> its module, imported only
when its URL is opened, so that a backend's client library is needed only by those who
use it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from samark.errors import SamarkError
from samark.provenance.entries import EMBEDDING_DTYPE, Neighbour, RecordEntry, StoredSentence
from samark.registry import Registry

#: the format and version a store's metadata names
STORE_FORMAT = "samark-provenance"
STORE_VERSION = 1


class ProvenanceError(SamarkError):
    """A record cannot be opened, read or written as asked (wrong key, wrong embedder,
    unknown URL, damaged store). Messages never hold key material."""


@dataclass(frozen=True)
class StoreBinding:
    """What a store is bound to when it is made, and checked whenever it is opened: the
    record key's public fingerprint and the embedder (name, fingerprint, dimension)
    whose embeddings it holds. Nothing in it is secret."""

    record_key: str
    embedder: str
    embedder_fingerprint: str
    dim: int

    def to_meta(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items()}

    def new_store_meta(self) -> dict[str, str]:
        """The meta rows of a store made for this binding (any backend)."""
        return {
            "format": STORE_FORMAT,
            "version": str(STORE_VERSION),
            "embedding_dtype": EMBEDDING_DTYPE.str,
            **self.to_meta(),
        }

    @classmethod
    def read(cls, meta: Mapping[str, str], where: str) -> StoreBinding:
        """The binding a store's meta rows hold; :class:`ProvenanceError` where they are
        not a samark record's, or of another version (``where`` names the store)."""
        if meta.get("format") != STORE_FORMAT:
            raise ProvenanceError(f"{where} is not a samark record")
        if meta.get("version") != str(STORE_VERSION):
            raise ProvenanceError(
                f"{where} is a samark record of version {meta.get('version')}; "
                f"this samark reads version {STORE_VERSION}"
            )
        return cls.from_meta(meta)

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> StoreBinding:
        return cls(
            record_key=meta["record_key"],
            embedder=meta["embedder"],
            embedder_fingerprint=meta["embedder_fingerprint"],
            dim=int(meta["dim"]),
        )

    def check(self, stored: StoreBinding, where: str) -> None:
        """Raise :class:`ProvenanceError` unless ``stored`` (the store's) matches."""
        if stored.record_key != self.record_key:
            raise ProvenanceError(
                f"the record {where} was made with another key (record key fingerprint "
                f"{stored.record_key[:12]}, this key's {self.record_key[:12]}): its hashes "
                "cannot be checked with this key; open it with the key that made it"
            )
        if (stored.embedder_fingerprint, stored.dim) != (self.embedder_fingerprint, self.dim):
            raise ProvenanceError(
                f"the record {where} holds embeddings of embedder {stored.embedder!r} "
                f"({stored.dim}-d, fingerprint {stored.embedder_fingerprint[:12]}), not of "
                f"{self.embedder!r} ({self.dim}-d, fingerprint "
                f"{self.embedder_fingerprint[:12]}): their cosines mean nothing"
            )


@runtime_checkable
class ProvenanceStore(Protocol):
    """Where the record lives. Opened with a binding, every method may assume it holds;
    opened without one (maintenance: counting, deletion), ``add``, ``scan`` and the
    lookups raise."""

    url: str

    @property
    def binding(self) -> StoreBinding | None:
        """The store's own binding (None for a store that holds nothing yet and was
        opened without one)."""
        ...

    def add(self, entries: Sequence[RecordEntry]) -> None:
        """Store ``entries`` in one transaction: all or none, durable once it returns."""
        ...

    def lookup(self, digests: Sequence[bytes]) -> list[list[StoredSentence]]:
        """For each keyed hash, the stored sentences that have it (oldest first)."""
        ...

    def scan(self, after: int, limit: int) -> list[tuple[int, RecordEntry]]:
        """Up to ``limit`` stored sentences whole (embedding included, as stored), with
        their rows, in row order from the first row after ``after`` (0: from the start):
        for copying a record (:mod:`~samark.provenance.migrate`)."""
        ...

    def nearest(self, embeddings: np.ndarray, k: int = 1) -> list[list[Neighbour]]:
        """For each unit embedding (rows), the ``k`` stored sentences of highest cosine,
        highest first (exact search)."""
        ...

    def delete_request(self, request_id: str) -> int:
        """Delete every sentence of one request; the number deleted."""
        ...

    def delete_older_than(self, when: datetime) -> int:
        """Delete every sentence stored before ``when`` (retention); the number deleted."""
        ...

    def count(self) -> int:
        """The number of stored sentences."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> ProvenanceStore: ...

    def __exit__(self, *exc: object) -> None: ...


class StoreBackend(Protocol):
    """A backend as :data:`BACKENDS` holds it: its store class."""

    def __call__(self, url: str, binding: StoreBinding | None) -> ProvenanceStore:
        """The store at ``url`` (see :func:`open_store`)."""
        ...

    def check_url(self, url: str) -> None:
        """Raise :class:`ProvenanceError` unless ``url`` is in a form this backend reads
        (without opening anything)."""
        ...


#: URL scheme -> the module whose import registers that scheme's backend
BACKEND_CATALOG: dict[str, str] = {
    "sqlite": "samark.provenance.sqlite_store",
    "postgresql": "samark.provenance.postgres_store",
    "postgres": "samark.provenance.postgres_store",
}
#: the record backends by URL scheme
BACKENDS: Registry[StoreBackend] = Registry("record backend", catalog=BACKEND_CATALOG)


def url_scheme(url: str) -> str:
    """The scheme of a store URL; a plain path (no ``://``) is an SQLite file."""
    if "://" not in url:
        return "sqlite"
    return url.split("://", 1)[0].lower()


def _backend(url: str) -> StoreBackend:
    scheme = url_scheme(url)
    known = BACKENDS.names()
    if scheme not in known:
        listed = ", ".join(f"{s}://" for s in known)
        raise ProvenanceError(
            f"unknown record URL scheme {scheme!r} in {redact(url)}; known: {listed} "
            "(or a plain file path for SQLite)"
        )
    return BACKENDS.get(scheme)


def check_url(url: str) -> None:
    """Raise :class:`ProvenanceError` unless ``url`` names a known backend in a form it
    reads (without opening anything: for commands that check their arguments before
    loading models)."""
    _backend(url).check_url(url)


def open_store(url: str, binding: StoreBinding | None = None) -> ProvenanceStore:
    """The store at ``url`` (``sqlite:///relative.db``, ``sqlite:////abs/record.db``, or a
    plain file path), created where it does not exist. With ``binding``, a store bound to
    another record key or embedder is refused (:class:`ProvenanceError`); a new store is
    bound to it. Without, only counting and deletion work (they need no key)."""
    return _backend(url)(url, binding)


def redact(url: str) -> str:
    """``url`` without a password (``user:secret@host`` -> ``user:***@host``, and a
    ``password=`` query parameter), for messages and logs."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    authority, sep, path = rest.partition("/")
    if "?" in authority and not sep:
        authority, sep, path = authority.partition("?")
        sep = "?"
    if "@" not in authority and ":" in authority and "@" in path:
        # a password with an unencoded '/' (base64 ones hold it): libpq reads no password
        # there, but the text after ':' is one; kept only where it reads as a port and
        # the '@' comes after a query ('host:5432/db?user=me@corp')
        between, _, after = path.partition("@")
        if not (re.fullmatch(r"\d+", authority.rsplit(":", 1)[1]) and "?" in between):
            authority, sep, path = f"{authority}/{between}@{after}", "", ""
    if "@" in authority:
        user, _, host = authority.rpartition("@")
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        authority = f"{user}@{host}"
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", f"{scheme}://{authority}{sep}{path}")


def unit_embedding(embedding: np.ndarray, dim: int) -> np.ndarray:
    """``embedding`` as a unit float64 vector of ``dim`` numbers, or
    :class:`ProvenanceError`."""
    vector = np.asarray(embedding, dtype=np.float64).reshape(-1)
    if vector.shape != (dim,) or not np.isfinite(vector).all():
        raise ProvenanceError(f"a record embedding must be {dim} finite numbers")
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise ProvenanceError("a record embedding must not be zero")
    return vector / norm
