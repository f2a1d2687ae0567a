"""A run folder and the experiment it runs: inputs (examples, negatives, key), the shared
models, the stage stores and their cache keys, status. Each stage is its own module
(``stages.generate``, ``stages.attack``, ``stages.detect``, ``stages.length``,
``stages.quality``), cached in the run folder as append-only JSONL:

``generations`` -> ``attacks`` -> ``detections`` (-> ``lengths``) -> ``quality``. A record's
key names its scheme (label + parameter fingerprint), item, seed and attack, so re-running
does no model work, adding an attack runs only that attack, and a killed run resumes where
it stopped.
The run's secret key lives in ``key.json`` (mode 0600) and appears in no other file; an
experiment with ``key = "public"`` derives its key from its name and seed instead, so that
its records can be shared and resumed anywhere (and its watermark forged by anyone).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from tqdm.auto import tqdm

from samark.datasets import Document, Example, human_windows, load_dataset, prompt_examples
from samark.detection.ring_detector import RingDetector
from samark.embed import Embedder, load_embedder, new_key
from samark.errors import SamarkError
from samark.evaluation.attacks import Attack, create_attack
from samark.evaluation.experiment import NO_ATTACK, AttackSpec, Experiment, SchemeSpec
from samark.evaluation.record_keys import RecordKeys
from samark.evaluation.stages import Stage
from samark.evaluation.stages import attack as stage_attack
from samark.evaluation.stages import detect as stage_detect
from samark.evaluation.stages import generate as stage_generate
from samark.evaluation.stages import length as stage_length
from samark.evaluation.stages import quality as stage_quality
from samark.evaluation.store import FolderLock, RecordStore, compact_folder
from samark.keys import WatermarkKey
from samark.keys.keyring import RingEntry
from samark.keys.samark_material import PivotDraw, new_null_draws
from samark.schemes import Watermark, create_scheme
from samark.schemes.base import SharedResources, scheme_class, scheme_info

#: the stages in the order they run (each one owns its keys, work and status)
STAGE_OBJECTS: tuple[Stage, ...] = (
    stage_generate.STAGE,
    stage_attack.STAGE,
    stage_detect.STAGE,
    stage_length.STAGE,
    stage_quality.STAGE,
)
STAGES = tuple(s.name for s in STAGE_OBJECTS)
#: the stage stores of a run folder, in stage order
STAGE_FILES = (
    "generations.jsonl",
    "attacks.jsonl",
    "detections.jsonl",
    "lengths.jsonl",
    "quality.jsonl",
)
T = TypeVar("T")


def _experiment_file(run_dir: str | Path) -> Path:
    """A run folder's ``experiment.toml``; a folder without one is not a run folder."""
    source = Path(run_dir) / "experiment.toml"
    if not source.is_file():
        raise SamarkError(f"{run_dir} is not a run folder (no experiment.toml)")
    return source


class Run:
    """One experiment in one folder."""

    def __init__(
        self,
        experiment: Experiment,
        run_dir: str | Path,
        *,
        progress: bool = True,
        reverse: bool = False,
        read_only: bool = False,
    ):
        self.experiment = experiment
        self.keys = RecordKeys(experiment)
        self.dir = Path(run_dir)
        #: a run opened for reading (reports, status) writes nothing: no experiment.toml,
        #: no key file, no record
        self.read_only = read_only
        self._lock: FolderLock | None = None
        if not read_only:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock = FolderLock(self.dir)  # no compaction while this run writes
            (self.dir / "experiment.toml").write_text(experiment.source, encoding="utf-8")
        self.progress = progress
        #: take items last-first: a second process on the same folder then meets the first
        #: in the middle instead of repeating its work
        self.reverse = reverse
        stores = [RecordStore(self.dir / name) for name in STAGE_FILES]
        self.generations, self.attacks, self.detections, self.lengths, self.quality = stores
        self._schemes: dict[str, Watermark] = {}
        self._detectors: dict[str, RingDetector] = {}
        self._attackers: dict[str, Attack] = {}
        self._embedder: Embedder | None = None
        self._key: WatermarkKey | None = None
        self._examples: list[Example] | None = None
        self._negatives: list[Document] | None = None

    @classmethod
    def open(cls, run_dir: str | Path, *, prompts: int | None = None) -> Run:
        """An existing run folder, with the experiment it was run with (its first
        ``prompts`` prompts if given), for reading: reports and status."""
        exp = Experiment.load(_experiment_file(run_dir))
        return cls(
            exp if prompts is None else exp.with_prompts(prompts),
            run_dir,
            progress=False,
            read_only=True,
        )

    @staticmethod
    def adopt(
        run_dir: str | Path, old_experiment: Experiment, row: str, as_row: str
    ) -> dict[str, int]:
        """Hand row ``row`` of ``old_experiment`` (the folder's records under its label and
        fingerprint, written before its scheme's ``changed_defaults`` changed) to row
        ``as_row`` of the folder's experiment, after checking that both build the same
        scheme with the folder's key (``row_adoption``)."""
        from samark.evaluation.row_adoption import adopt_row, same_configuration

        now = Run.open(run_dir)
        then = Run(old_experiment, run_dir, progress=False, read_only=True)
        old_spec, new_spec = then.spec(row), now.spec(as_row)
        # the row as it was written: before its scheme's defaults changed
        changed = scheme_info(old_spec.name).changed_defaults
        pinned = {name: was for name, was, _ in changed if name not in old_spec.params}
        old_spec = dataclasses.replace(old_spec, params={**pinned, **old_spec.params})
        if old_spec.name != new_spec.name:
            raise SamarkError(f"{row!r} is {old_spec.name}, {as_row!r} is {new_spec.name}")
        diffs = same_configuration(then.scheme(old_spec), now.scheme(new_spec))
        if diffs:
            raise SamarkError(
                f"{row!r} and {as_row!r} are not one configuration: " + "; ".join(diffs)
            )
        return adopt_row(
            run_dir,
            STAGE_FILES,
            (old_spec.label, old_spec.fingerprint),
            (new_spec.label, new_spec.fingerprint),
        )

    def spec(self, label: str) -> SchemeSpec:
        """The experiment's row labelled ``label``."""
        for s in self.experiment.schemes:
            if s.label == label:
                return s
        rows = [s.label for s in self.experiment.schemes]
        raise SamarkError(f"no row {label!r} in {self.dir}'s experiment; rows: {rows}")

    def close(self) -> None:
        """Release the folder (a run opened for writing locks it against compaction until
        it is closed or collected)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def compact(run_dir: str | Path) -> list[tuple[str, int, int]]:
        """Seal a run folder's records into gzip files (``store.compact_folder``): the
        same records in about a seventh of the bytes. Refuses while a run writes to it."""
        _experiment_file(run_dir)
        return compact_folder(run_dir, STAGE_FILES)

    # ---------- inputs ----------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self.experiment.embedder)
        return self._embedder

    @property
    def key(self) -> WatermarkKey:
        if self._key is None:
            path = self.dir / "key.json"
            if self.experiment.key == "public":
                self._key = public_key(self.experiment, self.embedder)
                if path.exists() and WatermarkKey.load(path).key_id != self._key.key_id:
                    raise SamarkError(
                        f"{path} holds a secret key, but the experiment asks for its public "
                        "key: its records were made with the other key; use another folder"
                    )
            elif path.exists():
                self._key = WatermarkKey.load(path)
            elif len(self.generations):
                raise SamarkError(
                    f"{self.dir} has generations but no key.json: they were made with a key "
                    'this folder no longer holds (a public-key run? then say key = "public")'
                )
            elif self.read_only:
                raise SamarkError(f"{self.dir} has no key.json yet (nothing was generated)")
            else:
                # no keyed cells, as the public key: a row asks for them in its params
                self._key = new_key(self.embedder, self.experiment.avoided_domains, cells=0)
                self._key.save(path)
        return self._key

    def has_key(self) -> bool:
        """Whether the run's key exists (or, read-only, could be had without writing)."""
        return (
            not self.read_only
            or self.experiment.key == "public"
            or (self.dir / "key.json").exists()
        )

    def examples(self) -> list[Example]:
        if self._examples is None:
            d = self.experiment.dataset
            docs = load_dataset(d.name, **d.params)
            self._examples = prompt_examples(
                docs, prompt_sentences=d.prompt_sentences, sentences=d.sentences, count=d.prompts
            )
            if not self._examples:
                raise SamarkError(
                    f"{d.name} has no document with {d.prompt_sentences + d.sentences} sentences"
                )
        return self._examples

    def negatives(self) -> list[Document]:
        """Human texts for the FPR side: each example's own continuation, then windows of
        every source in turn; with ``negative_overlap``, then half-shifted windows."""
        if self._negatives is None:
            self._negatives = self._find_negatives()
        return self._negatives

    def row_negatives(self, spec: SchemeSpec) -> list[Document]:
        """The human negatives a row's detector scores: all of them, or with the row's
        ``human_negatives`` an evenly spaced subset of that many (every source corpus
        keeps its share)."""
        every = self.negatives()
        k = spec.human_negatives
        if k is None or k >= len(every):
            return every
        picks = np.unique(np.linspace(0, len(every) - 1, k).round().astype(int))
        return [every[i] for i in picks]

    def _find_negatives(self) -> list[Document]:
        d = self.experiment.dataset
        out = [Document(f"{e.id}:continuation", e.human) for e in self.examples()]
        seen = {doc.text for doc in out}
        shifts = (0, d.sentences // 2) if d.negative_overlap and d.sentences > 1 else (0,)
        sources = {
            name: load_dataset(name, **(d.params if name == d.name else {}))
            for name in d.negatives_from or (d.name,)
        }
        for shift in shifts:
            for name, docs in sources.items():
                if len(out) >= d.human_negatives:
                    break
                for doc in human_windows(
                    docs, sentences=d.sentences, count=d.human_negatives, shift=shift
                ):
                    if len(out) >= d.human_negatives:
                        break
                    if doc.text not in seen:
                        seen.add(doc.text)
                        out.append(Document(f"{name}:{doc.id}", doc.text))
        return out

    def key_for(self, spec: SchemeSpec) -> WatermarkKey:
        """The run's key, drawing its pivots in the row's pivot space if it names one."""
        if spec.pivot_space is None:
            return self.key
        from samark.keys.pivot_spaces import load_pivot_space

        space = load_pivot_space(spec.pivot_space, fingerprint=self.embedder.identity.fingerprint)
        return self.key.with_samark(
            PivotDraw.in_space(space, self.key.samark.cells, self.key.samark.null_draws)
        )

    def scheme(self, spec: SchemeSpec) -> Watermark:
        if spec.label not in self._schemes:
            # every row writes with the experiment's generator and shares its embedder;
            # experiments keep per-step research records (their keys are the run's own)
            shared = SharedResources(
                self.experiment.generator, self.embedder, research_records=True
            )
            self._schemes[spec.label] = create_scheme(
                spec.name,
                key=self.key_for(spec),
                shared=shared,
                preset=spec.preset,
                **spec.params,
            )
        return self._schemes[spec.label]

    def detector(self, spec: SchemeSpec) -> RingDetector:
        """What the row detects with (:mod:`samark.detection.pipeline`): its scheme's key
        as a ring of one, or with ``ring_keys`` a keyring of the run's key (first: it
        wrote the texts) and its siblings, each key's scheme built as the row's."""
        if spec.label not in self._detectors:
            scheme = self.scheme(spec)
            if spec.ring_keys is None:
                self._detectors[spec.label] = RingDetector.of_scheme(scheme)
            else:
                key = self.key_for(spec)
                keys = [key, *(key.sibling(f"ring/{i}") for i in range(1, spec.ring_keys))]
                entries = [RingEntry(f"key-{i:02d}", k.key_id, "") for i, k in enumerate(keys)]
                params = {**scheme_class(spec.name).preset(spec.preset), **spec.params}
                alpha = float(params.pop("alpha", scheme.alpha))
                shared = SharedResources(self.experiment.generator, self.embedder)
                self._detectors[spec.label] = RingDetector.from_keys(
                    list(zip(entries, keys, strict=True)),
                    spec.name,
                    shared=shared,
                    alpha=alpha,
                    **params,
                )
        return self._detectors[spec.label]

    def attacker(self, spec: AttackSpec) -> Attack:
        if spec.label not in self._attackers:
            self._attackers[spec.label] = create_attack(spec.name, **spec.params)
        return self._attackers[spec.label]

    def in_order(self, items: list[T]) -> list[T]:
        """A stage's work list in this process's order: last-first with ``reverse``, so that
        two processes on one folder meet in the middle rather than do the same items."""
        return items[::-1] if self.reverse else items

    def bar(self, items: Iterable[T] | None, desc: str, total: int | None = None) -> tqdm:
        """The one progress-bar style: over ``items``, or updated by hand (``items=None``)."""
        return tqdm(items, desc=desc, total=total, disable=not self.progress)

    # ---------- stages ----------
    def run(self, stages: Iterable[str] = STAGES) -> None:
        by_name = {s.name: s for s in STAGE_OBJECTS}
        for stage in stages:
            if stage not in by_name:
                raise SamarkError(f"unknown stage {stage!r}; stages: {STAGES}")
            by_name[stage].run(self)

    def status(self) -> list[dict[str, Any]]:
        """Per scheme row: records done and records the experiment asks for, per stage
        column. Attacks, detections and quality follow the generations done so far; a
        stage's count can grow as earlier stages fill in."""
        rows = []
        for spec in self.experiment.schemes:
            row: dict[str, Any] = {"scheme": spec.label}
            for stage in STAGE_OBJECTS:
                row |= stage.status(self, spec)
            rows.append(row)
        return rows

    def detector_id(self, spec: SchemeSpec) -> str | None:
        """The row's detector id, or None: the row detects nothing, or the run has no key
        yet (read-only)."""
        if not self.detectable(spec) or not self.has_key():
            return None
        own = self.scheme(spec).detector_id()
        return own if spec.ring_keys is None else f"{own}/ring{spec.ring_keys}"

    def current_records(self, stage: RecordStore) -> list[dict[str, Any]]:
        """The records of ``stage`` that the experiment as it now stands asks for. A row or
        attack whose parameters (or scheme revision) changed keeps its label but not its
        fingerprint: its old records stay in the file, and a report must not mix them in.
        The keys asked for are built by the same methods the stages write with, so the two
        cannot disagree. Human detections are kept whole (tables filter them by negative
        id and k), and judge records by their row."""
        asked = self._asked_keys
        rows = {(s.label, s.fingerprint) for s in self.experiment.schemes}

        def current(key: tuple[str, ...]) -> bool:
            if RecordKeys.is_row_key(key):
                return key in asked
            if key[0] == "judge":
                return (key[1], key[2]) in rows
            return True  # human detections (det, "human", id), human lengths, rankings

        return [r for r in stage.records() if current(tuple(r["key"]))]

    @functools.cached_property
    def _asked_keys(self) -> set[tuple[str, ...]]:
        """Every key the experiment asks for (fixed for the run: built once, however many
        tables filter by it)."""
        return self.keys.asked(self.examples())

    # ---------- helpers ----------
    def detectable(self, spec: SchemeSpec) -> bool:
        return scheme_info(spec.name).detectable

    def row_generations(self, spec: SchemeSpec, *, written: bool = False) -> list[dict[str, Any]]:
        """The row's generation records so far, in prompt order. Empty ones are included
        unless ``written``: a scheme that wrote nothing for a prompt has missed it, and its
        detection (p = 1) counts as a miss rather than leaving the table."""
        out = []
        for e in self.examples()[: spec.prompts or None]:
            g = self.generations.get(self.keys.generation(spec, e))
            if g is not None and (not written or g["text"].strip()):
                out.append(g)
        return out

    def row_texts(
        self, spec: SchemeSpec, attacks: Iterable[AttackSpec]
    ) -> list[tuple[str, str, str]]:
        """(item, attack label, text) of each of the row's texts as written and as each of
        ``attacks`` left it (where that attack has run), attack by attack in prompt order."""
        gens = self.row_generations(spec)
        out = [(g["item"], NO_ATTACK, g["text"]) for g in gens]
        for aspec in attacks:
            for g in gens:
                a = self.attacks.get(self.keys.attack(spec, g["item"], aspec))
                if a is not None:
                    out.append((g["item"], aspec.label, a["text"]))
        return out


def public_key(experiment: Experiment, embedder: Embedder) -> WatermarkKey:
    """The key of an experiment with ``key = "public"``: a function of its name and seed
    alone, so every machine that resumes the run holds the same key. Not a secret. It
    names the experiment's ``key_cells``: none unless the TOML asks (as keys written before
    cells were samark-layered's default), so every earlier run's records keep their
    meaning; a row may ask for cells in its params (a secret run key names none). A key
    with cells is detected against the null draws a new key's are."""
    blob = f"samark/public-experiment-key/{experiment.name}/{experiment.seed}".encode()
    return WatermarkKey(
        hashlib.sha256(blob).digest(),
        embedder.identity,
        PivotDraw.avoiding(
            embedder.reference_directions(experiment.avoided_domains),
            experiment.key_cells,
            new_null_draws(experiment.key_cells),
        ),
    )
