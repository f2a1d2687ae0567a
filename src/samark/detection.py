"""The typed result of watermark detection, shared by every scheme."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Detection:
    """What a detector found in one text.

    ``p_value`` is the calibrated answer: under H0 (the text does not depend on the key) it
    is uniform, so ``p_value < alpha`` has false-positive rate ``alpha``. ``z`` is the paper's
    score; compared with a fixed threshold it is *not* calibrated, so it decides nothing on
    its own. ``score`` is the value of the test statistic named by ``statistic`` (by default
    z itself) whose rank among the null pivot sets gives ``p_value``. ``n_units`` counts
    what the detector scored, in ``unit`` ("sentence" for SAMark, "token" for token-level
    schemes): the amount of evidence behind the answer.
    """

    scheme: str
    p_value: float
    alpha: float
    z: float
    statistic: str
    score: float
    n_units: int
    unit: str = "sentence"
    n_null: int = 0
    flags: tuple[int, ...] = ()
    sentences: tuple[str, ...] = field(default=(), repr=False)
    sentence_evidence: tuple[float, ...] = field(default=(), repr=False)
    channel_evidence: tuple[float, ...] = field(default=(), repr=False)
    evidence: tuple[tuple[float, ...], ...] = field(default=(), repr=False)
    #: localisation: one calibrated p-value per sentence (small = this sentence carries the
    #: mark); exact for each sentence of a text that does not depend on the key
    sentence_p_values: tuple[float, ...] = field(default=(), repr=False)
    #: signal diagnostics, named in the scheme's own units (SAMark: ``flag_side_share``,
    #: ``mean_signed_cosine``; KGW: ``green_fraction``; SynthID: ``g_value_mean``)
    details: dict[str, float] = field(default_factory=dict)

    @property
    def is_watermarked(self) -> bool:
        return self.p_value < self.alpha

    def decide(self, alpha: float) -> bool:
        """The decision at another significance level."""
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        return self.p_value < alpha

    def marked_sentences(self, alpha: float = 0.05) -> tuple[int, ...]:
        """Localisation: the indices of the sentences whose own p-value is below ``alpha``
        (empty for schemes without per-sentence p-values)."""
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        return tuple(i for i, p in enumerate(self.sentence_p_values) if p < alpha)

    def to_dict(self, *, details: bool = False) -> dict[str, Any]:
        """JSON-ready fields; with ``details``, per-sentence and per-channel evidence too."""
        out = asdict(self)
        out["is_watermarked"] = self.is_watermarked
        out["z"] = _finite(self.z)
        out["score"] = _finite(self.score)
        out["flags"] = list(self.flags)
        if details:
            out["sentences"] = list(self.sentences)
            out["sentence_evidence"] = list(self.sentence_evidence)
            out["channel_evidence"] = list(self.channel_evidence)
            out["evidence"] = [list(row) for row in self.evidence]
            out["sentence_p_values"] = list(self.sentence_p_values)
        else:
            for name in _PER_SENTENCE:
                out.pop(name)
        return out


_PER_SENTENCE = (
    "sentences",
    "sentence_evidence",
    "channel_evidence",
    "evidence",
    "sentence_p_values",
)


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")
