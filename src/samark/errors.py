"""Exceptions raised by samark. Messages never contain key material."""

from __future__ import annotations


class SamarkError(Exception):
    """Base class for samark errors."""


class KeyFileError(SamarkError):
    """A key file is missing, unreadable or malformed."""


class EmbedderMismatchError(SamarkError):
    """A key is used with an embedder other than the one it was made for."""


class EmptyTextError(SamarkError, ValueError):
    """A text has nothing for the detector to score: no sentence (sentence-level schemes)
    or too few tokens (token-level ones). Every detector raises it; the evaluation harness
    scores such a text as p = 1 (no evidence is no detection)."""


class ModelNotAvailableError(SamarkError):
    """A named model is unknown, or its package is not installed."""
