"""What detection reads of a text, computed once: its sentences and their unit embeddings.

:func:`text_features` splits each text into sentences once and embeds the distinct
sentences of all the texts in one embedder call (or takes vectors already at hand);
every key of a ring, every layer of a scheme and the evidence trail's prefixes score
these :class:`TextFeatures`, never the text again. The embeddings reach a detector as
this argument, not through a cache. A scheme that scores tokens reads ``text`` and
tokenises it once per text itself (a ring's keys share one tokenisation).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np

from samark.embed import Embedder
from samark.segment import split_sentences


@dataclass(frozen=True, eq=False)
class TextFeatures:
    """One text prepared for detection: the text, its sentences and, where an embedder
    prepared it, their unit embeddings, shape (sentences, dim)."""

    text: str
    sentences: tuple[str, ...]
    embeddings: np.ndarray | None = None
    #: the embedder that made ``embeddings`` (None: not embedded)
    embedder: Embedder | None = None

    def embeddings_by(self, embedder: Embedder) -> np.ndarray:
        """The sentences' embeddings by ``embedder``: those prepared, where it prepared
        them; otherwise embedded now (a scheme with an embedder of its own)."""
        if self.embeddings is not None and self.embedder is embedder:
            return self.embeddings
        return embedder.encode(list(self.sentences))

    def prefix(self, text: str, k: int) -> TextFeatures:
        """The features of ``text``, this text's first ``k`` sentences: its sentences and
        embeddings cut, nothing split or embedded again."""
        emb = None if self.embeddings is None else self.embeddings[:k]
        return TextFeatures(text, self.sentences[:k], emb, self.embedder)


def embed_distinct(
    embedder: Embedder,
    sentences: Sequence[Sequence[str]],
    known: MutableMapping[str, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Each text's sentence embeddings, shape (n, dim): the distinct sentences not in
    ``known`` embedded in one call (and added to ``known``, where given)."""
    have: MutableMapping[str, np.ndarray] = {} if known is None else known
    new = list(dict.fromkeys(s for text in sentences for s in text if s not in have))
    if new:
        have.update(zip(new, embedder.encode(new), strict=True))
    return [
        np.stack([have[s] for s in text]) if text else np.zeros((0, embedder.dim))
        for text in sentences
    ]


def text_features(
    texts: Sequence[str],
    embedder: Embedder | None,
    *,
    sentences: Sequence[Sequence[str]] | None = None,
    known: MutableMapping[str, np.ndarray] | None = None,
) -> list[TextFeatures]:
    """Each text's features: split once (unless ``sentences`` gives each text's split),
    embedded in one call by ``embedder`` (None: not embedded), reusing ``known``."""
    split = [split_sentences(t) for t in texts] if sentences is None else list(sentences)
    if len(split) != len(texts):
        raise ValueError("one list of sentences per text")
    if embedder is None:
        return [TextFeatures(t, tuple(s)) for t, s in zip(texts, split, strict=True)]
    vectors = embed_distinct(embedder, split, known)
    return [
        TextFeatures(t, tuple(s), v, embedder)
        for t, s, v in zip(texts, split, vectors, strict=True)
    ]


def known_of(features: Sequence[TextFeatures]) -> Mapping[str, np.ndarray]:
    """The sentence vectors ``features`` already hold (to reuse for other texts)."""
    out: dict[str, np.ndarray] = {}
    for f in features:
        if f.embeddings is not None:
            out.update(zip(f.sentences, f.embeddings, strict=True))
    return out
