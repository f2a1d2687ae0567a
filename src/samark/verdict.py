"""One verdict a person can act on: the mark, the record and the C2PA manifest told as one
story (issue 65), for ``/v1/detect``, the detection page and ``samark detect --record``.

A pure function of what each layer found, nothing loaded, nothing scored:

- the **mark** (:class:`MarkEvidence`): found (p below the decision level), *weak* (not
  found, but the text is too short for its absence to mean much, or its p-value is near
  the level), or not found;
- the **record** (:class:`RecordEvidence`): every sentence served verbatim, a paraphrase
  or edit of served text (some sentences served or close to served ones), not served, or
  no record checked;
- optionally the **manifest** (:class:`ManifestState`): intact, altered after signing,
  unverifiable (a signer not trusted), none, or ``None`` where it was not read.

Every pair of mark and record has its own headline, conclusion and machine code
(``"<mark>.<record>"``, e.g. ``"weak.served"``); the manifest adds its reason and, where
it changes the story, the conclusion's first words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict

#: a text of fewer sentences than this is *short*: a marked text this short is often
#: missed (3 back-translated sentences were found 62.5% of the time at N = 64, issue 65),
#: so not finding the mark in it is weak evidence that it is unmarked
SHORT_TEXT_SENTENCES = 5
#: the same for a token-level scheme's texts (KGW-style tests need tens of tokens)
SHORT_TEXT_TOKENS = 50
#: a p-value below this (but not below the decision level) is *some* evidence, not none
WEAK_P = 0.05


class MarkState(StrEnum):
    MARKED = "marked"
    WEAK = "weak"
    NOT_MARKED = "not_marked"


class RecordState(StrEnum):
    SERVED = "served"
    PARAPHRASE = "paraphrase"
    NOT_SERVED = "not_served"
    NO_RECORD = "no_record"


class ManifestState(StrEnum):
    INTACT = "intact"
    ALTERED = "altered"
    UNVERIFIABLE = "unverifiable"
    NONE = "none"


def _p(p: float) -> str:
    """A p-value as the page writes it: 3 significant digits."""
    return f"{p:.3g}"


def _sentences(n: int, unit: str = "sentence") -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class MarkEvidence:
    """What the mark's detector found: the text's p-value and decision level, its length
    (``n_sentences`` units: sentences, or a token scheme's tokens), and for a layered mark
    each layer's p-value; ``semantic_floor`` is the smallest semantic p-value its null
    draws can give (1/(draws + 1))."""

    p_value: float
    alpha: float
    n_sentences: int
    p_semantic: float | None = None
    p_token: float | None = None
    semantic_floor: float | None = None
    unit: str = "sentence"

    def __post_init__(self) -> None:
        if not (0.0 <= self.p_value <= 1.0) or math.isnan(self.p_value):
            raise ValueError(f"p_value must be in [0, 1], got {self.p_value}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.n_sentences < 0:
            raise ValueError(f"n_sentences must be >= 0, got {self.n_sentences}")

    @property
    def short_below(self) -> int:
        """The length under which a text of this unit is short."""
        return SHORT_TEXT_SENTENCES if self.unit == "sentence" else SHORT_TEXT_TOKENS

    @property
    def short(self) -> bool:
        return self.n_sentences < self.short_below

    @property
    def length(self) -> str:
        return _sentences(self.n_sentences, self.unit)

    @property
    def state(self) -> MarkState:
        if self.p_value < self.alpha:
            return MarkState.MARKED
        if self.short or self.p_value < WEAK_P:
            return MarkState.WEAK
        return MarkState.NOT_MARKED

    @property
    def at_floor(self) -> bool:
        """Whether the semantic p-value (a layered mark's semantic layer's, else the
        text's own) is the smallest its null draws can give."""
        floor = self.semantic_floor
        p = self.p_value if self.p_semantic is None else self.p_semantic
        return floor is not None and p <= floor * (1 + 1e-9)

    @classmethod
    def of_answer(cls, answer: Mapping[str, object]) -> MarkEvidence:
        """From a detection's JSON (``Detection.to_dict`` or ``/v1/detect``'s answer):
        ``p_value``, ``alpha``, ``n_units`` and, where given, ``details``' layers."""
        given = answer.get("details")
        details: Mapping[str, object] = given if isinstance(given, Mapping) else {}
        floor = None
        draws = details.get("null_draws_made") or details.get("n_null")
        if isinstance(draws, int) and draws > 0:
            floor = 1.0 / (draws + 1)
        p_sem = details.get("p_semantic")
        p_tok = details.get("p_token")
        return cls(
            p_value=_number(answer["p_value"]),
            alpha=_number(answer["alpha"]),
            n_sentences=int(_number(answer.get("n_units") or 0)),
            unit=str(answer.get("unit") or "sentence"),
            p_semantic=float(p_sem) if isinstance(p_sem, float) else None,
            p_token=float(p_tok) if isinstance(p_tok, float) else None,
            semantic_floor=floor,
        )


def _number(value: object) -> float:
    """A number of a detection's JSON (a JSON number, or a numeric string)."""
    if isinstance(value, str | int | float):
        return float(value)
    raise TypeError(f"a detection's field is {type(value).__name__}, not a number")


class RecordCounts(TypedDict):
    """What :meth:`RecordEvidence.of_report` reads of the record's JSON report
    (``ProvenanceReport.to_dict``, which has more)."""

    served: int
    paraphrase: int
    not_served: int


class VerdictFields(TypedDict):
    """:meth:`Verdict.to_dict`: the verdict as JSON."""

    code: str
    headline: str
    conclusion: str
    reasons: list[str]
    tone: str
    mark: str
    record: str
    manifest: str | None


@dataclass(frozen=True)
class RecordEvidence:
    """What the record said of the text's sentences: how many were served verbatim, how
    many are a close paraphrase of a served one, how many it does not know."""

    served: int
    paraphrase: int
    not_served: int

    def __post_init__(self) -> None:
        if min(self.served, self.paraphrase, self.not_served) < 0:
            raise ValueError("sentence counts must be >= 0")

    @property
    def total(self) -> int:
        return self.served + self.paraphrase + self.not_served

    @property
    def state(self) -> RecordState:
        if self.total and self.served == self.total:
            return RecordState.SERVED
        if self.served + self.paraphrase == 0:
            return RecordState.NOT_SERVED
        return RecordState.PARAPHRASE

    def counts(self) -> str:
        return (
            f"{self.served} of {_sentences(self.total)} served verbatim, {self.paraphrase} a "
            f"close paraphrase of a served sentence, {self.not_served} not served"
        )

    @classmethod
    def of_report(cls, report: RecordCounts) -> RecordEvidence:
        """From the record's JSON report (``ProvenanceReport.to_dict``)."""
        return cls(int(report["served"]), int(report["paraphrase"]), int(report["not_served"]))


@dataclass(frozen=True)
class Verdict:
    """The one conclusion: a short ``headline``, a plain ``conclusion``, its ``reasons``,
    a stable machine ``code`` and the page's ``tone`` (``"good"``: the text is this
    server's or key's; ``"caution"``: part of the story is missing or disagrees;
    ``"neutral"``: nothing shows it is)."""

    code: str
    headline: str
    conclusion: str
    reasons: tuple[str, ...]
    tone: str
    mark: MarkState
    record: RecordState
    manifest: ManifestState | None = None

    def to_dict(self) -> VerdictFields:
        return {
            "code": self.code,
            "headline": self.headline,
            "conclusion": self.conclusion,
            "reasons": list(self.reasons),
            "tone": self.tone,
            "mark": self.mark.value,
            "record": self.record.value,
            "manifest": None if self.manifest is None else self.manifest.value,
        }


#: (headline, conclusion, tone) for each pair; ``{n}`` is the text's length in words
_STORIES: dict[tuple[MarkState, RecordState], tuple[str, str, str]] = {
    (MarkState.MARKED, RecordState.SERVED): (
        "Served by this server, and marked",
        "This server served this text: the record holds every sentence verbatim, and the "
        "watermark of its key is found too.",
        "good",
    ),
    (MarkState.WEAK, RecordState.SERVED): (
        "Served by this server",
        "The record proves this server served every sentence verbatim. The mark alone is "
        "too weak at {n} to prove it without the record.",
        "good",
    ),
    (MarkState.NOT_MARKED, RecordState.SERVED): (
        "Served by this server, but the mark is not found",
        "The record proves this server served every sentence verbatim; the mark of this "
        "server's key is not found in it, as when it was served under another key. The "
        "record is the stronger evidence here.",
        "caution",
    ),
    (MarkState.MARKED, RecordState.PARAPHRASE): (
        "Edited from a text this server served, and marked",
        "Part of this text was served by this server and part was changed; the watermark "
        "survived the edit.",
        "good",
    ),
    (MarkState.WEAK, RecordState.PARAPHRASE): (
        "Likely edited from a text this server served",
        "Some sentences are served ones or close to them, so this is likely an edit of a "
        "served text; the mark alone is too weak at {n} to confirm it.",
        "caution",
    ),
    (MarkState.NOT_MARKED, RecordState.PARAPHRASE): (
        "Close to a served text, but the mark is not found",
        "Some sentences are close to ones this server served, but the watermark is not "
        "found: a heavy rewrite of a served text, or a text on the same subject written "
        "elsewhere.",
        "caution",
    ),
    (MarkState.MARKED, RecordState.NOT_SERVED): (
        "Marked with this key, not in this server's record",
        "The watermark of this key is found, but this server's record holds none of its "
        "sentences: it was marked with the same key elsewhere (samark generate, or another "
        "server with this key) or before the record began.",
        "caution",
    ),
    (MarkState.WEAK, RecordState.NOT_SERVED): (
        "Not served by this server; the mark is inconclusive",
        "The record holds none of its sentences, and the mark is too weak at {n} to say "
        "whether this key marked it.",
        "neutral",
    ),
    (MarkState.NOT_MARKED, RecordState.NOT_SERVED): (
        "Not from this server",
        "The record holds none of its sentences and the watermark is not found: nothing "
        "shows this server or its key produced this text.",
        "neutral",
    ),
    (MarkState.MARKED, RecordState.NO_RECORD): (
        "Marked: this text carries the watermark",
        "The watermark of this key is found. No record was checked, so whether this server "
        "served it is not known.",
        "good",
    ),
    (MarkState.WEAK, RecordState.NO_RECORD): (
        "Inconclusive: too little evidence either way",
        "The watermark is not found at the decision level, but the text is too short or "
        "too close to the level for that to show it is unmarked.",
        "neutral",
    ),
    (MarkState.NOT_MARKED, RecordState.NO_RECORD): (
        "Not marked: the watermark was not found",
        "Nothing here shows the mark of this key.",
        "neutral",
    ),
}

#: what the manifest adds: (reason, the conclusion's first words or None)
_MANIFEST_WORDS: dict[ManifestState, str] = {
    ManifestState.INTACT: "Its C2PA manifest is intact and signed by a trusted signer.",
    ManifestState.ALTERED: (
        "It carries a C2PA manifest, but the text was edited after it was signed: the "
        "manifest no longer vouches for these words."
    ),
    ManifestState.UNVERIFIABLE: (
        "It carries a C2PA manifest whose signer is not trusted here: the manifest is "
        "unverifiable and proves nothing on its own."
    ),
    ManifestState.NONE: "It carries no C2PA manifest (none was attached, or it was stripped).",
}


def _mark_reasons(mark: MarkEvidence) -> list[str]:
    out = [
        f"The mark: p = {_p(mark.p_value)} over {mark.length}; the decision "
        f"needs p below {mark.alpha:g}."
    ]
    if mark.p_semantic is not None and mark.p_token is not None:
        out.append(
            f"Its two layers: semantic p = {_p(mark.p_semantic)}, token p = {_p(mark.p_token)}."
        )
    if mark.short and mark.state is not MarkState.MARKED:
        out.append(
            f"A short text is weak evidence: {mark.length} "
            f"{'gives' if mark.n_sentences == 1 else 'give'} the detector few chances to "
            f"see the mark (below {mark.short_below} {mark.unit}s even a marked text is "
            "often missed), so not finding it does not show the text is unmarked."
        )
    if mark.at_floor and mark.semantic_floor is not None:
        draws = round(1 / mark.semantic_floor) - 1
        which = "semantic p-value" if mark.p_semantic is not None else "p-value"
        out.append(
            f"The {which} sits at {_p(mark.semantic_floor)}, the smallest "
            f"{draws:,} null draws can give (1/(draws + 1)): the text scores above every "
            "draw, and the true p may be smaller."
        )
    return out


def verdict(
    mark: MarkEvidence,
    record: RecordEvidence | None = None,
    manifest: ManifestState | str | None = None,
) -> Verdict:
    """The one verdict on a text from its mark's detection, the record's report on it
    (``None``: no record checked) and its C2PA manifest's state (``None``: not read)."""
    state = mark.state
    record_state = RecordState.NO_RECORD if record is None else record.state
    found = None if manifest is None else ManifestState(manifest)
    headline, conclusion, tone = _STORIES[(state, record_state)]
    conclusion = conclusion.format(n=mark.length)
    reasons = _mark_reasons(mark)
    if record is not None:
        reasons.append(f"The record: {record.counts()}.")
    if found is not None:
        reasons.append(_MANIFEST_WORDS[found])
        conclusion, tone = _with_manifest(found, state, record_state, conclusion, tone)
    return Verdict(
        code=f"{state.value}.{record_state.value}",
        headline=headline,
        conclusion=conclusion,
        reasons=tuple(reasons),
        tone=tone,
        mark=state,
        record=record_state,
        manifest=found,
    )


def _with_manifest(
    manifest: ManifestState, mark: MarkState, record: RecordState, conclusion: str, tone: str
) -> tuple[str, str]:
    """The conclusion and tone with the manifest's part of the story (issue 67's cases)."""
    if manifest is ManifestState.INTACT and mark is MarkState.MARKED:
        return f"Manifest intact and mark found. {conclusion}", tone
    if manifest is ManifestState.INTACT:
        return f"Manifest intact: the signed text is unchanged. {conclusion}", tone
    if manifest is ManifestState.ALTERED:
        return f"Manifest present, but the text was edited after signing. {conclusion}", (
            "caution" if tone == "good" else tone
        )
    if manifest is ManifestState.UNVERIFIABLE:
        return f"Manifest unverifiable: its signer is not trusted. {conclusion}", (
            "caution" if tone == "good" else tone
        )
    agree = mark is MarkState.MARKED and record in (RecordState.SERVED, RecordState.PARAPHRASE)
    if agree:
        return (
            f"Manifest stripped or never attached, but the mark and record agree. {conclusion}",
            tone,
        )
    return conclusion, tone
