"""The cache keys of a run's records, one typed key per kind of record.

A key names what a record depends on: the row (label and parameter fingerprint), the item,
and the attack (label and fingerprint) or length. Keys are tuples (named ones), written
into each record as a JSON list and compared with the tuples read back, so re-running
does no model work and a killed run resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from samark.datasets import Example
from samark.evaluation.experiment import NO_ATTACK, AttackSpec, Experiment, SchemeSpec


class GenerationKey(NamedTuple):
    kind: str  # "gen"
    row: str  # the row that writes the texts (``texts_from`` rows read their owner's)
    fingerprint: str
    item: str
    sentences: str


class AttackKey(NamedTuple):
    kind: str  # "attack"
    row: str  # the row that wrote the texts
    fingerprint: str
    item: str
    attack: str
    attack_fingerprint: str


class DetectionKey(NamedTuple):
    kind: str  # "detect"
    row: str
    fingerprint: str
    item: str
    attack: str
    attack_fingerprint: str  # "" for the text as written


class HumanDetectionKey(NamedTuple):
    detector: str  # rows that share a detector share its negatives' records
    kind: str  # "human"
    item: str


class LengthKey(NamedTuple):
    kind: str  # "length"
    row: str
    fingerprint: str
    item: str
    attack: str
    attack_fingerprint: str
    sentences: str


class HumanLengthKey(NamedTuple):
    kind: str  # "length"
    detector: str
    human: str  # "human"
    item: str
    sentences: str


class QualityKey(NamedTuple):
    kind: str  # "quality"
    row: str
    fingerprint: str
    item: str
    metrics: str  # the metrics asked for, comma-separated


class JudgeKey(NamedTuple):
    kind: str  # "judge"
    row: str
    fingerprint: str
    item: str
    model: str


class RankingKey(NamedTuple):
    kind: str  # "rank"
    item: str
    rows: str  # the ranked rows' labels, comma-separated
    model: str


class RecordKeys:
    """The keys an experiment's stages write and read."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment

    def generation(self, spec: SchemeSpec, e: Example) -> GenerationKey:
        label, fp = spec.texts_owner
        return GenerationKey("gen", label, fp, e.id, str(self.experiment.dataset.sentences))

    def attack(self, spec: SchemeSpec, item: str, a: AttackSpec) -> AttackKey:
        label, fp = spec.texts_owner
        return AttackKey("attack", label, fp, item, a.label, a.fingerprint)

    def detection(self, spec: SchemeSpec, item: str, attack: str) -> DetectionKey:
        fp = next((a.fingerprint for a in self.experiment.attacks if a.label == attack), "")
        return DetectionKey("detect", spec.label, spec.fingerprint, item, attack, fp)

    @staticmethod
    def human_detection(detector: str, item: str) -> HumanDetectionKey:
        return HumanDetectionKey(detector, "human", item)

    def length(self, spec: SchemeSpec, item: str, attack: str, sentences: int) -> LengthKey:
        """The key of a row's text's first ``sentences`` sentences."""
        return LengthKey("length", *self.detection(spec, item, attack)[1:], str(sentences))

    @staticmethod
    def human_length(detector: str, item: str, sentences: int) -> HumanLengthKey:
        """The key of a human negative's first ``sentences`` sentences."""
        return HumanLengthKey("length", detector, "human", item, str(sentences))

    def quality(self, spec: SchemeSpec, item: str) -> QualityKey:
        metrics = ",".join(self.experiment.metrics.quality)
        return QualityKey("quality", spec.label, spec.fingerprint, item, metrics)

    @staticmethod
    def judge(spec: SchemeSpec, item: str, model: str) -> JudgeKey:
        return JudgeKey("judge", spec.label, spec.fingerprint, item, model)

    @staticmethod
    def ranking(item: str, labels: Iterable[str], model: str) -> RankingKey:
        return RankingKey("rank", item, ",".join(labels), model)

    def asked(self, examples: Iterable[Example]) -> set[tuple[str, ...]]:
        """Every generation, attack, detection, length and quality key of the experiment
        over ``examples`` (each row takes its first ``prompts``)."""
        exp = self.experiment
        metrics = exp.metrics
        examples = list(examples)
        out: set[tuple[str, ...]] = set()
        for spec in exp.schemes:
            for e in examples[: spec.prompts or None]:
                out.add(self.generation(spec, e))
                out.add(self.quality(spec, e.id))
                for a in exp.attacks:
                    out.add(self.attack(spec, e.id, a))
                for attack in (NO_ATTACK, *(a.label for a in exp.attacks)):
                    out.add(self.detection(spec, e.id, attack))
                for attack in (NO_ATTACK, *metrics.length_attacks):
                    for k in metrics.lengths:
                        out.add(self.length(spec, e.id, attack, k))
        return out

    @staticmethod
    def is_row_key(key: tuple[str, ...]) -> bool:
        """Whether ``key`` belongs to a row's text (not to a human negative or the judge)."""
        if key[0] == "length":
            return len(key) == len(LengthKey._fields)
        return key[0] in ("gen", "attack", "detect", "quality")
