"""``samark detect`` on one text: the server's intake (:mod:`samark.intake`), and with
``--long`` a text over its limits checked anyway, its sentences embedded a chunk at a time
under a progress bar that counts sentences (not the embedder's batches)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from samark.cli.common import TextInput, fail, progress
from samark.intake import TextRefused, check_binary, check_chars, check_sentences
from samark.segment import split_sentences

#: sentences embedded at a time under ``--long`` (one step of its progress bar)
LONG_CHUNK = 256


def check_intake(given: TextInput, long: bool) -> list[str]:
    """The text's sentences; exit 2 where it is binary, or over the server's limits
    without ``long`` (saying so, and how to check it anyway)."""
    try:
        check_binary(given.text, given.origin)
        sentences = split_sentences(given.text)
        if not long:
            check_chars(given.text)
            check_sentences(len(sentences))
    except TextRefused as exc:
        hint = (
            " (the server's limit, so that one check stays quick); pass --long to check it "
            "anyway, with a progress bar"
            if exc.code == "text_too_long"
            else ""
        )
        prefix = "" if str(exc).startswith(given.origin) else f"{given.origin}: "
        raise fail(f"{prefix}{exc}{hint}") from None
    return sentences


@contextlib.contextmanager
def embedded_with_progress(embedder: Any, sentences: list[str]) -> Iterator[None]:
    """Within the block, ``sentences`` are already embedded (``embedder.remembering``):
    embedded here first, :data:`LONG_CHUNK` at a time, the bar counting sentences. An
    embedder-free scheme (``None``) has nothing to embed."""
    if embedder is None:
        yield
        return
    unique = list(dict.fromkeys(sentences))
    known: dict[str, np.ndarray] = {}
    with progress() as bar:
        task = bar.add_task("embedding the text", total=len(unique), unit="sentences")
        for start in range(0, len(unique), LONG_CHUNK):
            chunk = unique[start : start + LONG_CHUNK]
            known.update(zip(chunk, embedder.encode(chunk), strict=True))
            bar.update(task, completed=start + len(chunk))
    with embedder.remembering(known):
        yield
