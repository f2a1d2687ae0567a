"""A text's splitting into prompts and continuations, and windows of human text (the
evaluation's prompts and negatives)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from samark.datasets.registry import Document
from samark.segment import split_sentences


@dataclass(frozen=True)
class Example:
    """A generation prompt and its human counterpart from the same document."""

    id: str
    prompt: str  # the document's leading sentences
    human: str  # the document's own continuation, as many sentences as are generated


def prompt_examples(
    docs: list[Document], *, prompt_sentences: int, sentences: int, count: int
) -> list[Example]:
    """The first ``count`` documents long enough for a prompt and a continuation."""
    out = []
    for doc in docs:
        sents = split_sentences(doc.text)
        if len(sents) < prompt_sentences + sentences:
            continue
        out.append(
            Example(
                doc.id,
                " ".join(sents[:prompt_sentences]),
                " ".join(sents[prompt_sentences : prompt_sentences + sentences]),
            )
        )
        if len(out) == count:
            break
    return out


def human_windows(
    docs: list[Document], *, sentences: int, count: int, shift: int = 0
) -> list[Document]:
    """Up to ``count`` human texts of ``sentences`` sentences: non-overlapping windows taken
    round-robin across documents (the negatives of every FPR). ``shift`` starts every window
    that many sentences later (ids ``doc#k+shift``): with half a window, each such window
    shares half its sentences with two unshifted ones."""
    per_doc = [split_sentences(d.text) for d in docs]
    out: list[Document] = []
    suffix = f"+{shift}" if shift else ""
    k = 0
    while len(out) < count:
        added = False
        for doc, sents in zip(docs, per_doc, strict=True):
            start = k * sentences + shift
            window = sents[start : start + sentences]
            if len(window) == sentences:
                out.append(Document(f"{doc.id}#{k}{suffix}", " ".join(window)))
                added = True
                if len(out) == count:
                    break
        if not added:
            break
        k += 1
    return out


def leading_sentences(
    texts: Iterable[str], *, limit: int, stop: int, start: int = 0, min_sentences: int = 3
) -> list[list[str]]:
    """Sentences ``start:stop`` of each text, for the first ``limit`` texts that have at
    least ``min_sentences`` there: the human texts of the calibration tests, benchmarks
    and ``samark check-key`` (one text's evidence from its opening sentences)."""
    out: list[list[str]] = []
    for text in texts:
        if len(out) == limit:
            break
        sents = split_sentences(text)[start:stop]
        if len(sents) >= min_sentences:
            out.append(sents)
    return out
