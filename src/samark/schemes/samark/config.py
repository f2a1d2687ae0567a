"""SAMark's parameters: one validated, immutable config with the paper's defaults, made of
parts: what generation draws (:class:`SAMarkGeneration`), how a candidate is chosen
(:class:`SAMarkSelection`), how a text is detected (:class:`SAMarkDetection`) and the
research switches (:class:`SAMarkResearch`), an extension no product surface shows.

Callers (an experiment's TOML, ``create_scheme``, the CLI) name parameters flat;
:meth:`SAMarkConfig.of`, :meth:`~SAMarkConfig.replace` and :meth:`~SAMarkConfig.split`
route each flat name to its part, and :meth:`~SAMarkConfig.to_dict` gives them back flat.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from typing import ClassVar, TypeVar

import tomllib

from samark.keys.samark_material import NULL_DRAWS, check_cells
from samark.sampling.base import SamplingParams
from samark.schemes.base import SchemeConfig, check
from samark.schemes.samark.selection import MARGIN_REFERENCES, MarginReference, SelectionRule
from samark.schemes.samark.statistics import STATISTICS, Statistic
from samark.schemes.sentence_sampling import SentenceSampling


def load_presets(name: str) -> dict[str, Mapping[str, object]]:
    """The named parameter sets of ``presets/NAME.toml`` (shipped with the package): one
    table of flat parameters per preset."""
    text = files("samark.schemes.samark").joinpath("presets", f"{name}.toml").read_text()
    return {preset: dict(fields) for preset, fields in tomllib.loads(text).items()}


def load_settings(name: str) -> Mapping[str, object]:
    """The flat parameters of ``presets/NAME.toml``, a file of one set."""
    text = files("samark.schemes.samark").joinpath("presets", f"{name}.toml").read_text()
    return dict(tomllib.loads(text))


@dataclass(frozen=True)
class SAMarkPart:
    """One part of :class:`SAMarkConfig` (frozen, validated when built)."""


@dataclass(frozen=True)
class SAMarkGeneration(SentenceSampling, SAMarkPart):
    """What generation draws: the candidate sampling and length (temperature 0.7, top_p
    0.95, 64 tokens a sentence, 12 sentences), N candidates a step and the extra batches
    when none qualifies, the adaptive budget's switch and a flag payload."""

    candidates: int = 64
    # when no candidate survives: draw up to this many extra batches, then fall back
    extra_batches: int = 1
    # adaptive budget (off = the paper's fixed N): draw candidates in chunks and stop once
    # enough match (its knobs are research switches: SAMarkResearch.adaptive_*)
    adaptive: bool = False
    # a payload in the flag pattern (docs/operators.md, "Payload"): flag j + 1 is flag 1
    # times payload_flags[j] (+1: the same sign, -1: the opposite); flag 1, and the flags
    # after the payload's, are drawn per generation (Alg. 1). Detection infers the flags by
    # majority vote, so its p-value is the same, and reads the payload from their relative
    # signs. Flag 1 stays random so that the texts of one payload value still lean to
    # opposite sides and their mean gives nothing away (absolute flags would: measured)
    payload_flags: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check(self.candidates >= 1, "candidates must be >= 1")
        super().__post_init__()
        check(self.extra_batches >= 0, "extra_batches must be >= 0")
        object.__setattr__(self, "payload_flags", tuple(self.payload_flags))
        check(
            all(f in (-1, 1) for f in self.payload_flags),
            "payload_flags must be signs, +1 or -1",
        )


@dataclass(frozen=True)
class SAMarkSelection(SAMarkPart):
    """How a step's candidate is chosen (Alg. 1, lines 5-12): the softmax temperature
    ``epsilon`` (ours: the paper gives none, docs/parameters.md), the diversity and novelty
    weights, the hard filters' thresholds and whether the score saturates with tanh."""

    epsilon: float = 10.0
    lambda_div: float = 0.35
    lambda_nov: float = 0.2
    theta_sem: float = 0.8
    theta_ngram: float = 0.4
    ngram_n: int = 4
    ngram_filter: bool = True
    semantic_filter: bool = True
    tanh_generation: bool = True

    def __post_init__(self) -> None:
        check(self.epsilon > 0, "epsilon must be > 0")
        check(self.lambda_div >= 0 and self.lambda_nov >= 0, "lambda weights must be >= 0")
        check(0 < self.theta_sem <= 1, "theta_sem must be in (0, 1]")
        check(0 < self.theta_ngram <= 1, "theta_ngram must be in (0, 1]")
        check(self.ngram_n >= 1, "ngram_n must be >= 1")


@dataclass(frozen=True)
class SAMarkDetection(SAMarkPart):
    """How a text is detected (Alg. 2): kappa, the statistic, the public null draws its
    p-value is exact against, the level and an optional topic centring. What
    :class:`~samark.schemes.samark.detector.SAMarkDetector` is built from."""

    kappa: float = 30.0
    tanh_detection: bool = True
    # the product's statistic, the one every door (Python, CLI, server, rings) detects with:
    # the scan keeps its power when human sentences are mixed in and loses little elsewhere,
    # at the same exact FPR (docs/statistics.md). The paper's z (Alg. 2) is the scheme's
    # "paper" preset (SAMark.presets), which the experiments' rows start from
    statistic: Statistic = "scan"
    n_null: int = 999
    null_seed: int = 0
    # with keyed cells, the public null draws texts are detected against: "full"
    # (d-dimensional cell sets), "projected" (their exact law in each text's span,
    # samark.schemes.samark.null_projection: a 64-key ring in seconds), or None: what the
    # key names ("projected" for a key written since 2026-11-28, "full" before). Another
    # setting than the key's gives its texts other p-values (as exact): a research knob
    null_draws: str | None = None
    # sequential null draws (Besag and Clifford): with draws in each text's span, a text's
    # draws stop once every key's statistic has been reached this many times, and its
    # p-values are the sequential ones (valid; equal to the fixed ones below h / n_null).
    # Unmarked text costs a few blocks of draws instead of all: a 1,000-key ring's human
    # text in a fraction of a second. None: every draw (the recorded p-values)
    null_stop: int | None = None
    alpha: float = 0.01
    # topic centring at detection (samark.schemes.samark.topic_centring): a reference
    # file built from the operator's own human text (``samark centring build``), or None
    # (the paper: none)
    centring: str | None = None

    def __post_init__(self) -> None:
        check(self.kappa > 0, "kappa must be > 0")
        check(
            self.null_draws is None or self.null_draws in NULL_DRAWS,
            f"null_draws must be one of {NULL_DRAWS} (or None: the key's)",
        )
        check(
            self.null_stop is None or self.null_stop >= 1,
            "null_stop must be at least 1 (or None: every null draw)",
        )
        check(self.statistic in STATISTICS, f"statistic must be one of {STATISTICS}")
        check(self.n_null >= 19, "n_null must be >= 19")
        check(0 < self.alpha < 1, "alpha must be in (0, 1)")
        check(
            self.centring is None or (isinstance(self.centring, str) and bool(self.centring)),
            "centring must be the path of a centring reference file (or None)",
        )


@dataclass(frozen=True)
class SAMarkResearch(SAMarkPart):
    """The research switches: levers the studies measured (docs/parameters.md, "Budget:
    pruning, steering and stopping"; docs/results), set by experiments and never shown by
    the CLI or the server. Every one is off (the paper's behaviour) by default."""

    # the selection score's kappa, if not ``kappa`` (the paper uses one kappa for both): a
    # smaller one keeps tanh(kappa r_j cos_j) from saturating, so the pick keeps preferring
    # larger margins (the "margin" variant in docs/parameters.md). Detection uses ``kappa``
    generation_kappa: float | None = None
    # what the selection score measures a channel's margin from: "zero" (the paper's
    # tanh(kappa r_j cos_j)) or "pool", the mean flag-signed cosine of the step's candidates
    # (tanh(kappa (r_j cos_j - mean))). Once the text's topic has carried the pool to the
    # flag side, the paper's terms saturate and the pick stops preferring larger margins;
    # "pool" keeps the first step's pressure at every step (docs/parameters.md)
    margin_reference: MarginReference = "zero"
    # with keyed cells: weigh each candidate's watermark score by the chance that its
    # sentence stays in its cell when paraphrased, Phi(margin / cell_margin_sd), where the
    # margin is its cosine to its cell's anchor minus that to the runner-up's (a sentence
    # that leaves its cell under paraphrase is scored on another cell's pivots and carries
    # no evidence); None: off (the default). 0.016 is the margin's measured move under
    # paraphrase (docs/results/2026-11-28-cost, "A cell-aware pick")
    cell_margin_sd: float | None = None
    # the adaptive budget's knobs (SAMarkGeneration.adaptive): draw ``adaptive_chunk``
    # candidates at a time; stop once ``adaptive_matches`` matches are saturated (every
    # channel's tanh(kappa r_j cos_j) >= ``adaptive_saturation``), or, after
    # ``adaptive_patience`` candidates, once any candidate matches; never beyond fixed N
    adaptive_chunk: int = 8
    adaptive_matches: int = 1
    adaptive_saturation: float = 0.3
    adaptive_patience: int = 16
    # semantic steering: a logit bias of this strength on whole-word tokens that lean
    # toward the step's flag region (0: off, the paper); the ``steer_words`` most frequent
    # whole-word tokens are embedded once per generator
    steer: float = 0.0
    steer_words: int = 8000
    # row pruning: once the candidates have decoded ``prune_at`` tokens, only the
    # ``prune_keep`` rows whose partial text scores best against the pivots decode on (0:
    # off, the paper). A departure from Alg. 1: the pick is among those rows and the ones
    # that ended a sentence earlier
    prune_at: int = 0
    prune_keep: int = 4
    # research records: each step also records where its margin came from (the pool's and
    # the chosen sentence's flag-signed cosines, the running text's topic offset). They
    # derive from the secret pivots and flags, so only experiments turn this on; it changes
    # no choice
    record_signal: bool = False

    def __post_init__(self) -> None:
        check(
            self.generation_kappa is None or self.generation_kappa > 0,
            "generation_kappa must be > 0 (or None: the detection kappa)",
        )
        check(
            self.margin_reference in MARGIN_REFERENCES,
            f"margin_reference must be one of {MARGIN_REFERENCES}",
        )
        check(self.adaptive_chunk >= 1, "adaptive_chunk must be >= 1")
        check(self.adaptive_matches >= 1, "adaptive_matches must be >= 1")
        check(0 <= self.adaptive_saturation < 1, "adaptive_saturation must be in [0, 1)")
        check(
            self.cell_margin_sd is None or self.cell_margin_sd > 0,
            "cell_margin_sd must be positive (or None: off)",
        )
        check(self.adaptive_patience >= 1, "adaptive_patience must be >= 1")
        check(self.steer >= 0, "steer must be >= 0")
        check(self.steer_words >= 16, "steer_words must be >= 16")
        check(self.prune_at >= 0, "prune_at must be >= 0 (0: no pruning)")
        check(self.prune_keep >= 1, "prune_keep must be >= 1")


Part = TypeVar("Part", bound=SAMarkPart)


def _changed(part: Part, whole: object, fields: Mapping[str, object]) -> Part:
    """``part``, or the ``whole`` part given in its stead, with the flat ``fields``."""
    if whole is not None:
        if not isinstance(whole, type(part)):
            raise TypeError(f"expected a {type(part).__name__}, got {type(whole).__name__}")
        part = whole
    return dataclasses.replace(part, **fields) if fields else part


#: the config's parts: attribute -> class
PARTS: dict[str, type[SAMarkPart]] = {
    "generation": SAMarkGeneration,
    "selection": SAMarkSelection,
    "detection": SAMarkDetection,
    "research": SAMarkResearch,
}
#: the watermark's shape, which both sides read: on the config itself ("")
SHAPE = ("channels", "cells")
#: every flat parameter name -> the part that holds it, in the order the flat config had
#: them (``to_dict`` keeps it)
FLAT: dict[str, str] = {
    name: part
    for names, part in (
        (("channels", "cells"), ""),
        (("kappa",), "detection"),
        (("generation_kappa", "margin_reference", "cell_margin_sd"), "research"),
        (
            ("candidates", "temperature", "top_p", "max_sentence_tokens", "max_new_sentences"),
            "generation",
        ),
        (tuple(f.name for f in dataclasses.fields(SAMarkSelection)), "selection"),
        (("extra_batches", "adaptive"), "generation"),
        (
            ("adaptive_chunk", "adaptive_matches", "adaptive_saturation", "adaptive_patience"),
            "research",
        ),
        (("steer", "steer_words", "prune_at", "prune_keep", "record_signal"), "research"),
        (("payload_flags",), "generation"),
        (
            tuple(f.name for f in dataclasses.fields(SAMarkDetection) if f.name != "kappa"),
            "detection",
        ),
    )
    for name in names
}
#: the flat names of the research switches (what no product surface may offer)
RESEARCH_FIELDS = frozenset(f.name for f in dataclasses.fields(SAMarkResearch))


@dataclass(frozen=True)
class SAMarkConfig(SchemeConfig):
    """Every knob of SAMark generation (paper Alg. 1) and detection (Alg. 2), in parts.

    Defaults are the paper's (c=2, N=64, kappa=30, lambda_div=0.35, lambda_nov=0.2,
    theta_sem=0.8, theta_ngram=0.4 with n=4, temperature 0.7, top_p 0.95, 12 sentences),
    but for the statistic (the product's scan; the paper's z is the "paper" preset).
    Build one from flat names with :meth:`of`; read them in their part
    (``config.detection.statistic``), or flat with :meth:`to_dict`.
    """

    #: SAMark-dagger's settings (the paper's "All Off" row: presets/dagger.toml)
    DAGGER: ClassVar[Mapping[str, object]] = load_settings("dagger")

    channels: int = 2
    # keyed semantic cells (samark.schemes.samark.cells): 0 is the paper's static pivots;
    # M >= 2 cuts meaning space into M keyed cells, each with its own pivots and flags, and
    # scores every sentence on its own cell's (one random sign a generation instead of
    # c random flags). Not with payload_flags, steering or row pruning; keyrings take it.
    # None: the scheme's default, 0 for the paper's ``samark`` and the key's own cells
    # (``key.samark.cells``: 64 for a key made by ``samark keygen`` now, 16 for one made
    # on 2026-11-27, 0 for a key written before) for ``samark-layered``
    cells: int | None = None
    generation: SAMarkGeneration = field(default_factory=SAMarkGeneration)
    selection: SAMarkSelection = field(default_factory=SAMarkSelection)
    detection: SAMarkDetection = field(default_factory=SAMarkDetection)
    research: SAMarkResearch = field(default_factory=SAMarkResearch)

    def __post_init__(self) -> None:
        check(self.channels >= 1, "channels must be >= 1")
        if self.cells is not None:
            check_cells(self.cells)
        for name, part in PARTS.items():
            check(isinstance(getattr(self, name), part), f"{name} must be a {part.__name__}")
        check(
            len(self.generation.payload_flags) < self.channels,
            f"payload_flags sets at most channels - 1 ({self.channels - 1}) flags",
        )
        self.refuse_what_cells_cannot_do(self.cells or 0)

    @classmethod
    def of(cls, **flat: object) -> SAMarkConfig:
        """The defaults with the flat parameters ``flat`` (``SAMarkConfig.of(candidates=8,
        statistic="z")``), each routed to its part."""
        return cls().replace(**flat)

    def replace(self, **changes: object) -> SAMarkConfig:
        """This config with ``changes``: flat parameter names (routed to their parts) or
        whole parts (``detection=SAMarkDetection(...)``)."""
        unknown = [k for k in changes if k not in FLAT and k not in PARTS]
        if unknown:
            raise TypeError(f"SAMarkConfig has no parameter {', '.join(map(repr, unknown))}")

        def fields_of(part: str) -> dict[str, object]:
            return {k: v for k, v in changes.items() if FLAT.get(k) == part}

        channels, cells = changes.get("channels", self.channels), changes.get("cells", self.cells)
        if not isinstance(channels, int) or not (cells is None or isinstance(cells, int)):
            raise ValueError("channels and cells must be integers (cells: or None)")
        return SAMarkConfig(
            channels=channels,
            cells=cells,
            generation=_changed(
                self.generation, changes.get("generation"), fields_of("generation")
            ),
            selection=_changed(self.selection, changes.get("selection"), fields_of("selection")),
            detection=_changed(self.detection, changes.get("detection"), fields_of("detection")),
            research=_changed(self.research, changes.get("research"), fields_of("research")),
        )

    def to_dict(self) -> dict[str, object]:
        """Every parameter, flat (the names callers and experiments give)."""
        return {
            name: getattr(getattr(self, part) if part else self, name)
            for name, part in FLAT.items()
        }

    @classmethod
    def split(
        cls, params: Mapping[str, object], base: SAMarkConfig | None = None
    ) -> tuple[SAMarkConfig, dict[str, object]]:
        """(this config: ``base`` or the defaults, with the flat parameters ``params``
        names; the other params: models and engines)."""
        if base is not None and not isinstance(base, cls):
            raise TypeError(f"config must be a {cls.__name__}, got {type(base).__name__}")
        given = {k: v for k, v in params.items() if k in FLAT}
        rest = {k: v for k, v in params.items() if k not in FLAT}
        return (base or cls()).replace(**given), rest

    def refuse_what_cells_cannot_do(self, cells: int) -> None:
        """Refuse what keyed cells cannot do, with ``cells`` the scheme's resolved value
        (the key's, where ``cells`` is None)."""
        r = self.research
        if cells:
            how = f"{cells} keyed cells" + (" (the key's)" if self.cells is None else "")
            check(
                not self.generation.payload_flags,
                f"payload_flags needs static pivots, not {how}: cells=0",
            )
            check(r.steer == 0, f"steer needs static pivots, not {how}: cells=0")
            check(r.prune_at == 0, f"prune_at needs static pivots, not {how}: cells=0")
            check(
                r.margin_reference == "zero",
                f"margin_reference 'pool' needs static pivots, not {how}: cells=0",
            )
        else:
            check(r.cell_margin_sd is None, "cell_margin_sd needs keyed cells (cells >= 2)")

    @property
    def selection_kappa(self) -> float:
        """The kappa of the selection score: ``generation_kappa``, else ``kappa``."""
        g = self.research.generation_kappa
        return self.detection.kappa if g is None else g

    @property
    def selection_rule(self) -> SelectionRule:
        """What :func:`~samark.schemes.samark.selection.select` reads at each step: the
        selection part with the selection kappa and the research switches it takes."""
        s = self.selection
        return SelectionRule(
            kappa=self.selection_kappa,
            epsilon=s.epsilon,
            lambda_div=s.lambda_div,
            lambda_nov=s.lambda_nov,
            theta_sem=s.theta_sem,
            theta_ngram=s.theta_ngram,
            ngram_n=s.ngram_n,
            ngram_filter=s.ngram_filter,
            semantic_filter=s.semantic_filter,
            use_tanh=s.tanh_generation,
            saturation=self.research.adaptive_saturation,
            margin_reference=self.research.margin_reference,
        )

    # what the sentence loop reads of every sentence-level config (SentenceConfig)
    @property
    def sampling(self) -> SamplingParams:
        return self.generation.sampling

    @property
    def max_new_sentences(self) -> int:
        return self.generation.max_new_sentences

    @property
    def alpha(self) -> float:
        return self.detection.alpha

    @classmethod
    def dagger(cls, **overrides: object) -> SAMarkConfig:
        """SAMark-dagger: diversity-aware filtering and soft regularisation all off
        (the paper's "All Off" ablation row)."""
        return cls.of(**{**cls.DAGGER, **overrides})
