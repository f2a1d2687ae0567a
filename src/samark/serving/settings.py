"""What an operator sets for ``samark serve``: who may call it, and its limits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from samark.errors import SamarkError
from samark.intake import MAX_TEXT_CHARS, MAX_TEXT_SENTENCES
from samark.provenance.c2pa_manifest import ManifestSigner, ManifestVerifier

#: a bearer token shorter than this is refused: it would be guessable
MIN_TOKEN_CHARS = 16

#: seconds a request may wait and run unless the operator says: enough for a default
#: completion (N = 64, up to 12 sentences, SmolLM2 on the local engine) on a busy 2-core
#: CPU, with room to spare (its measured time: docs/serving.md, the errors' paragraph)
DEFAULT_TIMEOUT_S = 1800.0

#: what /v1/detect tells a caller without an admin token: the whole result, or the decision
#: only. A p-value is a gradient: hill climbing on it made human text pass at p < 0.01 in a
#: few dozen queries (docs/results/2026-11-26-forgery/README.md, "Through a detection
#: endpoint"); the decision alone leaves random search
DETECT_OUTPUTS = ("full", "decision")
#: the fields of a decision-only answer
DECISION_FIELDS = (
    *("scheme", "is_watermarked", "alpha", "n_units", "unit", "key_label", "key_id"),
    "manifest",
)


@dataclass(frozen=True)
class ServeSettings:
    """Limits and access of one server.

    ``tokens`` may call every route; ``admin_tokens`` may also ask ``/v1/detect`` for
    localisation (which sentences carry the mark). ``auth=False`` serves without tokens
    (a loopback demo); it is never the default.
    """

    #: secrets: left out of the repr (a logged or printed config shows none)
    tokens: frozenset[str] = field(default=frozenset(), repr=False)
    admin_tokens: frozenset[str] = field(default=frozenset(), repr=False)
    auth: bool = True
    max_body_bytes: int = 1_000_000
    max_text_chars: int = MAX_TEXT_CHARS  # one text of /v1/detect (samark.intake)
    max_batch: int = 64  # texts of one /v1/detect request
    #: sentences of one /v1/detect text, and of all the texts of one request: what one
    #: request may ask of the detector (its cost grows with sentences, not texts)
    max_text_sentences: int = MAX_TEXT_SENTENCES
    max_detect_sentences: int = 1_000
    request_timeout_s: float = DEFAULT_TIMEOUT_S
    default_sentences: int = 12
    max_sentences: int = 48
    #: generations that run at once; their candidate draws share the engine's batches
    #: when it batches (``BatchingEngine``); more requests wait for a free slot
    concurrent_generations: int = 8
    model_name: str = "samark"
    #: what callers without an admin token learn from /v1/detect (``DETECT_OUTPUTS``)
    detect_output: Literal["full", "decision"] = "full"
    #: sentences a caller without an admin token may have detected per hour (None: no
    #: limit); every text counts at least one, so it bounds a forger's queries too
    detect_budget: int | None = None
    #: sign each marked completion with a C2PA manifest (docs/compliance.md); None: none
    c2pa_signer: ManifestSigner | None = field(default=None, repr=False)
    #: the trust anchors /v1/detect checks manifests against (None: no signer trusted)
    c2pa_verifier: ManifestVerifier | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.auth and not (self.tokens or self.admin_tokens):
            raise SamarkError(
                "no API token: set SAMARK_API_TOKENS or --tokens-file "
                "(or --no-auth for a loopback demo)"
            )
        for token in self.tokens | self.admin_tokens:
            if len(token) < MIN_TOKEN_CHARS or any(ch.isspace() for ch in token):
                raise SamarkError(
                    f"API tokens must be at least {MIN_TOKEN_CHARS} characters without "
                    "spaces (e.g. `python -c 'import secrets; print(secrets.token_urlsafe())'`)"
                )
        positive = {
            "max_body_bytes": self.max_body_bytes,
            "max_text_chars": self.max_text_chars,
            "max_batch": self.max_batch,
            "max_text_sentences": self.max_text_sentences,
            "max_detect_sentences": self.max_detect_sentences,
            "request_timeout_s": self.request_timeout_s,
            "default_sentences": self.default_sentences,
            "max_sentences": self.max_sentences,
            "concurrent_generations": self.concurrent_generations,
        }
        for name, value in positive.items():
            if not value > 0:
                raise SamarkError(f"{name} must be > 0, got {value}")
        if self.detect_budget is not None and self.detect_budget < 1:
            raise SamarkError(f"detect_budget must be >= 1 (or None), got {self.detect_budget}")
        if self.detect_output not in DETECT_OUTPUTS:
            raise SamarkError(
                f"detect_output is one of {DETECT_OUTPUTS}, not {self.detect_output!r}"
            )
        if self.default_sentences > self.max_sentences:
            raise SamarkError("default_sentences must not exceed max_sentences")


def load_tokens(path: Path | None, env: str) -> frozenset[str]:
    """Tokens from a file (one per line, ``#`` comments) and from the comma-separated
    environment variable ``env``."""
    found: set[str] = set()
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise SamarkError(f"cannot read token file {path}: {exc}") from None
        found.update(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    found.update(t.strip() for t in os.environ.get(env, "").split(",") if t.strip())
    return frozenset(found)
