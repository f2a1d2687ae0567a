"""The typed result of watermark detection, shared by every scheme."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NotRequired, TypeAlias, TypedDict, overload

#: a value of :attr:`Detection.details`: a number, a name, or a tuple of them (nested)
Detail: TypeAlias = float | int | str | bool | tuple["Detail", ...] | None
#: a :data:`Detail` as JSON (:meth:`Detection.to_dict`): tuples as lists, non-finite as null
JSONDetail: TypeAlias = float | int | str | bool | list["JSONDetail"] | None


class DetectionFields(TypedDict):
    """:meth:`Detection.to_dict`: its fields as JSON, a non-finite float as null."""

    scheme: str
    p_value: float | None
    is_watermarked: bool
    alpha: float | None
    z: float | None
    statistic: str
    score: float | None
    n_units: int
    unit: str
    #: the signal diagnostics; with ``details``, every entry of ``Detection.details``
    details: dict[str, JSONDetail]
    #: with ``details`` only
    sentences: NotRequired[list[str]]
    sentence_p_values: NotRequired[list[float | None]]


@dataclass(frozen=True)
class Detection:
    """What a detector found in one text.

    ``p_value`` is the calibrated answer: under H0 (the text does not depend on the key) it
    is uniform, so ``p_value < alpha`` has false-positive rate ``alpha``. ``z`` is the paper's
    score; compared with a fixed threshold it is *not* calibrated, so it decides nothing on
    its own. ``score`` is the value of the test statistic named by ``statistic`` (by default
    z itself) whose rank among the null pivot sets gives ``p_value``. ``n_units`` counts
    what the detector scored, in ``unit`` ("sentence" for sentence-level schemes, "token"
    for token-level ones): the amount of evidence behind the answer.

    What only one scheme has lives in ``details``, named in that scheme's own terms. Its
    float entries are signal diagnostics, kept by the evaluation harness and always in
    :meth:`to_dict` (SAMark: ``flag_side_share``, ``mean_signed_cosine``; KGW and Unigram:
    ``green_fraction``; SynthID: ``g_value_mean``; ...). Its other entries are the scheme's
    structures, output only when asked (SAMark: ``n_null``, the inferred ``flags``, the
    per-sentence and per-channel ``evidence``).
    """

    scheme: str
    p_value: float
    alpha: float
    z: float
    statistic: str
    score: float
    n_units: int
    unit: str = "sentence"
    #: the sentences scored (sentence-level schemes)
    sentences: tuple[str, ...] = field(default=(), repr=False)
    #: localisation: one calibrated p-value per sentence (small = this sentence carries the
    #: mark); exact for each sentence of a text that does not depend on the key
    sentence_p_values: tuple[float, ...] = field(default=(), repr=False)
    #: the scheme's own quantities: float signal diagnostics and its other structures
    details: dict[str, Detail] = field(default_factory=dict, repr=False)

    @property
    def diagnostics(self) -> dict[str, float]:
        """The float entries of ``details``: the scheme's signal diagnostics."""
        return {k: v for k, v in self.details.items() if isinstance(v, float)}

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

    def to_dict(self, *, details: bool = False) -> DetectionFields:
        """JSON-ready fields with the signal diagnostics; with ``details``, the sentences,
        their p-values and every entry of ``details`` too (each float as :func:`json_safe`
        writes it)."""
        shown: dict[str, Detail] = dict(self.details) if details else dict(self.diagnostics)
        out: DetectionFields = {
            "scheme": self.scheme,
            "p_value": _finite(self.p_value),
            "is_watermarked": self.is_watermarked,
            "alpha": _finite(self.alpha),
            "z": _finite(self.z),
            "statistic": self.statistic,
            "score": _finite(self.score),
            "n_units": self.n_units,
            "unit": self.unit,
            "details": {k: _json_detail(v) for k, v in shown.items()},
        }
        if details:
            out["sentences"] = list(self.sentences)
            out["sentence_p_values"] = [_finite(p) for p in self.sentence_p_values]
        return out


def _finite(value: float) -> float | None:
    """A float as JSON holds it: a non-finite one as null (:func:`json_safe`)."""
    return value if math.isfinite(value) else None


def _json_detail(value: Detail) -> JSONDetail:
    """One entry of ``details`` as :func:`json_safe` writes it."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, tuple | list):
        return [_json_detail(v) for v in value]
    return value


@overload
def json_safe(value: dict[str, object]) -> dict[str, object]: ...
@overload
def json_safe(value: object) -> object: ...
def json_safe(value: object) -> object:
    """``value`` with every non-finite float (JSON has none) as null, through dicts,
    lists and tuples (as lists). The one JSON encoding of numbers in samark's outputs:
    detections (CLI, server, Ray), rings and the evaluation's records."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
