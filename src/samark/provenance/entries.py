"""What the record holds per served sentence, and what a lookup returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NotRequired, TypedDict

import numpy as np

#: the stored embeddings' dtype: float16 halves the bytes per sentence and moves a
#: cosine by about 1e-3 at most, far below the paraphrase threshold's resolution
EMBEDDING_DTYPE = np.dtype("<f2")


@dataclass(frozen=True)
class RecordEntry:
    """One served sentence as the record stores it: the keyed hash of its normal form,
    its unit embedding, the request that served it, the public id of the key, the UTC
    time, and the sentence itself only where the operator asked for it."""

    digest: bytes
    embedding: np.ndarray = field(repr=False)
    request_id: str
    key_id: str
    created: datetime
    text: str | None = None

    def __post_init__(self) -> None:
        if len(self.digest) != 32:
            raise ValueError("a record entry's digest is a 32-byte HMAC-SHA256")
        if self.created.tzinfo is None:
            raise ValueError("a record entry's time must be timezone-aware (UTC)")
        if not self.request_id:
            raise ValueError("a record entry needs a request id")


class StoredSentenceFields(TypedDict):
    """:meth:`StoredSentence.to_dict`: a stored sentence as JSON (its time in ISO 8601)."""

    request_id: str
    key_id: str
    time: str
    text: NotRequired[str]


@dataclass(frozen=True)
class StoredSentence:
    """A sentence found in the record (without its embedding): its row, the request that
    served it, the key's public id, when, and its text if stored."""

    row: int
    request_id: str
    key_id: str
    created: datetime
    text: str | None = None

    def to_dict(self) -> StoredSentenceFields:
        out: StoredSentenceFields = {
            "request_id": self.request_id,
            "key_id": self.key_id,
            "time": iso_utc(self.created),
        }
        if self.text is not None:
            out["text"] = self.text
        return out


@dataclass(frozen=True)
class Neighbour:
    """A stored sentence and its embedding's cosine with a checked sentence's."""

    sentence: StoredSentence
    cosine: float


def iso_utc(when: datetime) -> str:
    """``when`` as ISO 8601 in UTC with a ``Z``, to the second."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> datetime:
    return datetime.now(UTC)
