"""A throwaway public-key infrastructure for the C2PA tests: a root CA and a signing
certificate under it, as C2PA asks, written as PEM files (used by tests/test_c2pa.py,
tests/test_page.py and the exclusion-range probe in docs/results/2026-12-05-c2pa-exclusion).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = dt.datetime.now(dt.timezone.utc)


def _name(common: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"{common} Org"),
        ]
    )


def _usage(*, sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=not sign,
        crl_sign=not sign,
        encipher_only=False,
        decipher_only=False,
    )


def throwaway_pki(folder: Path, who: str) -> dict[str, Path]:
    """A root CA and a signing certificate under it (as C2PA asks: not a CA, digital
    signature, an extended key usage), written as PEM files: chain, key and root."""
    root_key = ec.generate_private_key(ec.SECP256R1())
    key = ec.generate_private_key(ec.SECP256R1())
    period = {"not_valid_before": NOW - dt.timedelta(days=1)}
    period["not_valid_after"] = NOW + dt.timedelta(days=30)
    root = (
        x509.CertificateBuilder(subject_name=_name(f"{who} CA"), issuer_name=_name(f"{who} CA"))
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(period["not_valid_before"])
        .not_valid_after(period["not_valid_after"])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_usage(sign=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), False)
        .sign(root_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder(subject_name=_name(f"{who} signer"), issuer_name=root.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(period["not_valid_before"])
        .not_valid_after(period["not_valid_after"])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(sign=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), False
        )
        .sign(root_key, hashes.SHA256())
    )

    def pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    paths = {name: folder / f"{who}-{name}.pem" for name in ("chain", "key", "root")}
    paths["chain"].write_bytes(pem(leaf) + pem(root))
    paths["root"].write_bytes(pem(root))
    paths["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths
