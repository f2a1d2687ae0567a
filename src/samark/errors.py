"""Exceptions raised by samark. Messages never contain key material."""

from __future__ import annotations


class SamarkError(Exception):
    """Base class for samark errors."""


class KeyFileError(SamarkError):
    """A key file is missing, unreadable or malformed."""


class EmbedderMismatchError(SamarkError):
    """A key is used with an embedder other than the one it was made for."""


class EmptyTextError(SamarkError, ValueError):
    """A text has no sentence to score."""


class ModelNotAvailableError(SamarkError):
    """A named model is unknown, or its package is not installed."""
