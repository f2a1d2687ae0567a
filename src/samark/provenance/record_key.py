"""The record key: the secret under which the record hashes sentences.

It is derived one-way from the watermark key under its own label, so the record reveals
nothing of the watermark key, and a keyed hash in the record says nothing of its
sentence to anyone without the key: a dictionary of likely sentences cannot be hashed
and compared. A store records the key's public *fingerprint* (never the key), so that a
record opened with another key is refused.
"""

from __future__ import annotations

import hashlib
import hmac

from samark.keys import WatermarkKey
from samark.provenance.normalise import normalise

#: the label of the record key's derivation from the watermark key
RECORD_KEY_LABEL = "samark/provenance-record"
_FINGERPRINT_DOMAIN = b"samark/provenance-record/fingerprint/v1/"


class RecordKey:
    """A 256-bit secret for keyed sentence hashes; its repr shows only its fingerprint."""

    __slots__ = ("_secret", "key_id")

    def __init__(self, secret: bytes, key_id: str) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("a record key must be at least 16 bytes")
        self._secret = secret
        #: the public id of the watermark key it was derived from
        self.key_id = key_id

    @classmethod
    def of(cls, key: WatermarkKey) -> RecordKey:
        """The record key of watermark key ``key`` (the same key always gives the same)."""
        words = key.derive_ints(RECORD_KEY_LABEL, 4, bits=64)
        return cls(b"".join(w.to_bytes(8, "little") for w in words), key.key_id)

    @property
    def fingerprint(self) -> str:
        """A public, one-way identifier of this record key, safe to store and print."""
        return hashlib.sha256(_FINGERPRINT_DOMAIN + self._secret).hexdigest()[:32]

    def digest(self, sentence: str) -> bytes:
        """HMAC-SHA256 of the sentence's normal form (32 bytes)."""
        return hmac.new(self._secret, normalise(sentence).encode("utf-8"), "sha256").digest()

    def __repr__(self) -> str:
        return f"RecordKey(fingerprint={self.fingerprint!r}, key_id={self.key_id!r})"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("RecordKey is not picklable; pass the key file path instead")
