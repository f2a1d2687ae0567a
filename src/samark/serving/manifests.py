"""C2PA manifests on what the server sends, and on what it is asked to check.

With a signer in :class:`~samark.serving.settings.ServeSettings`, each marked completion
ends with a signed C2PA manifest over exactly the text sent (a whole response's content;
a stream's chunks joined, its manifest in the last chunk). ``/v1/detect`` reports each
text's manifest state (``manifest``) and scores the text without it.
"""

from __future__ import annotations

import unicodedata

from samark.provenance.c2pa_manifest import (
    ManifestFields,
    ManifestSigner,
    ManifestVerifier,
    read_manifest,
    strip_manifest,
)
from samark.serving.schema import Body, Mark


def _content(body: Body) -> tuple[dict[str, object], str]:
    """Where a completion's (or chunk's) first choice keeps its text, and that text."""
    choices = body["choices"]
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise TypeError("a completion's choices are a list of objects")
    choice: dict[str, object] = choices[0]
    for part in ("message", "delta"):
        if part in choice:
            holder = choice[part]
            if not isinstance(holder, dict):
                raise TypeError(f"a choice's {part} is an object")
            return holder, "content"
    return choice, "text"


def seal(body: Body, signer: ManifestSigner, model: str, mark: Mark) -> Body:
    """A whole completion whose text carries a signed manifest over that text."""
    holder, name = _content(body)
    text = holder.get(name)
    if isinstance(text, str) and text:  # an empty completion has nothing to vouch for
        holder[name] = signer.sign(text, model=model, key_id=mark.get("key_id"))
    return body


class StreamSeal:
    """A stream's manifest: the text of every chunk is kept as it is sent, and the last
    chunk carries the manifest over all of it (the wrapper alone)."""

    def __init__(self, signer: ManifestSigner, model: str, mark: Mark) -> None:
        self.signer, self.model, self.mark = signer, model, mark
        self.sent: list[str] = []

    def chunk(self, body: Body) -> Body:
        holder, name = _content(body)
        text = holder.get(name)
        self.sent.append(text if isinstance(text, str) else "")
        return body

    def last(self, body: Body) -> Body:
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
) -> tuple[list[ManifestFields | None], list[str]]:
    """Each text's manifest (its JSON form), and the texts without it, to be scored.

    A server that neither signs nor trusts anyone (``always`` False) reports a manifest
    only where a text carries one: its answers keep their fields otherwise, and a missing
    ``manifest`` means ``"none"``."""
    found = [read_manifest(text, verifier) for text in texts]
    return (
        [c.to_dict() if always or c.state != "none" else None for c in found],
        [strip_manifest(text) for text in texts],
    )
