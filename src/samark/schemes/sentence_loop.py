"""The sentence-level generation loop every sentence-level scheme shares (SAMark, SemStamp,
k-SemStamp): per step, draw candidate next sentences from a :class:`Engine`,
embed them, let the scheme pick one (or ask for more), append it, repeat.

A scheme supplies four things: the draws of a step, the pick among the candidates so far,
what it keeps of a chosen sentence, and its per-generation state. The loop keeps the
rest: the context, the seeds, token and time accounting, progress and streaming callbacks,
and the :class:`Generation` record.
"""

from __future__ import annotations

import abc
import secrets
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypedDict, TypeVar, cast

import numpy as np

from samark.embed import Embedder, load_embedder
from samark.keys import WatermarkKey
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import Engine, LogitsBias, RowOptions, SamplingParams
from samark.schemes.base import (
    Generation,
    ProgressCallback,
    SchemeConfig,
    SentenceCallback,
    SharedResources,
    Watermark,
    check,
    require_key,
)
from samark.schemes.sentence_sampling import SentenceSampling


@dataclass(frozen=True)
class Draw:
    """One candidate draw of a step: its size, whether it is an extra (retry) batch, and
    whether it ends a full batch (a natural point to stop once something qualifies)."""

    size: int
    extra: bool = False
    boundary: bool = True


@dataclass(frozen=True)
class Pick:
    """A scheme's choice among a step's candidates so far."""

    index: int
    #: what the fallback counts call it ("matched" is no fallback)
    kind: str = "matched"
    #: the scheme's own account of the choice (read by its ``enough`` and ``chosen``)
    detail: object = None


class SentenceConfig(Protocol):
    """What the sentence loop reads of a scheme's config."""

    @property
    def sampling(self) -> SamplingParams: ...

    @property
    def max_new_sentences(self) -> int: ...

    @property
    def alpha(self) -> float: ...


#: a scheme's state during one generation (what its ``begin`` returns)
S = TypeVar("S")


class SentenceModels(TypedDict, total=False):
    """The models a sentence-level scheme's constructor takes beside its key and config."""

    embedder: Embedder | None
    engine: Engine | None
    generator: str


def sentence_models(shared: SharedResources | None, params: Mapping[str, object]) -> SentenceModels:
    """The models ``params`` names (``embedder``, ``engine``, ``generator``), the shared
    ones where it names none; a ``TypeError`` for any other parameter or a wrong type."""
    stray = sorted(set(params) - {"embedder", "engine", "generator"})
    if stray:
        raise TypeError(f"unexpected parameter(s): {', '.join(stray)}")
    models: SentenceModels = {}
    if shared is not None:
        models["embedder"], models["generator"] = shared.embedder, shared.generator
    embedder, generator = params.get("embedder"), params.get("generator")
    if "embedder" in params:
        if not (embedder is None or isinstance(embedder, Embedder)):
            raise TypeError(f"embedder must be an Embedder, got {type(embedder).__name__}")
        models["embedder"] = embedder
    if "generator" in params:
        if not isinstance(generator, str):
            raise TypeError(f"generator must be a model name, got {type(generator).__name__}")
        models["generator"] = generator
    if "engine" in params:  # any Engine (a protocol: not checked here)
        models["engine"] = cast("Engine | None", params["engine"])
    return models


class SentenceLevelWatermark(Watermark, Generic[S]):
    """A scheme that writes sentence by sentence from a candidate pool, with per-generation
    state of type ``S``.

    ``__init__`` holds what every such scheme has: its embedder (the key's, checked), the
    candidate engine (the local generator, loaded on first use, unless one is given), the
    sampling settings, the default length and the detector's alpha."""

    #: the config class its flat parameters fill (a family that builds otherwise
    #: overrides ``from_params``)
    config_class: type[SentenceSamplingConfig]

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Self:
        """The scheme's config from flat ``params`` (over ``config=``), the other
        parameters with the shared embedder and generator."""
        config, models = split_sentence_params(cls.config_class, shared, params)
        return cls(require_key(cls.name, key), config, **models)

    key: WatermarkKey
    embedder: Embedder
    config: SentenceConfig
    #: fallback kinds that are not fallbacks (left out of ``Generation.fallbacks``)
    normal_kinds: tuple[str, ...] = ("matched",)
    #: a token watermark the candidate engine applies on every row (None: plain sampling)
    token_layer: LogitsBias | None = None

    def __init__(
        self,
        key: WatermarkKey,
        config: SentenceConfig,
        *,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        if config.max_new_sentences < 1 or not 0 < config.alpha < 1:
            raise ValueError("need max_new_sentences >= 1 and 0 < alpha < 1")
        self.config = config
        self.embedder = embedder or load_embedder(key.embedder.name)
        key.check_embedder(self.embedder.identity)
        self.key = key
        self._sampling = config.sampling
        self._engine = engine
        self._generator = generator

    @property
    def max_new_sentences(self) -> int:
        return self.config.max_new_sentences

    @property
    def alpha(self) -> float:
        return self.config.alpha

    @property
    def engine(self) -> Engine:
        """Its candidate engine (the local generator's, loaded on first use, unless one
        was given)."""
        if self._engine is None:
            from samark.sampling.transformers_engine import load_transformers_engine

            self._engine = load_transformers_engine(self._generator)
        return self._engine

    @property
    def sampling(self) -> SamplingParams:
        return self._sampling

    @abc.abstractmethod
    def begin(self, prompt: str, seeder: np.random.Generator) -> S:
        """The state of one generation (drawn from ``seeder`` before any candidate)."""

    @abc.abstractmethod
    def draws(self, state: S) -> list[Draw]:
        """The candidate draws of one step, in order; the loop stops early on ``Pick.stop``."""

    @abc.abstractmethod
    def pick(self, state: S, texts: list[str], pool: np.ndarray) -> Pick | None:
        """The choice among every candidate of this step so far (``pool``: their
        embeddings); None if none can be taken."""

    @abc.abstractmethod
    def enough(self, state: S, pick: Pick, draw: Draw, drawn: int) -> bool:
        """Whether to stop drawing, after ``draw`` (``drawn`` candidates in all) with the
        current ``pick``."""

    @abc.abstractmethod
    def chosen(
        self, state: S, sentence: str, embedding: np.ndarray, pool: np.ndarray, pick: Pick
    ) -> dict[str, object]:
        """Update ``state`` with the chosen sentence; the step's record (never key
        material unless the scheme's research records are on)."""

    def sample_options(self, state: S) -> RowOptions:
        """What the engine applies to this generation's candidate rows: the scheme's
        token watermark (``token_layer``) by default; SAMark adds its steering bias and
        row pruning when configured."""
        return RowOptions(token_layer=self.token_layer)

    def embed_unique(self, texts: list[str]) -> np.ndarray:
        """Embeddings of ``texts``, each distinct sentence embedded once."""
        unique = list(dict.fromkeys(t.strip() for t in texts))
        table = dict(zip(unique, self.embedder.encode(unique), strict=True))
        return np.array([table[t.strip()] for t in texts])

    def generate(
        self,
        prompt: str,
        *,
        max_new_sentences: int | None = None,
        seed: int | None = None,
        progress: ProgressCallback | None = None,
        on_sentence: SentenceCallback | None = None,
    ) -> Generation:
        """Continue ``prompt`` with up to ``max_new_sentences`` sentences.

        ``on_sentence`` sees each sentence as it is chosen (a server streams it); when it
        returns True the generation ends there (a token budget). With a ``seed`` the whole
        run is reproducible; without one, it draws from OS randomness.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be str, got {type(prompt).__name__}")
        total = max_new_sentences or self.max_new_sentences
        seeder = np.random.default_rng(seed if seed is not None else secrets.randbits(128))
        state = self.begin(prompt, seeder)
        start = time.perf_counter()
        context = prompt
        chosen: list[str] = []
        fallbacks: Counter[str] = Counter()
        steps: list[dict[str, object]] = []
        tokens_sampled = extra = 0
        sampling_s = embedding_s = 0.0
        options = self.sample_options(state)
        for t in range(total):
            texts: list[str] = []
            embs: list[np.ndarray] = []
            pool = np.zeros((0, 0))
            pick: Pick | None = None
            drawn = 0
            for draw in self.draws(state):
                drawn += draw.size
                batch = self.engine.sample(
                    context,
                    draw.size,
                    self.sampling,
                    seed=int(seeder.integers(2**62)),
                    token_layer=options.token_layer,
                    prune=options.prune,
                )
                tokens_sampled += batch.tokens_sampled
                sampling_s += batch.seconds
                extra += draw.extra
                new = batch.complete
                if new:
                    t0 = time.perf_counter()
                    embs.append(self.embed_unique(new))
                    embedding_s += time.perf_counter() - t0
                    texts.extend(new)
                    pool = np.concatenate(embs)
                    pick = self.pick(state, texts, pool)
                if pick is not None and self.enough(state, pick, draw, drawn):
                    break
            if pick is None:  # no complete sentence at all
                fallbacks["exhausted"] += 1
                break
            fallbacks[pick.kind] += 1
            sentence = texts[pick.index]
            step = self.chosen(state, sentence, pool[pick.index], pool, pick)
            chosen.append(sentence)
            context += sentence
            steps.append(step)
            if progress:
                progress(t + 1, total)
            if on_sentence is not None and on_sentence(sentence, step):
                break
        output_tokens = sum(self.engine.count_tokens(s) for s in chosen)
        for kind in self.normal_kinds:
            fallbacks.pop(kind, None)
        return Generation(
            scheme=self.name,
            prompt=prompt,
            text="".join(chosen).strip(),
            sentences=tuple(s.strip() for s in chosen),
            tokens_sampled=tokens_sampled,
            output_tokens=output_tokens,
            seconds=time.perf_counter() - start,
            sampling_seconds=sampling_s,
            embedding_seconds=embedding_s,
            fallbacks=dict(fallbacks),
            extra_batches=extra,
            steps=tuple(steps),
        )


@dataclass(frozen=True)
class SentenceSamplingConfig(SchemeConfig, SentenceSampling):
    """The candidate sampling, length and detection level of a sentence-level baseline
    (SAMark's sampling defaults: a fair row)."""

    alpha: float = 0.01

    def __post_init__(self) -> None:
        check(
            self.max_new_sentences >= 1 and 0 < self.alpha < 1,
            "need max_new_sentences >= 1 and 0 < alpha < 1",
        )
        super().__post_init__()


SSC = TypeVar("SSC", bound=SentenceSamplingConfig)


def split_sentence_params(
    config_class: type[SSC], shared: SharedResources | None, params: Mapping[str, object]
) -> tuple[SSC, SentenceModels]:
    """(the scheme's config from flat ``params``, over ``config=`` if given; the models
    the other params name, with the shared ones)."""
    rest = dict(params)
    base = rest.pop("config", None)
    if not (base is None or isinstance(base, config_class)):
        raise TypeError(f"config must be a {config_class.__name__}, got {type(base).__name__}")
    config, rest = config_class.split(rest, base)
    return config, sentence_models(shared, rest)
