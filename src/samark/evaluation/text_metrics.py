"""Per-text quality metrics exactly as the paper's appendix defines them (a registry).

SD, Distinct-2 and 4-gram Repeat use sentences from the project's segmenter (trimmed,
lowercased) and word n-grams after lowercasing and whitespace tokenisation. A zero
denominator gives 0, the paper's rule.
"""

from __future__ import annotations

from collections.abc import Callable

from samark.registry import Registry
from samark.segment import split_sentences

TextMetric = Callable[[str], float]
TEXT_METRICS: Registry[TextMetric] = Registry("metric")


def _word_ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    tokens = text.lower().split()
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


@TEXT_METRICS.register("sd")
def sentence_duplicates(text: str) -> float:
    """SD: 100 x (sentences - unique sentences) / sentences."""
    sents = [s.strip().lower() for s in split_sentences(text)]
    return 100.0 * (len(sents) - len(set(sents))) / len(sents) if sents else 0.0


@TEXT_METRICS.register("distinct2")
def distinct_2(text: str) -> float:
    """D-2: unique bigrams / bigrams."""
    grams = _word_ngrams(text, 2)
    return len(set(grams)) / len(grams) if grams else 0.0


@TEXT_METRICS.register("rep4")
def four_gram_repeat(text: str) -> float:
    """4g: 100 x (4-grams - unique 4-grams) / 4-grams."""
    grams = _word_ngrams(text, 4)
    return 100.0 * (len(grams) - len(set(grams))) / len(grams) if grams else 0.0
