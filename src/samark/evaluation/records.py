"""The records the stages of an experiment append to their JSONL stores, typed.

Each stage writes one kind, through its type; status, the report and the judge read the
same fields. ``to_json`` gives the stored layout (an optional field that is ``None`` is
left out, as records written before it existed lack it, so committed runs keep reading);
``from_json`` checks a stored record and names what is wrong with it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, NotRequired, TypedDict, TypeVar, Unpack

from samark.detection.ring_detector import RingDetection
from samark.detection_result import Detection, JSONDetail
from samark.errors import SamarkError
from samark.json_types import JSONObject, JSONValue
from samark.schemes.base import Generation

R = TypeVar("R", bound="_Record")


class RecordError(SamarkError, ValueError):
    """A stored record does not have the fields its stage writes."""


class _Record:
    kind: ClassVar[str]

    def to_json(self) -> JSONObject:
        """The stored layout: an optional field left at ``None`` is left out (a required
        one is kept); ``extra`` is spread into the record."""
        out: JSONObject = {}
        for f in _schema(type(self))[1]:
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            if f.name == "extra":
                out.update(value)
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls: type[R], record: Mapping[str, object]) -> R:
        hints, fields = _schema(cls)
        names = [f.name for f in fields]
        values: dict[str, object] = {}
        for f in fields:
            if f.name == "extra":
                continue
            if f.name not in record:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise RecordError(f"a {cls.kind} record lacks {f.name!r}: {_short(record)}")
                continue
            value = record[f.name]
            if not _fits(value, hints[f.name]):
                raise RecordError(
                    f"a {cls.kind} record's {f.name!r} is {type(value).__name__}, "
                    f"not {hints[f.name]}: {_short(record)}"
                )
            values[f.name] = value
        if "extra" in names:
            # everything else but the store's own key
            values["extra"] = {k: v for k, v in record.items() if k not in names and k != "key"}
        return cls(**values)


#: a record type's field types (``typing.get_type_hints``) and fields
_Schema = tuple[dict[str, object], tuple[dataclasses.Field[object], ...]]
_SCHEMAS: dict[type, _Schema] = {}


def _schema(cls: type) -> _Schema:
    """A record type's field types and fields (looked up once per type)."""
    if cls not in _SCHEMAS:
        _SCHEMAS[cls] = (typing.get_type_hints(cls), dataclasses.fields(cls))
    return _SCHEMAS[cls]


def _fits(value: object, hint: object) -> bool:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        return type(None) in options
    for option in options:
        if option is type(None):
            continue
        origin = typing.get_origin(option) or option
        if isinstance(origin, type) and isinstance(value, origin):
            if origin is int and isinstance(value, bool):
                continue
            return True
        if origin is float and isinstance(value, int) and not isinstance(value, bool):
            return True
    return False


def _short(record: Mapping[str, object]) -> str:
    return str({k: record[k] for k in ("key", "scheme", "item", "attack") if k in record})


@dataclass(frozen=True)
class GenerationRecord(_Record):
    """One row's text for one prompt (the generate stage): the scheme's
    :class:`~samark.schemes.base.Generation`, under the row's label."""

    kind: ClassVar[str] = "generation"
    scheme: str  # the row's label
    item: str
    seed: int
    prompt: str
    text: str
    sentences: list[JSONValue]
    #: every other field of the Generation (token and time accounting, fallbacks, steps)
    extra: Mapping[str, JSONValue] = field(default_factory=dict)

    @classmethod
    def of(cls, label: str, item: str, seed: int, generation: Generation) -> GenerationRecord:
        rec = generation.to_dict()
        for name in ("scheme", "prompt", "text", "sentences"):
            del rec[name]
        sentences: list[JSONValue] = list(generation.sentences)
        return cls(
            scheme=label,
            item=item,
            seed=seed,
            prompt=generation.prompt,
            text=generation.text,
            sentences=sentences,
            extra=rec,
        )


@dataclass(frozen=True)
class AttackRecord(_Record):
    """One row's text after one attack (the attack stage), with the attack's measured
    fidelity (``samark.evaluation.fidelity``)."""

    kind: ClassVar[str] = "attack"
    scheme: str
    item: str
    attack: str
    text: str
    seconds: float
    seed: int | None = None
    #: the text to attack was empty: so is this one, and it is detected as a miss
    source_empty: bool | None = None
    strength_embedder: str | None = None
    #: the fidelity fields (similarity, sentences kept, ...)
    extra: Mapping[str, JSONValue] = field(default_factory=dict)


class DetectionMeta(TypedDict):
    """What a detection record says beyond the detection: the detector, the row's label
    (or "human"), the item, the attack and (length stage) the prefix length scored."""

    detector: str
    scheme: str
    item: str
    attack: str
    sentences: NotRequired[int]


@dataclass(frozen=True)
class DetectionRecord(_Record):
    """One detector's score of one text (the detect stage; the length stage's prefixes
    carry ``sentences``). ``scheme`` is the row's label, or "human" for a negative."""

    kind: ClassVar[str] = "detection"
    detector: str
    scheme: str
    item: str
    attack: str
    p_value: float
    #: null where the detection's was not finite (:func:`samark.detection_result.json_safe`)
    z: float | None
    statistic: str
    score: float | None
    n_units: int
    seconds: float
    unit: str | None = None
    #: the scheme's float diagnostics (``Detection.diagnostics``)
    details: dict[str, JSONDetail] | None = None
    #: the prefix length scored (length stage only)
    sentences: int | None = None
    #: a keyring row's answer (``SchemeSpec.ring_keys``): its method and size, the key it
    #: attributes and that key's own p-value (:meth:`RingDetection.ring_fields`)
    ring: Mapping[str, JSONValue] | None = None

    @classmethod
    def of(
        cls, detection: Detection, seconds: float, **meta: Unpack[DetectionMeta]
    ) -> DetectionRecord:
        """The record of ``detection``: its fields as :meth:`Detection.to_dict` writes
        them (the one serialisation of a detection) and ``meta`` (detector, row, item...)."""
        out = detection.to_dict()
        return cls(
            p_value=detection.p_value,  # a probability: finite (the store writes it as JSON)
            z=out["z"],
            statistic=out["statistic"],
            score=out["score"],
            n_units=out["n_units"],
            unit=out["unit"],
            details=out["details"],
            seconds=seconds,
            **meta,
        )

    @classmethod
    def of_answer(
        cls, found: RingDetection, seconds: float, **meta: Unpack[DetectionMeta]
    ) -> DetectionRecord:
        """The record of a key's or keyring's answer: its detection
        (:meth:`RingDetection.as_detection`) and, for a keyring, the ring's fields."""
        ring = found.ring_fields() or None
        return dataclasses.replace(cls.of(found.as_detection(), seconds, **meta), ring=ring)

    @classmethod
    def nothing_to_score(cls, seconds: float, **meta: Unpack[DetectionMeta]) -> DetectionRecord:
        """A text without a sentence: a miss (p = 1), not a gap."""
        return cls(
            p_value=1.0, z=0.0, statistic="none", score=0.0, n_units=0, seconds=seconds, **meta
        )


@dataclass(frozen=True)
class QualityRecord(_Record):
    """One row's text scored by the experiment's quality metrics (the quality stage)."""

    kind: ClassVar[str] = "quality"
    scheme: str
    item: str
    #: metric name -> value
    extra: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeRecord(_Record):
    """An LM judge's comparison of one row's text with the reference row's (the quality
    store; ``samark.evaluation.judge``)."""

    kind: ClassVar[str] = "judge"
    scheme: str
    item: str
    judge: str
    #: the judge's verdict fields
    extra: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class RankRecord(_Record):
    """An LM judge's ranking of every row's text for one prompt (the quality store)."""

    kind: ClassVar[str] = "rank"
    item: str
    judge: str
    #: row label -> rank; ``None`` when the reply could not be parsed
    ranks: dict[str, float] | None
    reply: str


#: stage store -> its record type, or (quality) the types its keys' first part names
_TYPES: dict[str, type[_Record] | dict[str, type[_Record]]] = {
    "generations": GenerationRecord,
    "attacks": AttackRecord,
    "detections": DetectionRecord,
    "lengths": DetectionRecord,
    "quality": {"quality": QualityRecord, "judge": JudgeRecord, "rank": RankRecord},
}


def parse_record(store: str, record: Mapping[str, object]) -> _Record:
    """A stored record of ``store`` (generations, attacks, detections, lengths, quality)
    as its type."""
    kinds = _TYPES.get(store)
    if kinds is None:
        raise RecordError(f"no stage store named {store!r}; known: {sorted(_TYPES)}")
    if isinstance(kinds, dict):
        key = record.get("key")
        kind = key[0] if isinstance(key, list | tuple) and key else None
        if kind not in kinds:
            raise RecordError(f"a record of {store} has key {key!r}, not one of {sorted(kinds)}")
        return kinds[kind].from_json(record)
    return kinds.from_json(record)
