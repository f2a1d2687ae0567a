"""What the record says of a checked text, sentence by sentence and as a whole."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NotRequired, TypedDict

from samark.provenance.entries import StoredSentence, StoredSentenceFields


class ProvenanceState(StrEnum):
    """A checked sentence's standing in the record."""

    #: its keyed hash is in the record: served verbatim (after normalisation)
    SERVED = "served"
    #: not verbatim, but its nearest stored sentence is within the paraphrase threshold:
    #: a served sentence edited or paraphrased
    PARAPHRASE = "paraphrase"
    #: neither: the record does not vouch for it (written by someone else, or inserted)
    NOT_SERVED = "not_served"


class SentenceFields(TypedDict):
    """:meth:`SentenceProvenance.to_dict`: one checked sentence as JSON."""

    index: int
    sentence: str
    state: str
    cosine: NotRequired[float]
    times_served: NotRequired[int]
    match: NotRequired[StoredSentenceFields]


class ReportFields(TypedDict):
    """:meth:`ProvenanceReport.to_dict`: the record's answer as JSON."""

    served: int
    paraphrase: int
    not_served: int
    requests: list[str]
    threshold: float
    stored_sentences: int
    sentences: list[SentenceFields]
    edited_found: NotRequired[dict[str, float]]


@dataclass(frozen=True)
class SentenceProvenance:
    """One checked sentence: its state, the stored sentence it matches (the first to be
    served, for a verbatim match; the nearest, for a paraphrase), the cosine with the
    nearest stored embedding where it was searched, and how often it was served."""

    index: int
    sentence: str
    state: ProvenanceState
    match: StoredSentence | None = None
    cosine: float | None = None
    times_served: int = 0

    def to_dict(self) -> SentenceFields:
        out: SentenceFields = {
            "index": self.index,
            "sentence": self.sentence,
            "state": self.state.value,
        }
        if self.cosine is not None:
            out["cosine"] = round(self.cosine, 4)
        if self.times_served:
            out["times_served"] = self.times_served
        if self.match is not None:
            out["match"] = self.match.to_dict()
        return out


@dataclass(frozen=True)
class ProvenanceReport:
    """The record's answer for a text: every sentence's state, and which sentences it
    vouches for (served verbatim), which look edited (a paraphrase of a served one) and
    which it does not know (not served: written elsewhere, or inserted)."""

    sentences: tuple[SentenceProvenance, ...]
    threshold: float
    stored: int
    #: edit kind -> the share of served sentences so edited that the record still finds
    #: at ``threshold`` (measured: :data:`samark.provenance.threshold.EDITED_FOUND`); None
    #: where no share is measured for this embedder and threshold
    edited_found: dict[str, float] | None = None

    def _of(self, state: ProvenanceState) -> tuple[int, ...]:
        return tuple(s.index for s in self.sentences if s.state is state)

    @property
    def vouched(self) -> tuple[int, ...]:
        return self._of(ProvenanceState.SERVED)

    @property
    def edited(self) -> tuple[int, ...]:
        return self._of(ProvenanceState.PARAPHRASE)

    @property
    def not_served(self) -> tuple[int, ...]:
        return self._of(ProvenanceState.NOT_SERVED)

    @property
    def requests(self) -> tuple[str, ...]:
        """The requests whose sentences the text holds, in order of first appearance."""
        seen = (s.match.request_id for s in self.sentences if s.match is not None)
        return tuple(dict.fromkeys(seen))

    def to_dict(self) -> ReportFields:
        out: ReportFields = {
            "served": len(self.vouched),
            "paraphrase": len(self.edited),
            "not_served": len(self.not_served),
            "requests": list(self.requests),
            "threshold": self.threshold,
            "stored_sentences": self.stored,
            "sentences": [s.to_dict() for s in self.sentences],
        }
        if self.edited_found:
            out["edited_found"] = dict(self.edited_found)
        return out

    def summary(self) -> str:
        """One line: "3 of 5 sentences served verbatim, 1 edited, 1 not served"."""
        n = len(self.sentences)
        unit = "sentence" if n == 1 else "sentences"
        return (
            f"{len(self.vouched)} of {n} {unit} served verbatim, {len(self.edited)} edited "
            f"(a paraphrase of a served sentence), {len(self.not_served)} not served"
        )
