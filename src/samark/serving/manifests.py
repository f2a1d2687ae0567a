"""C2PA manifests on what the server sends, and on what it is asked to check.

With a signer in :class:`~samark.serving.settings.ServeSettings`, each marked completion
ends with a signed C2PA manifest over exactly the text sent (a whole response's content;
a stream's chunks joined, its manifest in the last chunk). ``/v1/detect`` reports each
text's manifest state (``manifest``) and scores the text without it.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from samark.provenance.c2pa_manifest import (
    ManifestSigner,
    ManifestVerifier,
    read_manifest,
    strip_manifest,
)


def _content(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Where a completion's (or chunk's) first choice keeps its text, and that text."""
    choice = body["choices"][0]
    if "message" in choice:
        return choice["message"], "content"
    if "delta" in choice:
        return choice["delta"], "content"
    return choice, "text"


def seal(
    body: dict[str, Any], signer: ManifestSigner, model: str, mark: dict[str, Any]
) -> dict[str, Any]:
    """A whole completion whose text carries a signed manifest over that text."""
    holder, name = _content(body)
    text = holder.get(name) or ""
    if text:  # an empty completion has nothing to vouch for
        holder[name] = signer.sign(text, model=model, key_id=mark.get("key_id"))
    return body


class StreamSeal:
    """A stream's manifest: the text of every chunk is kept as it is sent, and the last
    chunk carries the manifest over all of it (the wrapper alone)."""

    def __init__(self, signer: ManifestSigner, model: str, mark: dict[str, Any]) -> None:
        self.signer, self.model, self.mark = signer, model, mark
        self.sent: list[str] = []

    def chunk(self, body: dict[str, Any]) -> dict[str, Any]:
        holder, name = _content(body)
        self.sent.append(holder.get(name) or "")
        return body

    def last(self, body: dict[str, Any]) -> dict[str, Any]:
        text = "".join(self.sent)
        if not unicodedata.normalize("NFC", text):
            return body
        signed = self.signer.sign(text, model=self.model, key_id=self.mark.get("key_id"))
        holder, name = _content(body)
        # what was sent, as signed (NFC), is what the manifest covers: the rest is the wrapper
        holder[name] = signed[len(unicodedata.normalize("NFC", text)) :]
        return body


def checked(
    texts: list[str], verifier: ManifestVerifier | None, always: bool
) -> tuple[list[dict[str, Any] | None], list[str]]:
    """Each text's manifest (its JSON form), and the texts without it, to be scored.

    A server that neither signs nor trusts anyone (``always`` False) reports a manifest
    only where a text carries one: its answers keep their fields otherwise, and a missing
    ``manifest`` means ``"none"``."""
    found = [read_manifest(text, verifier) for text in texts]
    return (
        [c.to_dict() if always or c.state != "none" else None for c in found],
        [strip_manifest(text) for text in texts],
    )
