"""Word-level helpers shared by the diversity filters, the quality metrics and the words
the detectors and commands print."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; inner apostrophes kept)."""
    return _WORD.findall(text.lower())


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    """All contiguous ``n``-grams of ``tokens``, in order (with repeats)."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def counted(n: int, unit: str) -> str:
    """``n`` with ``unit``, plural unless one: "1 sentence", "4 sentences"."""
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"
