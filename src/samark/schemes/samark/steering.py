"""Semantic steering: a small logit bias that leans SAMark's candidates toward the step's
flag region, so that fewer candidates reach the same margin (issue 24; the paper's future
work, "guide the model toward valid candidates in a single pass").

Each whole-word token of the generator's vocabulary is embedded alone by the key's sentence
embedder, once per (embedder, generator) pair and cached. For one generation with pivots
``P`` (c, d) and flags ``r`` (c,), a word's lean is its standardised cosine to each pivot,
signed by the flag and averaged: ``s_v = sum_j r_j z_vj / sqrt(c)`` with ``z_vj`` the
cosine of word v to pivot j, standardised over the embedded words (mean 0, sd 1). The bias
is ``strength * s_v`` on those words and 0 on every other token (sub-word pieces,
punctuation, digits). The engine adds it after the nucleus is cut, so it reweights the
model's own nucleus and never brings in a token the model would not sample.

What it does to detection: nothing to its exactness. A SAMark p-value is exact over keys
for a text that does not depend on the key; steering changes only marked text. It leans
whole texts along the pivots, which is the mark's point, but it is also a key-dependent
unigram shift of word frequencies, which an observer of many outputs could learn more
easily than the sentence-level selection alone (docs/parameters.md, "Budget: pruning,
steering and stopping").
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from samark.embed import Embedder
from samark.models import cache_dir
from samark.sampling.base import LogitsBias

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: whole-word tokens embedded by default (the first ones in id order: BPE vocabularies list
#: frequent merges first)
DEFAULT_WORDS = 8000


def word_tokens(
    tokenizer: PreTrainedTokenizerBase, limit: int = DEFAULT_WORDS
) -> tuple[np.ndarray, list[str]]:
    """The first ``limit`` token ids that decode to a space and a whole alphabetic word of
    at least 3 letters, and those words."""
    ids: list[int] = []
    words: list[str] = []
    for i in range(len(tokenizer)):
        piece = str(tokenizer.decode([i]))
        word = piece.strip()
        if piece[:1] == " " and len(word) >= 3 and word.isalpha():
            ids.append(i)
            words.append(word)
            if len(ids) == limit:
                break
    return np.array(ids, dtype=np.int64), words


def word_embeddings(
    embedder: Embedder,
    tokenizer: PreTrainedTokenizerBase,
    generator: str,
    limit: int = DEFAULT_WORDS,
) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, their unit embeddings), computed once per embedder, generator and
    ``limit`` and cached in samark's cache folder."""
    ids, words = word_tokens(tokenizer, limit)
    tag = hashlib.sha256(f"{embedder.name}|{generator}|{limit}|{'|'.join(words)}".encode())
    path = Path(cache_dir()) / "steering" / f"{tag.hexdigest()[:20]}.npz"
    if path.exists():
        with np.load(path) as data:
            return data["ids"], data["embeddings"].astype(np.float32)
    # stored and returned at half precision alike, so that a seeded generation is the same
    # whether the table was just computed or read back
    emb = embedder.encode(words).astype(np.float16)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, ids=ids, embeddings=emb)
    tmp.replace(path)
    return ids, emb.astype(np.float32)


class SemanticSteer:
    """The steering bias of one generation (one pivot set and flag pattern): the same
    additive bias on every row and step (context 0), shape (rows, width)."""

    context = 0

    def __init__(
        self,
        ids: np.ndarray,
        embeddings: np.ndarray,
        pivots: np.ndarray,
        flags: np.ndarray,
        strength: float,
    ) -> None:
        if strength < 0:
            raise ValueError("steering strength must be >= 0")
        cos = embeddings @ pivots.T  # (words, c)
        z = (cos - cos.mean(axis=0)) / np.maximum(cos.std(axis=0), 1e-12)
        self.ids = ids
        self.values = (strength * (z @ flags) / math.sqrt(len(flags))).astype(np.float32)
        self._row: np.ndarray | None = None

    def row(self, width: int) -> np.ndarray:
        if self._row is None or self._row.shape[0] != width:
            row = np.zeros(width, dtype=np.float32)
            inside = self.ids < width
            row[self.ids[inside]] = self.values[inside]
            self._row = row
        return self._row

    def bias(self, contexts: Sequence[Sequence[int]], width: int) -> np.ndarray:
        return np.tile(self.row(width), (len(contexts), 1))


class SummedBias:
    """Several logit biases applied together (a token watermark and the steering)."""

    def __init__(self, *layers: LogitsBias) -> None:
        self.layers = layers
        self.context = max(int(layer.context) for layer in layers)

    def bias(self, contexts: Sequence[Sequence[int]], width: int) -> np.ndarray:
        out = np.zeros((len(contexts), width), dtype=np.float32)
        for layer in self.layers:
            h = int(layer.context)
            own = [c[-h:] if h else [] for c in contexts]
            out += layer.bias(own, width)
        return out
