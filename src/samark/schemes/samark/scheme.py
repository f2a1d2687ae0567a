"""SAMark: self-anchored sentence-level watermarking (paper Alg. 1 and 2)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Self, Unpack, cast

import numpy as np
from scipy.special import ndtr

from samark.detection_result import Detection
from samark.embed import Embedder
from samark.errors import EmptyTextError, SamarkError
from samark.keys import WatermarkKey
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import Engine, LogitsBias, RowOptions, engine_abilities
from samark.schemes.base import (
    SharedResources,
    V,
    Watermark,
    register_scheme,
    require_key,
)
from samark.schemes.features import TextFeatures
from samark.schemes.ring_scores import RingScoring
from samark.schemes.samark.config import SAMarkConfig, load_presets
from samark.schemes.samark.detector import SAMarkDetector
from samark.schemes.samark.selection import PartialScore, StepChoice, pool_reference, select
from samark.schemes.samark.topic_centring import NeighbourCentring
from samark.schemes.sentence_loop import (
    Draw,
    Pick,
    SentenceLevelWatermark,
    SentenceModels,
    sentence_models,
)
from samark.text import ngrams, words


@register_scheme("samark")
class SAMark(SentenceLevelWatermark["_Step"]):
    """SAMark with a secret ``key``.

    The embedder defaults to the one the key was made for; the generator (candidate
    engine) is loaded on first ``generate`` only, so detection never loads an LM.
    """

    name = "samark"
    #: the paper's experiments detect with its z (Alg. 2); the product's default is scan
    #: (presets/samark.toml)
    presets: ClassVar[Mapping[str, Mapping[str, object]]] = load_presets("samark")

    def __init__(
        self,
        key: WatermarkKey,
        config: SAMarkConfig | None = None,
        *,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        c = config or SAMarkConfig()
        # the config as given (cells None: the scheme's default, resolved here per key)
        cells = self.default_cells(key) if c.cells is None else c.cells
        c.refuse_what_cells_cannot_do(cells)
        super().__init__(key, c, embedder=embedder, engine=engine, generator=generator)
        self.config: SAMarkConfig = c
        self._pivots = key.samark.pivots(self.embedder.dim, c.channels)
        if engine is not None:
            _check_engine(engine, c)
        centring = None
        if c.detection.centring is not None:
            fingerprint = self.embedder.identity.fingerprint
            centring = NeighbourCentring.load(c.detection.centring, fingerprint=fingerprint)
        self.detector = SAMarkDetector.from_config(
            key, self.embedder, c, cells=cells, centring=centring
        )

    @classmethod
    def default_cells(cls, key: WatermarkKey) -> int:
        """The keyed cells of a config that leaves them out: the paper's static pivots."""
        return 0

    @property
    def cells(self) -> int:
        """The keyed semantic cells in use (0: static pivots), resolved from the key where
        the config left them out."""
        return self.detector.cells

    def __repr__(self) -> str:
        return f"SAMark(key={self.key!r}, embedder={self.embedder.name!r})"

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Self:
        built, rest = samark_config_from_params(shared, params)
        return cls(require_key(cls.name, key), config=built, **sentence_models(shared, rest))

    def detect(self, text: str) -> Detection:
        return self.detector.detect(text)

    def detect_many(self, texts: Sequence[str]) -> list[Detection | None]:
        """``detect`` on each text with one batched embedding call; ``None`` for a text
        without a sentence."""
        return self.detector.detect_many(texts)

    def detect_prepared(self, features: Sequence[TextFeatures]) -> list[Detection | EmptyTextError]:
        """Each prepared text scored on its embeddings (computed once, for every key)."""
        return self.detector.detect_prepared(features)

    # ---------- in a keyring ----------
    @property
    def flag_channels(self) -> int:
        """Channels whose flags are drawn per generation (a flag payload's room): none with
        keyed cells, whose flags are the key's."""
        return 0 if self.cells else self.config.channels

    @classmethod
    def ring_params(cls, params: Mapping[str, V], keys: int, alpha: float) -> dict[str, V | int]:
        """Never fewer null pivot sets than the ring's smallest p-values need."""
        from samark.schemes.samark.ring_scoring import ring_null_count

        given = params.get("n_null")
        need = ring_null_count(keys, alpha)
        if not (given is None or isinstance(given, int | float | str)):
            raise TypeError(f"n_null must be a number, got {type(given).__name__}")
        return {**params, "n_null": need if given is None else max(int(given), need)}

    @classmethod
    def ring_scoring(cls, schemes: Sequence[Watermark]) -> RingScoring | None:
        """The max-statistic, where the keys share one pivot law and settings."""
        from samark.schemes.samark.ring_scoring import MaxStatisticRing, share_null

        detectors = [cast(SAMark, s).detector for s in schemes]
        return MaxStatisticRing(detectors) if share_null(detectors) else None

    def detector_id(self) -> str:
        c, d = self.config, self.config.detection
        return (
            f"samark/{self.key.key_id}/{self.embedder.name}/c{c.channels}/k{d.kappa}"
            f"/tanh{int(d.tanh_detection)}/{d.statistic}/null{d.n_null}.{d.null_seed}"
            + (f"/cells{self.cells}" if self.cells else "")
            + ("" if d.null_stop is None else f"/seq{d.null_stop}")
            + (
                ""
                if self.detector.centring is None
                else f"/centring{self.detector.centring.sha256[:16]}"
            )
        )

    # ---------- the sentence loop's hooks (Alg. 1) ----------
    def begin(self, prompt: str, seeder: np.random.Generator) -> _Step:
        """The flag pattern R (from ``seeder``: OS randomness unless the caller seeded it;
        never stored; a payload sets flags 2.. relative to flag 1) and the
        context the diversity terms compare against."""
        c = self.config
        payload = c.generation.payload_flags
        # drawn even where a payload sets them, so that a payload changes no other draw
        flags = seeder.choice([-1.0, 1.0], size=c.channels)
        if payload:  # relative to flag 1, which stays random
            flags[1 : 1 + len(payload)] = flags[0] * np.asarray(payload)
        rng = np.random.default_rng(seeder.integers(2**63))
        context_words = words(prompt)
        steer = self._steering(flags) if c.research.steer > 0 else None
        return _Step(
            steer=steer,
            flags=flags,
            rng=rng,
            context_words=context_words,
            context_ngrams=set(ngrams(context_words, c.selection.ngram_n)),
            vocabulary=set(context_words),
            history=np.zeros((0, self.embedder.dim)),
        )

    @functools.cached_property
    def _steer_words(self) -> tuple[np.ndarray, np.ndarray]:
        """The generator's whole-word tokens and their embeddings (read once per scheme,
        not once per generation)."""
        from samark.schemes.samark.steering import word_embeddings

        engine = self.engine
        _check_engine(engine, self.config)
        if engine.tokenizer is None:  # an engine that steers runs the generator here
            raise SamarkError(f"steering needs the generator's tokenizer; {engine!r} has none")
        return word_embeddings(
            self.embedder, engine.tokenizer, engine.name, self.config.research.steer_words
        )

    def _steering(self, flags: np.ndarray) -> LogitsBias:
        """This generation's steering bias (``SAMarkResearch.steer``), combined with the
        scheme's token watermark if it has one."""
        from samark.schemes.samark.steering import SemanticSteer, SummedBias

        ids, emb = self._steer_words
        steer = SemanticSteer(ids, emb, self._pivots, flags, self.config.research.steer)
        return steer if self.token_layer is None else SummedBias(self.token_layer, steer)

    def sample_options(self, state: _Step) -> RowOptions:
        options = super().sample_options(state)
        if state.steer is not None:
            options = dataclasses.replace(options, token_layer=state.steer)
        c = self.config
        if c.research.prune_at:
            prune = PartialScore(
                c.research.prune_at,
                c.research.prune_keep,
                self.embedder,
                self._pivots,
                state.flags,
                c.selection_kappa,
            )
            options = dataclasses.replace(options, prune=prune)
        return options

    def draws(self, state: _Step) -> list[Draw]:
        """Fixed N (the paper): N, then up to ``extra_batches`` more N while nothing
        matched. Adaptive: the same budget in chunks of ``adaptive_chunk``; drawing stops
        early once enough matches are saturated."""
        g = self.config.generation
        chunk = self.config.research.adaptive_chunk if g.adaptive else g.candidates
        plan: list[Draw] = []
        for attempt in range(1 + g.extra_batches):
            left = g.candidates
            while left > 0:
                size = min(chunk, left)
                left -= size
                plan.append(Draw(size, extra=attempt > 0, boundary=left == 0))
        return plan

    def pick(self, state: _Step, texts: list[str], pool: np.ndarray) -> Pick | None:
        c = self.config
        cells = self.detector.key_cells
        choice = select(
            texts,
            pool,
            self._pivots,
            state.flags,
            state.context_ngrams,
            state.vocabulary,
            state.history,
            c.selection_rule,
            signed=None if cells is None else cells.signed(pool)[0] * state.flags[0],
            stay=None
            if cells is None or c.research.cell_margin_sd is None
            else ndtr(cells.cell_margin(pool)[0] / c.research.cell_margin_sd),
            rng=state.rng,
        )
        return None if choice is None else Pick(choice.index, choice.kind, choice)

    def enough(self, state: _Step, pick: Pick, draw: Draw, drawn: int) -> bool:
        r, choice = self.config.research, _step_choice(pick)
        if self.config.generation.adaptive and (
            choice.n_saturated >= r.adaptive_matches
            or (drawn >= r.adaptive_patience and choice.n_matched)
        ):
            return True
        return bool(draw.boundary and choice.n_matched)

    def chosen(
        self, state: _Step, sentence: str, embedding: np.ndarray, pool: np.ndarray, pick: Pick
    ) -> dict[str, object]:
        n, choice = self.config.selection.ngram_n, _step_choice(pick)
        previous = state.history
        state.history = np.vstack([previous, embedding])
        new_words = words(sentence)
        state.context_words.extend(new_words)
        # only the n-grams that end in the new sentence are new
        state.context_ngrams.update(ngrams(state.context_words[-(len(new_words) + n - 1) :], n))
        state.vocabulary.update(new_words)
        step: dict[str, object] = {
            "kind": choice.kind,
            "candidates": choice.n_candidates,
            "ngram_pass": choice.n_ngram_pass,
            "semantic_pass": choice.n_semantic_pass,
            "matched": choice.n_matched,
            "saturated": choice.n_saturated,
            "matched_terms": choice.matched_terms,
        }
        if self.config.research.record_signal and not self.cells:
            step.update(step_signal(pool, pick.index, previous, self._pivots, state.flags))
        return step


def _step_choice(pick: Pick) -> StepChoice:
    """SAMark's own account of a pick (what its ``pick`` put there)."""
    if not isinstance(pick.detail, StepChoice):
        raise TypeError(f"SAMark's pick carries a StepChoice, got {type(pick.detail).__name__}")
    return pick.detail


def _check_engine(engine: Engine, c: SAMarkConfig) -> None:
    """Steering and row pruning run inside the local transformers engine only."""
    can = engine_abilities(engine)
    wanted = [
        name
        for name, on, able in (
            ("steer > 0", c.research.steer > 0, can.steering),
            ("prune_at", bool(c.research.prune_at), can.prune),
        )
        if on and not able
    ]
    if wanted:
        them = "them" if len(wanted) > 1 else "it"
        raise SamarkError(
            f"{' and '.join(wanted)} {'need' if len(wanted) > 1 else 'needs'} the local "
            f"transformers engine; {engine!r} cannot apply {them} (vLLM's samark processor "
            "applies the token layer and sentence ends only)"
        )


@dataclass
class _Step:
    """One SAMark generation's running state."""

    steer: LogitsBias | None
    flags: np.ndarray
    rng: np.random.Generator
    context_words: list[str]
    context_ngrams: set[tuple[str, ...]]
    vocabulary: set[str]
    history: np.ndarray


def step_signal(
    pool: np.ndarray,
    chosen: int,
    history: np.ndarray,
    pivots: np.ndarray,
    flags: np.ndarray,
) -> dict[str, list[float]]:
    """Where one step's margin comes from, per channel, as cosines signed by the step's
    flags (positive = on the flag side): the candidate pool's mean and spread, the chosen
    sentence, and the topic offset of the text chosen so far (its mean embedding; empty
    before the first sentence). Research records only: they derive from the key."""
    cosines = pool @ pivots.T  # (candidates, channels)
    signed = cosines * flags
    out = {
        "pool_mean": pool_reference(cosines, flags),  # the "pool" margin's reference
        "pool_sd": signed.std(axis=0),
        "chosen": signed[chosen],
    }
    if len(history):
        mean = history.mean(axis=0)
        out["topic"] = (mean @ pivots.T) * flags
    return {f"signal_{k}": [round(float(x), 5) for x in v] for k, v in out.items()}


def samark_config_from_params(
    shared: SharedResources | None, params: Mapping[str, object]
) -> tuple[SAMarkConfig, dict[str, object]]:
    """(the config: ``params``'s ``config`` or the defaults, with the flat parameters
    ``params`` names; the other params), the research records on where ``shared`` asks."""
    rest = dict(params)
    config = rest.pop("config", None)
    if not (config is None or isinstance(config, SAMarkConfig)):
        raise TypeError(f"config must be a SAMarkConfig, got {type(config).__name__}")
    built, rest = SAMarkConfig.split(rest, config)
    if shared is not None and shared.research_records:
        built = built.replace(record_signal=True)
    return built, rest


@register_scheme("samark-dagger")
class SAMarkDagger(SAMark):
    """SAMark-dagger: SAMark with the paper's dagger settings (``SAMarkConfig.DAGGER``)
    over whatever config it is given."""

    name = "samark-dagger"

    def __init__(
        self,
        key: WatermarkKey,
        config: SAMarkConfig | None = None,
        **models: Unpack[SentenceModels],
    ) -> None:
        super().__init__(key, (config or SAMarkConfig()).replace(**SAMarkConfig.DAGGER), **models)
        self.detector.label = self.name
