"""How a sentence-level scheme draws its candidates and how long it writes: the sampling
settings every sentence-level config shares (SAMark's generation part, the baselines'
:class:`~samark.schemes.sentence_loop.SentenceSamplingConfig`), declared once."""

from __future__ import annotations

from dataclasses import dataclass

from samark.sampling.base import SamplingParams
from samark.schemes.base import check


@dataclass(frozen=True)
class SentenceSampling:
    """The candidate sampling (temperature, top-p, a sentence's token limit) and the
    default length in sentences; the paper's values by default."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_sentence_tokens: int = 64
    max_new_sentences: int = 12

    def __post_init__(self) -> None:
        check(self.max_new_sentences >= 1, "max_new_sentences must be >= 1")
        _ = self.sampling  # validates temperature, top_p, max_sentence_tokens

    @property
    def sampling(self) -> SamplingParams:
        """What the candidate engine reads of them."""
        return SamplingParams(self.temperature, self.top_p, self.max_sentence_tokens)
