"""How much of the original an attack kept: the fidelity fields of every attack record.

An attack result means something only next to how faithful the attack was: a "paraphrase"
that drops half the sentences and invents facts removes any watermark, and says nothing
about robustness to paraphrase. Every attacked text therefore gets:

- ``sentence_ratio``: attacked sentences / original sentences (1.0: none merged or lost);
- ``aligned_similarity``: for each original sentence, the best cosine among the attacked
  text's sentences, averaged (does every original sentence still have a counterpart?);
- ``aligned_precision``: the same the other way round (is every attacked sentence grounded
  in the original, or was it invented?);
- ``ngram4_copy``: the share of the attacked text's word 4-grams found verbatim in the
  original (1.0: copied; low: reworded);
- ``word_overlap``: the share of the original's words (with multiplicity) still present;
- ``similarity``: the cosine between the whole texts.

Similarities are measured under an embedder other than the watermark's (see
:func:`fidelity_embedder`), so a scheme cannot grade its own attack. An attack whose median
``aligned_similarity`` is below :data:`MEANING_PRESERVING` is reported as not
meaning-preserving.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from samark.segment import split_sentences
from samark.text import ngrams, words

#: median aligned similarity below which an attack is "not meaning-preserving"
MEANING_PRESERVING = 0.80

FIELDS = (
    "sentence_ratio",
    "aligned_similarity",
    "aligned_precision",
    "ngram4_copy",
    "word_overlap",
    "similarity",
)


class SentenceEncoder(Protocol):
    name: str

    def encode(self, sentences: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Fidelity:
    """What an attacked text kept of its original (see the module docstring)."""

    sentences_before: int
    sentences_after: int
    sentence_ratio: float
    aligned_similarity: float
    aligned_precision: float
    ngram4_copy: float
    word_overlap: float
    similarity: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def fidelity_embedder(watermark_embedder: str) -> str:
    """The embedder that grades attacks: never the watermark's own."""
    return "all-minilm-l6-v2" if "mpnet" in watermark_embedder else "all-mpnet-base-v2"


def word_overlap(original: str, attacked: str) -> float:
    """The share of the original's words (lowercased, with multiplicity) that the attacked
    text still contains."""
    a, b = Counter(words(original)), Counter(words(attacked))
    total = sum(a.values())
    return sum((a & b).values()) / total if total else 1.0


def ngram4_copy(original: str, attacked: str) -> float:
    """The share of the attacked text's word 4-grams found verbatim in the original."""
    grams = ngrams(words(attacked), 4)
    if not grams:
        return 1.0 if not ngrams(words(original), 4) else 0.0
    source = set(ngrams(words(original), 4))
    return sum(g in source for g in grams) / len(grams)


def measure(encoder: SentenceEncoder, originals: list[str], attacked: list[str]) -> list[Fidelity]:
    """Fidelity of each ``attacked[i]`` against ``originals[i]``; one batched encode."""
    if len(originals) != len(attacked):
        raise ValueError("originals and attacked must have the same length")
    split_o = [split_sentences(t) for t in originals]
    split_a = [split_sentences(t) for t in attacked]
    pieces: list[str] = []
    for so, sa, o, a in zip(split_o, split_a, originals, attacked, strict=True):
        pieces += [o or " ", a or " ", *so, *sa]
    emb = encoder.encode(pieces)
    out, at = [], 0
    for so, sa, o, a in zip(split_o, split_a, originals, attacked, strict=True):
        whole = float(emb[at] @ emb[at + 1]) if o.strip() and a.strip() else 0.0
        at += 2
        eo, ea = emb[at : at + len(so)], emb[at + len(so) : at + len(so) + len(sa)]
        at += len(so) + len(sa)
        if len(so) and len(sa):
            sims = eo @ ea.T
            recall, precision = float(sims.max(axis=1).mean()), float(sims.max(axis=0).mean())
        else:
            recall = precision = 1.0 if len(so) == len(sa) else 0.0
        out.append(
            Fidelity(
                sentences_before=len(so),
                sentences_after=len(sa),
                sentence_ratio=len(sa) / len(so) if so else float(len(sa) == 0),
                aligned_similarity=recall,
                aligned_precision=precision,
                ngram4_copy=ngram4_copy(o, a),
                word_overlap=word_overlap(o, a),
                similarity=whole,
            )
        )
    return out


def is_meaning_preserving(aligned_similarities: list[float] | np.ndarray) -> bool:
    """The report's rule: median aligned similarity at least :data:`MEANING_PRESERVING`."""
    values = np.asarray(aligned_similarities, dtype=float)
    values = values[np.isfinite(values)]
    return bool(values.size) and float(np.median(values)) >= MEANING_PRESERVING


__all__ = [
    "FIELDS",
    "MEANING_PRESERVING",
    "Fidelity",
    "fidelity_embedder",
    "is_meaning_preserving",
    "measure",
    "ngram4_copy",
    "word_overlap",
]
