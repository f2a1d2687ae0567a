"""The evaluation stages' seam: what a stage asks of its run, and what a run asks of a stage.

A stage (``stages.generate``, ``stages.attack``, ``stages.detect``, ``stages.length``,
``stages.quality``) owns its records' keys, its to-do list, its status and its work; the
run (:class:`samark.evaluation.runner.Run`) keeps the folder, the inputs, the shared models
and the stores, and reaches the stages only through :class:`Stage`. The stages see the run
only through :class:`RunContext`, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

from tqdm.auto import tqdm

from samark.datasets import Document, Example
from samark.detection.ring_detector import RingDetector
from samark.embed import Embedder
from samark.evaluation.attacks import Attack
from samark.evaluation.experiment import AttackSpec, Experiment, SchemeSpec
from samark.evaluation.record_keys import RecordKeys
from samark.evaluation.store import RecordStore
from samark.schemes import Watermark

T = TypeVar("T")


class RunContext(Protocol):
    """What a stage reads and writes of its run."""

    experiment: Experiment
    keys: RecordKeys
    generations: RecordStore
    attacks: RecordStore
    detections: RecordStore
    lengths: RecordStore
    quality: RecordStore

    @property
    def embedder(self) -> Embedder: ...

    def examples(self) -> list[Example]: ...

    def row_negatives(self, spec: SchemeSpec) -> list[Document]: ...

    def row_generations(
        self, spec: SchemeSpec, *, written: bool = False
    ) -> list[dict[str, Any]]: ...

    def row_texts(
        self, spec: SchemeSpec, attacks: Iterable[AttackSpec]
    ) -> list[tuple[str, str, str]]: ...

    def detectable(self, spec: SchemeSpec) -> bool: ...

    def detector_id(self, spec: SchemeSpec) -> str | None: ...

    def scheme(self, spec: SchemeSpec) -> Watermark: ...

    def detector(self, spec: SchemeSpec) -> RingDetector: ...

    def attacker(self, spec: AttackSpec) -> Attack: ...

    def in_order(self, items: list[T]) -> list[T]: ...

    def bar(self, items: Iterable[T] | None, desc: str, total: int | None = None) -> tqdm: ...


class Stage(Protocol):
    """One stage of a run: ``run`` does the work left (resumable); ``status`` counts, per
    column it reports, the row's records done and asked for."""

    name: str

    def run(self, run: RunContext) -> None: ...

    def status(self, run: RunContext, spec: SchemeSpec) -> dict[str, tuple[int, int]]: ...
