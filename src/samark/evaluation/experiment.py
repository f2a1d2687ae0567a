"""An experiment as data: a TOML file naming the data set, schemes, attacks and metrics.

See ``experiments/local.toml`` for every field. Unknown fields are errors, not ignored, so a
typo never silently changes what a run measures.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import tomllib

from samark.embed import LEGACY_AVOIDED_DOMAINS
from samark.errors import SamarkError

KEY_KINDS = ("secret", "public")


#: a ROC panel draws no attack and at most this many attacks (8 series, each its own
#: colour and marker)
MAX_PLOT_ATTACKS = 7


class ExperimentError(SamarkError):
    """The experiment file is malformed."""


@dataclass(frozen=True)
class DatasetSpec:
    name: str = "cnn_dailymail"
    prompts: int = 100
    prompt_sentences: int = 3
    sentences: int = 6  # generated sentences per prompt (and per human negative)
    human_negatives: int = 1000
    # where the negatives come from, in order, after each prompt's own human continuation
    negatives_from: tuple[str, ...] = ()
    # when the non-overlapping windows run out, add windows shifted by half a window
    # (each shares half its sentences with two others: more texts, correlated ones)
    negative_overlap: bool = False
    params: Mapping[str, object] = field(default_factory=dict)


#: the attack label of a text as written
NO_ATTACK = "none"


def item_seed(base: int, *parts: str) -> int:
    """A 31-bit seed for one piece of an experiment's work (its seed and the work's names)."""
    blob = "/".join([str(base), *parts]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "little") & 0x7FFFFFFF


@dataclass(frozen=True)
class SchemeSpec:
    name: str
    label: str
    params: dict[str, Any] = field(default_factory=dict)
    prompts: int | None = None  # fewer prompts than the data set's, for costly rows
    #: a detection-only row: score the texts (and attacked texts) of the row with this
    #: label, e.g. the same generations under another test statistic; it generates nothing
    texts_from: str | None = None
    #: (label, fingerprint) of the row named by ``texts_from``, resolved by Experiment.parse
    owner: tuple[str, str] | None = None
    #: a shipped pivot space (``samark.keys.pivot_spaces``): the row's key is
    #: the experiment's secret drawing its pivots in that space
    pivot_space: str | None = None
    #: fewer human negatives than the data set's, for a detector that costs a generation
    #: (PMark): an evenly spaced subset of the experiment's negatives, so that every source
    #: corpus keeps its share; the row's FPR and thresholds rest on these alone
    human_negatives: int | None = None
    #: a research row (a lever study): the report shows it in its own section and plots,
    #: apart from the paper's rows (not part of the fingerprint: it changes no record)
    research: bool = False
    #: the scheme's preset ``params`` apply over (``Watermark.presets``): "paper" (SAMark's
    #: z, as recorded; outside the fingerprint) or "product" (every door's defaults)
    preset: str = "paper"
    #: detect with a keyring of this many keys, the run's key first (``Run.detector``)
    ring_keys: int | None = None

    @property
    def fingerprint(self) -> str:
        """Changes whenever the scheme, its parameters, its revision or a default it takes
        change (part of every cache key). Revision 0 leaves the fingerprint as it was before
        revisions existed."""
        from samark.schemes.base import scheme_revision

        return self.fingerprint_at(scheme_revision(self.name))

    def fingerprint_at(self, revision: int) -> str:
        """The fingerprint this row had (or has) with its scheme at ``revision``: where a
        revised row's earlier records are found."""
        from samark.evaluation.fingerprints import row_fingerprint

        parts = (self.params, revision, self.pivot_space, self.preset, self.ring_keys)
        return row_fingerprint(self.name, *parts)

    @property
    def writes(self) -> bool:
        """Whether the row writes (and so attacks and scores the quality of) texts of its
        own; a ``texts_from`` row only scores another row's."""
        return self.texts_from is None

    @property
    def texts_owner(self) -> tuple[str, str]:
        """(label, fingerprint) of the row whose generations and attacks this row scores."""
        return self.owner or (self.label, self.fingerprint)


@dataclass(frozen=True)
class AttackSpec:
    name: str
    label: str
    params: Mapping[str, object] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        blob = json.dumps([self.name, self.params], sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


@dataclass(frozen=True)
class MetricsSpec:
    quality: tuple[str, ...] = ("sd", "distinct2", "rep4")
    oracle: str | None = None  # LM preset for perplexity (not the generator)
    judge: dict[str, Any] | None = None  # {"kind": "local"} or {"base_url", "model", ...}
    judge_task: str = "c4"
    bootstrap: int = 1000
    fprs: tuple[float, ...] = (0.01, 0.05)
    #: the calibrated decision p < alpha whose TPR and human FPR the report shows
    alpha: float = 0.01
    #: the label of the row the judge compares every other row with (default: the first
    #: row whose scheme writes no watermark)
    reference: str | None = None
    #: power against length: every detector also scores the first k sentences of each text
    #: and of each human negative, for k in ``lengths`` (each below [dataset] sentences,
    #: whose point the detect stage gives), with no attack and under ``length_attacks``
    lengths: tuple[int, ...] = ()
    length_attacks: tuple[str, ...] = ()
    #: the attacks the report's ROC panels draw beside no attack (at most
    #: ``MAX_PLOT_ATTACKS``; default: the first ones of [[attacks]])
    plot_attacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Experiment:
    name: str
    dataset: DatasetSpec
    schemes: tuple[SchemeSpec, ...]
    attacks: tuple[AttackSpec, ...] = ()
    metrics: MetricsSpec = MetricsSpec()
    seed: int = 0
    embedder: str = "all-mpnet-base-v2"
    generator: str = "smollm2-135m-instruct"
    #: "secret": a fresh random key in the run folder's key.json (mode 0600), never shared.
    #: "public": derived from ``name`` and ``seed``, so that a shared run (records kept in
    #: version control, resumed on other machines) needs no key file. Anyone can then
    #: detect and forge that run's watermark: a research setting, never a deployment.
    key: str = "secret"
    #: the domains whose mean directions the run's key avoids (names shipped in
    #: samark/resources/reference_directions.json). The default is what keys avoided
    #: before fiction was added, so that committed public-key runs keep their keys; new
    #: keys outside experiments avoid ``samark.embed.AVOIDED_DOMAINS``.
    avoided_domains: tuple[str, ...] = LEGACY_AVOIDED_DOMAINS
    #: the keyed semantic cells a public key names (the cells of a row that gives none):
    #: 0, as public keys were before cells, or, with ``key_cells = "default"`` in the TOML,
    #: what a new key names now (``DEFAULT_CELLS``), so that a row with no params is the
    #: shipped default (experiments/default.toml)
    key_cells: int = 0
    source: str = ""  # the TOML text, kept with the run

    def with_prompts(self, prompts: int) -> Experiment:
        """The same experiment on its first ``prompts`` prompts (records stay reusable).

        Only the scheme rows are sliced: the human negatives stay those of the whole
        experiment, so a slice and the full run measure FPR on the same texts."""
        if prompts < 1:
            raise ExperimentError("prompts must be >= 1")
        prompts = min(prompts, self.dataset.prompts)
        schemes = tuple(
            dataclasses.replace(s, prompts=min(s.prompts or prompts, prompts)) for s in self.schemes
        )
        return dataclasses.replace(self, schemes=schemes)

    def reference_row(self) -> SchemeSpec | None:
        """The row the judge and the quality deltas compare with: ``[metrics] reference``,
        else the first row whose scheme writes no watermark (None if there is none)."""
        from samark.schemes.base import scheme_info

        if self.metrics.reference is not None:
            # None when --schemes left the named row out
            return next((s for s in self.schemes if s.label == self.metrics.reference), None)
        return next((s for s in self.schemes if not scheme_info(s.name).detectable), None)

    def only_schemes(self, labels: list[str]) -> Experiment:
        """The same experiment restricted to these scheme rows (for splitting work)."""
        return dataclasses.replace(self, schemes=_labelled(self.schemes, labels, "scheme"))

    def only_attacks(self, labels: list[str]) -> Experiment:
        """The same experiment restricted to these attack columns (for splitting work)."""
        return dataclasses.replace(self, attacks=_labelled(self.attacks, labels, "attack"))

    @classmethod
    def load(cls, path: str | Path) -> Experiment:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ExperimentError(f"cannot read experiment {path}: {e}") from None
        return cls.parse(text, where=str(path))

    @classmethod
    def parse(cls, text: str, *, where: str = "<experiment>") -> Experiment:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ExperimentError(f"{where}: not valid TOML: {e}") from None
        top = _take(
            raw,
            where,
            ["name", "seed", "embedder", "generator", "key", "avoided_domains", "key_cells"],
            ["dataset", "schemes", "attacks", "metrics"],
        )
        dataset = _dataset(raw, where)
        schemes, attacks = _rows(raw, dataset, where)
        metrics = _metrics(raw, dataset, schemes, attacks, where)
        key, avoided = _key_settings(top, where)
        return cls(
            name=str(top.get("name") or Path(where).stem),
            dataset=dataset,
            schemes=schemes,
            attacks=attacks,
            metrics=metrics,
            seed=int(top.get("seed", 0)),
            embedder=str(top.get("embedder", "all-mpnet-base-v2")),
            generator=str(top.get("generator", "smollm2-135m-instruct")),
            key=key,
            avoided_domains=avoided,
            key_cells=_key_cells(top, key, where),
            source=text,
        )


def _dataset(raw: Mapping[str, object], where: str) -> DatasetSpec:
    """The ``[dataset]`` table, validated."""
    dataset_raw = _fields(raw.get("dataset", {}), DatasetSpec, f"{where} [dataset]")
    if "negatives_from" in dataset_raw:
        dataset_raw["negatives_from"] = tuple(dataset_raw["negatives_from"])
    dataset = DatasetSpec(**dataset_raw)
    for f in ("prompts", "prompt_sentences", "sentences", "human_negatives"):
        if int(getattr(dataset, f)) < 1:
            raise ExperimentError(f"{where} [dataset]: {f} must be >= 1")
    return dataset


def _rows(
    raw: dict[str, Any], dataset: DatasetSpec, where: str
) -> tuple[tuple[SchemeSpec, ...], tuple[AttackSpec, ...]]:
    """The ``[[schemes]]`` and ``[[attacks]]``, validated (labels unique and free of the
    CLI's separators; ``texts_from`` resolved)."""
    schemes = tuple(
        _scheme(s, f"{where} [[schemes]] #{i + 1}") for i, s in enumerate(raw.get("schemes", []))
    )
    if not schemes:
        raise ExperimentError(f"{where}: name at least one [[schemes]]")
    attacks = tuple(
        _attack(a, f"{where} [[attacks]] #{i + 1}") for i, a in enumerate(raw.get("attacks", []))
    )
    schemes = _resolve_texts_from(schemes, where)
    for s in schemes:
        if (s.human_negatives or 0) > dataset.human_negatives:
            raise ExperimentError(
                f"{where}: row {s.label!r} asks for {s.human_negatives} human negatives; "
                f"the experiment has {dataset.human_negatives} ([dataset] human_negatives)"
            )
    for kind, items, sep in (("scheme", schemes, ","), ("attack", attacks, ";")):
        labels = [x.label for x in items]
        dup = {x for x in labels if labels.count(x) > 1}
        if dup:
            raise ExperimentError(f"{where}: duplicate {kind} labels {sorted(dup)}")
        # `samark eval run --schemes A,B --attacks "A;B"` splits labels on these
        bad = [x for x in labels if sep in x]
        if bad:
            raise ExperimentError(
                f"{where}: {kind} labels may not contain {sep!r} (the CLI's "
                f"separator for {kind} labels): {bad}"
            )
    return schemes, attacks


def _metrics(
    raw: Mapping[str, object],
    dataset: DatasetSpec,
    schemes: tuple[SchemeSpec, ...],
    attacks: tuple[AttackSpec, ...],
    where: str,
) -> MetricsSpec:
    """The ``[metrics]`` table, validated against the rows and attacks."""
    metrics_raw = _fields(raw.get("metrics", {}), MetricsSpec, f"{where} [metrics]")
    for f in ("quality", "fprs", "lengths", "length_attacks", "plot_attacks"):
        if f in metrics_raw:
            metrics_raw[f] = tuple(metrics_raw[f])
    metrics = MetricsSpec(**metrics_raw)
    from samark.evaluation.text_metrics import TEXT_METRICS

    known = [*TEXT_METRICS.names(), "perplexity", "judge"]
    unknown = set(metrics.quality) - set(known)
    if unknown:
        raise ExperimentError(
            f"{where} [metrics]: unknown quality metrics {sorted(unknown)}; known: {known}"
        )
    if not metrics.fprs or any(not 0 < f < 1 for f in metrics.fprs):
        raise ExperimentError(f"{where} [metrics]: fprs must be one or more in (0, 1)")
    if not 0 < metrics.alpha < 1:
        raise ExperimentError(f"{where} [metrics]: alpha must be in (0, 1)")
    _check_lengths(metrics, dataset.sentences, attacks, where)
    unknown_plot = set(metrics.plot_attacks) - {a.label for a in attacks}
    if unknown_plot or len(metrics.plot_attacks) > MAX_PLOT_ATTACKS:
        raise ExperimentError(
            f"{where} [metrics]: plot_attacks names at most {MAX_PLOT_ATTACKS} attack "
            f"labels of [[attacks]]; unknown: {sorted(unknown_plot)}"
        )
    if metrics.reference is not None and metrics.reference not in {s.label for s in schemes}:
        raise ExperimentError(
            f"{where} [metrics]: reference {metrics.reference!r} is not a row; rows: "
            f"{[s.label for s in schemes]}"
        )
    return metrics


def _key_settings(top: Mapping[str, object], where: str) -> tuple[str, tuple[str, ...]]:
    """The experiment's key kind and the domains its key avoids."""
    key = str(top.get("key", "secret"))
    if key not in KEY_KINDS:
        raise ExperimentError(f"{where}: key must be one of {KEY_KINDS}, not {key!r}")
    avoided = top.get("avoided_domains", list(Experiment.avoided_domains))
    if (
        not isinstance(avoided, list)
        or not all(isinstance(d, str) and d for d in avoided)
        or len(set(avoided)) != len(avoided)
    ):
        raise ExperimentError(
            f"{where}: avoided_domains must be a list of distinct domain names, "
            f'e.g. ["news", "wiki", "fiction"]; got {avoided!r}'
        )
    return key, tuple(avoided)


def _key_cells(top: Mapping[str, object], key: str, where: str) -> int:
    """The cells a public key names: an int, or "default" for a new key's."""
    from samark.keys.samark_material import DEFAULT_CELLS, check_cells

    raw = top.get("key_cells", 0)
    if raw != 0 and key != "public":
        raise ExperimentError(f'{where}: key_cells is for key = "public" (a secret key names none)')
    if raw == "default":
        return DEFAULT_CELLS
    try:
        return check_cells(raw)
    except ValueError as e:
        raise ExperimentError(f'{where}: key_cells: {e}, or "default"') from None


def _check_lengths(
    metrics: MetricsSpec, sentences: int, attacks: tuple[AttackSpec, ...], where: str
) -> None:
    bad = [k for k in metrics.lengths if not isinstance(k, int) or not 1 <= k < sentences]
    if bad or len(set(metrics.lengths)) != len(metrics.lengths):
        raise ExperimentError(
            f"{where} [metrics]: lengths must be distinct sentence counts from 1 to "
            f"{sentences - 1} (the detect stage scores the full {sentences}); got "
            f"{list(metrics.lengths)}"
        )
    labels = [a.label for a in attacks]
    unknown = [a for a in metrics.length_attacks if a not in labels]
    if unknown:
        raise ExperimentError(
            f"{where} [metrics]: length_attacks names no attack of the experiment: "
            f"{unknown}; attacks: {labels}"
        )
    if metrics.length_attacks and not metrics.lengths:
        raise ExperimentError(f"{where} [metrics]: length_attacks needs lengths")


Labelled = TypeVar("Labelled", SchemeSpec, AttackSpec)


def _labelled(items: tuple[Labelled, ...], labels: list[str], kind: str) -> tuple[Labelled, ...]:
    known = [x.label for x in items]
    missing = set(labels) - set(known)
    if missing:
        raise ExperimentError(f"no {kind} labelled {sorted(missing)}; labels: {known}")
    return tuple(x for x in items if x.label in labels)


def _resolve_texts_from(schemes: tuple[SchemeSpec, ...], where: str) -> tuple[SchemeSpec, ...]:
    by_label = {s.label: s for s in schemes}
    out = []
    for s in schemes:
        if s.texts_from is not None:
            owner = by_label.get(s.texts_from)
            if owner is None or owner is s:
                raise ExperimentError(
                    f"{where}: row {s.label!r} takes texts_from {s.texts_from!r}, which is "
                    f"not another row; rows: {list(by_label)}"
                )
            if owner.texts_from is not None:
                raise ExperimentError(
                    f"{where}: row {s.label!r} takes texts_from {owner.label!r}, which takes "
                    "its own texts from another row: name the row that generates them"
                )
            if s.prompts is not None:
                raise ExperimentError(
                    f"{where}: row {s.label!r} scores the texts of {owner.label!r}: "
                    "it has no prompts of its own"
                )
            if s.pivot_space not in (None, owner.pivot_space):
                raise ExperimentError(
                    f"{where}: row {s.label!r} scores the texts of {owner.label!r}, whose key "
                    f"draws its pivots in {owner.pivot_space!r}, not {s.pivot_space!r}"
                )
            # the same key as the row whose texts it scores
            s = dataclasses.replace(
                s,
                owner=(owner.label, owner.fingerprint),
                prompts=owner.prompts,
                pivot_space=owner.pivot_space,
            )
        out.append(s)
    return tuple(out)


def _take(raw: dict[str, Any], where: str, scalars: list[str], tables: list[str]) -> dict[str, Any]:
    unknown = set(raw) - set(scalars) - set(tables)
    if unknown:
        raise ExperimentError(f"{where}: unknown fields {sorted(unknown)}")
    return {k: raw[k] for k in scalars if k in raw}


def _fields(raw: object, cls: type, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ExperimentError(f"{where}: expected a table")
    known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = set(raw) - known
    if unknown:
        raise ExperimentError(f"{where}: unknown fields {sorted(unknown)}; known: {sorted(known)}")
    return dict(raw)


def _scheme(raw: object, where: str) -> SchemeSpec:
    from samark.schemes import scheme_names

    fields = _fields(raw, SchemeSpec, where)
    if "owner" in fields:
        raise ExperimentError(f"{where}: unknown field 'owner' (say texts_from = \"LABEL\")")
    if "name" not in fields:
        raise ExperimentError(f"{where}: needs a name")
    if fields["name"] not in scheme_names():
        raise ExperimentError(
            f"{where}: unknown scheme {fields['name']!r}; known: {scheme_names()}"
        )
    fields.setdefault("label", fields["name"])
    if not isinstance(fields.get("research", False), bool):
        raise ExperimentError(f"{where}: research must be true or false")
    if (preset := fields.get("preset", "paper")) not in ("paper", "product"):
        raise ExperimentError(f'{where}: preset must be "paper" or "product", not {preset!r}')
    for f, least in (("prompts", 1), ("human_negatives", 1), ("ring_keys", 2)):
        value = fields.get(f)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < least
        ):
            raise ExperimentError(f"{where}: {f} must be an integer >= {least}, not {value!r}")
    space = fields.get("pivot_space")
    if space is not None:
        from samark.keys.pivot_spaces import shipped_pivot_spaces

        if space not in shipped_pivot_spaces():
            raise ExperimentError(
                f"{where}: unknown pivot_space {space!r}; shipped: {sorted(shipped_pivot_spaces())}"
            )
    return SchemeSpec(**fields)


def _attack(raw: object, where: str) -> AttackSpec:
    from samark.evaluation.attacks import ATTACKS

    fields = _fields(raw, AttackSpec, where)
    if "name" not in fields:
        raise ExperimentError(f"{where}: needs a name")
    if fields["name"] not in ATTACKS.names():
        raise ExperimentError(
            f"{where}: unknown attack {fields['name']!r}; known: {ATTACKS.names()}"
        )
    fields.setdefault("label", fields["name"])
    return AttackSpec(**fields)
