"""A signed C2PA manifest on served text, and its check (C2PA 2.4, unstructured text).

The manifest is made and signed by the Content Authenticity Initiative's library
(``c2pa-python``) and carried in the text by the reference embedding (``c2pa-text``): a
zero-width no-break space and a run of Unicode variation selectors appended to the text,
invisible, kept by copy and paste. Its hard binding is a ``c2pa.hash.data`` assertion over
the text's UTF-8 bytes (NFC) without the wrapper, so any edit to the text breaks it
(the wrapper is removed before hashing, as C2PA 2.4 says; the exclusion range is not
written into the assertion, see :meth:`ManifestSigner.sign`). Nothing of C2PA is
implemented here: see :mod:`samark.provenance.c2pa_native`.

A check answers one of four states (:data:`ManifestState`):

- ``"intact"``: a manifest, its signature valid, its signer chaining to a trust anchor,
  and the text exactly what was signed;
- ``"altered"``: a valid, trusted manifest, but the text changed after signing;
- ``"unverifiable"``: a manifest that cannot be vouched for (untrusted or invalid
  signer, a broken signature, a damaged or doubled wrapper);
- ``"none"``: no manifest.

The mark and the record never see the manifest: :func:`strip_manifest` removes it before
scoring.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypedDict

from samark.errors import SamarkError
from samark.provenance.c2pa_native import (
    C2paUnavailableError,
    DataHash,
    placeholder_size,
    sign_data_hashed,
)

ManifestState = Literal["intact", "altered", "unverifiable", "none"]
MANIFEST_STATES: tuple[ManifestState, ...] = ("intact", "altered", "unverifiable", "none")

TRAINED_ALGORITHMIC_MEDIA = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
GENERATION_ASSERTION = "org.samark.generation"
_SIGN_FORMAT = "application/c2pa"
_READ_FORMAT = "text/plain"
# A wrapper as c2pa-text writes it: U+FEFF, then variation selectors (U+FE00-FE0F and
# U+E0100-E01EF). Used only to strip every wrapper, damaged ones included.
# At least a wrapper's header (13 bytes), as c2pa-text looks for: a lone U+FEFF before
# an emoji's U+FE0F is not a wrapper.
_WRAPPER = re.compile("\ufeff[\ufe00-\ufe0f\U000e0100-\U000e01ef]{13,}")
# Failure codes that say only that the bytes differ from what was signed.
_BINDING_FAILURES = ("assertion.dataHash.mismatch",)


class ManifestError(SamarkError, ValueError):
    """A C2PA certificate or key is missing, unreadable or unusable."""


def _modules() -> tuple[ModuleType, ModuleType]:
    """The CAI library (``c2pa``) and its text wrapper (``c2pa_text``), or the extra's hint."""
    try:
        import c2pa
        import c2pa_text
    except ImportError as error:
        raise C2paUnavailableError(
            "C2PA manifests need the c2pa extra: pip install 'samark[c2pa]'"
        ) from error
    return c2pa, c2pa_text


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("samark")
    except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
        return "unknown"


def strip_manifest(text: str) -> str:
    """``text`` without any C2PA text wrapper (valid, damaged or repeated); else unchanged."""
    return _WRAPPER.sub("", text)


def has_manifest(text: str) -> bool:
    """Whether ``text`` carries something shaped like a C2PA text wrapper."""
    return _WRAPPER.search(text) is not None


def _algorithm(key_pem: bytes) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as error:
        raise ManifestError("the C2PA key is not an unencrypted PEM private key") from error
    if isinstance(key, ec.EllipticCurvePrivateKey):
        by_curve = {"secp256r1": "es256", "secp384r1": "es384", "secp521r1": "es512"}
        if key.curve.name not in by_curve:
            raise ManifestError(f"C2PA does not sign with the curve {key.curve.name}")
        return by_curve[key.curve.name]
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "ed25519"
    if isinstance(key, rsa.RSAPrivateKey):
        return "ps256"
    raise ManifestError("the C2PA key must be an EC (P-256/384/521), Ed25519 or RSA key")


def _read(path: str | Path, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ManifestError(f"cannot read the C2PA {what} {path}: {error.strerror}") from error
    if b"-----BEGIN" not in data:
        raise ManifestError(f"the C2PA {what} {path} is not PEM")
    return data


@dataclass(frozen=True)
class ManifestSigner:
    """The operator's certificate chain (leaf first, PEM) and private key, to sign with.

    The key stays in memory only: it is never written, logged or put in a manifest; its
    ``repr`` leaves it out.
    """

    cert_chain: bytes
    key: bytes = field(repr=False)
    alg: str = "es256"

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path) -> ManifestSigner:
        """Read and check a certificate chain and its key; a clear error if unusable."""
        from cryptography import x509

        chain = _read(cert, "certificate")
        key_pem = _read(key, "key")
        alg = _algorithm(key_pem)
        try:
            leaf = x509.load_pem_x509_certificates(chain)[0]
        except ValueError as error:
            raise ManifestError(f"the C2PA certificate {cert} cannot be read") from error
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            PublicFormat,
            load_pem_private_key,
        )

        public = load_pem_private_key(key_pem, password=None).public_key()
        same = leaf.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        if public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo) != same:
            raise ManifestError("the C2PA key does not belong to the certificate's first entry")
        return cls(cert_chain=chain, key=key_pem, alg=alg)

    def root_anchor(self) -> str:
        """The last certificate of the chain, PEM: a default trust anchor for its own checks."""
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import Encoding

        last = x509.load_pem_x509_certificates(self.cert_chain)[-1]
        return last.public_bytes(Encoding.PEM).decode()

    def definition(self, model: str, key_id: str | None, when: datetime) -> dict[str, object]:
        """The manifest's content: made by AI, by which model, with which key (its public id)."""
        generation: dict[str, str] = {"model": model, "time": when.isoformat()}
        if key_id is not None:
            generation["key_id"] = key_id
        return {
            "claim_generator_info": [{"name": "samark", "version": _version()}],
            "title": "AI-generated text",
            "format": "text/plain",
            "assertions": [
                {
                    "label": "c2pa.actions.v2",
                    "data": {
                        "actions": [
                            {
                                "action": "c2pa.created",
                                "when": when.isoformat(),
                                "digitalSourceType": TRAINED_ALGORITHMIC_MEDIA,
                                "softwareAgent": {"name": model},
                            }
                        ]
                    },
                },
                {"label": GENERATION_ASSERTION, "data": generation},
            ],
        }

    def sign(
        self,
        text: str,
        *,
        model: str,
        key_id: str | None = None,
        when: datetime | None = None,
    ) -> str:
        """``text`` (NFC, any earlier wrapper removed) with a signed manifest appended.

        An empty text is refused (:class:`ManifestError`): there is nothing to bind."""
        c2pa, c2pa_text = _modules()
        body = unicodedata.normalize("NFC", strip_manifest(text))
        if not body:  # the CAI library cannot bind an empty asset (it checks as altered)
            raise ManifestError("an empty text has nothing for a C2PA manifest to bind")
        data = body.encode("utf-8")
        when = when or datetime.now(timezone.utc)
        builder = c2pa.Builder(json.dumps(self.definition(model, key_id, when)))
        signer = c2pa.Signer.from_info(
            c2pa.C2paSignerInfo(
                alg=self.alg.encode(), sign_cert=self.cert_chain, private_key=self.key, ta_url=None
            )
        )
        try:
            placeholder_size(builder, signer, _SIGN_FORMAT)
            # The hash covers the text without its wrapper. No exclusion range is
            # declared: since c2pa-rs 0.91 a declared exclusion must match the manifest's
            # location as the library finds it, and the wheel's library (c2pa-rs 0.91.3)
            # has no text/plain handler to find one ("data hash exclusion does not match
            # the manifest location in the asset", on the untouched text). So the check
            # removes the wrapper and hands the reader the rest; a strict C2PA 2.4 A.8
            # reader says assertion.dataHash.malformed (docs/compliance.md, "Limits we
            # know of"; docs/results/2026-12-05-c2pa-exclusion).
            data_hash: DataHash = {
                "name": "jumbf manifest",
                "alg": "sha256",
                "hash": list(hashlib.sha256(data).digest()),
                "exclusions": [],
                "pad": [],
            }
            store = sign_data_hashed(builder, signer, data_hash, _SIGN_FORMAT)
        finally:
            builder.close()
            signer.close()
        return str(c2pa_text.embed_manifest(body, store))


class ManifestFields(TypedDict):
    """:meth:`ManifestCheck.to_dict`: a manifest's check as JSON."""

    state: ManifestState
    signer: str | None
    issuer: str | None
    model: str | None
    key_id: str | None
    signed_at: str | None
    digital_source_type: str | None
    codes: list[str]
    detail: str


@dataclass(frozen=True)
class ManifestCheck:
    """What a text's C2PA manifest says, and whether it holds. ``state`` is one of
    :data:`MANIFEST_STATES`; the other fields are ``None`` where there is nothing to say."""

    state: ManifestState
    signer: str | None = None
    issuer: str | None = None
    model: str | None = None
    key_id: str | None = None
    signed_at: str | None = None
    digital_source_type: str | None = None
    codes: tuple[str, ...] = ()
    detail: str = ""

    def to_dict(self) -> ManifestFields:
        """The JSON form (``manifest`` in ``samark detect --json`` and ``/v1/detect``)."""
        return {
            "state": self.state,
            "signer": self.signer,
            "issuer": self.issuer,
            "model": self.model,
            "key_id": self.key_id,
            "signed_at": self.signed_at,
            "digital_source_type": self.digital_source_type,
            "codes": list(self.codes),
            "detail": self.detail,
        }

    def describe(self) -> str:
        """One line in plain words."""
        who = f" by {self.signer}" + (f" ({self.issuer})" if self.issuer else "")
        return {
            "intact": f"C2PA manifest intact, signed{who}",
            "altered": f"C2PA manifest signed{who}, but the text was changed after signing",
            "unverifiable": f"C2PA manifest present but unverifiable: {self.detail}",
            "none": "no C2PA manifest",
        }[self.state]


def _fields(active: dict[str, Any] | None) -> dict[str, Any]:
    if not active:
        return {}
    info = active.get("signature_info") or {}
    found: dict[str, Any] = {"signer": info.get("common_name"), "issuer": info.get("issuer")}
    for assertion in active.get("assertions", []):
        data = assertion.get("data") or {}
        if assertion.get("label") == GENERATION_ASSERTION:
            found.update(model=data.get("model"), key_id=data.get("key_id"))
            found["signed_at"] = data.get("time")
        elif str(assertion.get("label", "")).startswith("c2pa.actions"):
            for action in data.get("actions", []):
                if action.get("action") == "c2pa.created":
                    found["digital_source_type"] = action.get("digitalSourceType")
    return found


class ManifestVerifier:
    """Checks texts' manifests against configurable trust anchors (PEM certificates).

    A signer whose chain reaches none of ``trust_anchors`` is ``"unverifiable"``; with no
    anchors at all, every manifest is.
    """

    def __init__(self, trust_anchors: str | None = None) -> None:
        c2pa, _ = _modules()
        settings: dict[str, dict[str, object]] = {"verify": {"verify_trust": True}}
        if trust_anchors:
            settings["trust"] = {"trust_anchors": trust_anchors}
        self._context = c2pa.Context.from_dict(settings)

    @classmethod
    def from_files(cls, paths: list[str | Path]) -> ManifestVerifier:
        """Trust the PEM certificates in ``paths``."""
        return cls("".join(_read(path, "trust anchor").decode() for path in paths) or None)

    def check(self, text: str) -> ManifestCheck:
        """The state of ``text``'s manifest (see the module's docstring)."""
        c2pa, c2pa_text = _modules()
        try:
            found = c2pa_text.find_wrapper_info(text)
        except ValueError:
            return ManifestCheck("unverifiable", detail="more than one C2PA wrapper in the text")
        if found is None:
            if has_manifest(text):
                return ManifestCheck("unverifiable", detail="a damaged C2PA wrapper")
            return ManifestCheck("none")
        store, start, length = found
        raw = text.encode("utf-8")
        before, after = raw[:start].decode(), raw[start + length :].decode()
        if has_manifest(before) or has_manifest(after):
            return ManifestCheck("unverifiable", detail="more than one C2PA wrapper in the text")
        # C2PA 2.4 binds the NFC form of what lies outside the wrapper.
        asset = unicodedata.normalize("NFC", before + after).encode("utf-8")
        try:
            reader = c2pa.Reader(
                _READ_FORMAT, io.BytesIO(asset), manifest_data=store, context=self._context
            )
        except c2pa.C2paError as error:
            return ManifestCheck("unverifiable", detail=f"the manifest cannot be read ({error})")
        with reader:
            results = reader.get_validation_results() or {}
            fields = _fields(reader.get_active_manifest())
        failures = tuple(
            str(entry.get("code"))
            for entry in (results.get("activeManifest") or {}).get("failure", [])
        )
        if not failures:
            return ManifestCheck("intact", codes=failures, **fields)
        if all(code in _BINDING_FAILURES for code in failures):
            return ManifestCheck(
                "altered", codes=failures, detail="the text differs from what was signed", **fields
            )
        reason = (
            "the signer is not trusted"
            if "signingCredential.untrusted" in failures
            else "validation failed: " + ", ".join(failures)
        )
        return ManifestCheck("unverifiable", codes=failures, detail=reason, **fields)


def read_manifest(text: str, verifier: ManifestVerifier | None = None) -> ManifestCheck:
    """``text``'s manifest state; ``"none"`` without reading anything where there is no
    wrapper, and ``"unverifiable"`` (saying why) where one is found but the ``c2pa`` extra
    is not installed. ``verifier``: the trust anchors (none: no signer is trusted)."""
    if not has_manifest(text):
        return ManifestCheck("none")
    if verifier is None:
        try:
            verifier = ManifestVerifier()
        except C2paUnavailableError:
            return ManifestCheck(
                "unverifiable",
                detail="the c2pa extra is not installed (pip install 'samark[c2pa]')",
            )
    return verifier.check(text)
