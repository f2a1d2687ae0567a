"""The C2PA options shared by ``samark serve``, ``generate`` and ``detect``: the
operator's certificate and key to sign completions with, and the trust anchors a manifest
is checked against (docs/compliance.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from samark.cli.common import fail
from samark.errors import SamarkError
from samark.provenance.c2pa_manifest import ManifestSigner, ManifestVerifier

C2paCertOption = Annotated[
    Path | None,
    typer.Option(
        "--c2pa-cert",
        help="Sign each completion with a C2PA manifest (C2PA 2.4, unstructured text): "
        "the operator's certificate chain, PEM, leaf first. Needs --c2pa-key and the "
        "c2pa extra.",
    ),
]
C2paKeyOption = Annotated[
    Path | None,
    typer.Option("--c2pa-key", help="The private key (PEM) of --c2pa-cert's certificate."),
]
C2paTrustOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--c2pa-trust",
        help="A PEM file of trust anchors for C2PA manifests (repeatable). A manifest "
        "whose signer chains to none is 'unverifiable'. With --c2pa-cert and no "
        "--c2pa-trust, the root of the operator's own chain.",
    ),
]


def manifest_signer(cert: Path | None, key: Path | None) -> ManifestSigner | None:
    """The signer of ``--c2pa-cert``/``--c2pa-key``, or None; exit 2 with a clear error."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise fail("--c2pa-cert and --c2pa-key go together")
    try:
        return ManifestSigner.from_files(cert, key)
    except SamarkError as exc:
        raise fail(str(exc)) from None


def manifest_verifier(
    trust: list[Path] | None, signer: ManifestSigner | None = None
) -> ManifestVerifier | None:
    """The verifier of ``--c2pa-trust`` (or of the signer's own root); None where neither
    is given (a manifest is then read but no signer is trusted)."""
    if not trust and signer is None:
        return None
    try:
        if trust:
            return ManifestVerifier.from_files(list(trust))
        assert signer is not None
        return ManifestVerifier(signer.root_anchor())
    except SamarkError as exc:
        raise fail(str(exc)) from None
