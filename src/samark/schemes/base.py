"""The one interface every watermarking scheme implements, and the scheme registry."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, ClassVar, TypeVar

from samark.detection_result import Detection
from samark.errors import EmptyTextError, SamarkError
from samark.json_types import JSONValue
from samark.registry import CatalogModules, Registry
from samark.schemes.catalog import CATALOG, SchemeInfo

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from samark.embed import Embedder
    from samark.keys import WatermarkKey
    from samark.sampling.base import Engine
    from samark.sampling.engines import EngineSpec
    from samark.schemes.features import TextFeatures
    from samark.schemes.ring_scores import RingScoring

V = TypeVar("V")  # a parameter's value, as its caller typed it (``ring_params``)
ProgressCallback = Callable[[int, int], None]  # (sentences done, sentences planned)
#: called with each sentence as soon as it is chosen (leading whitespace kept, so that the
#: pieces concatenate to the output) and its step record (candidates, matched, ...: never
#: key material); returning True ends the generation after it
SentenceCallback = Callable[[str, Mapping[str, object]], bool | None]


@dataclass(frozen=True)
class Generation:
    """A generated text and how it was made (never the key or the flag pattern)."""

    scheme: str
    prompt: str
    text: str
    sentences: tuple[str, ...]
    tokens_sampled: int  # every token the generator decoded, discarded candidates included
    output_tokens: int
    seconds: float
    sampling_seconds: float = 0.0
    embedding_seconds: float = 0.0
    fallbacks: dict[str, int] = field(default_factory=dict)  # fallback kind -> times fired
    extra_batches: int = 0
    steps: tuple[dict[str, object], ...] = field(default=(), repr=False)

    @property
    def tokens_per_output_token(self) -> float:
        return self.tokens_sampled / self.output_tokens if self.output_tokens else float("nan")

    def to_dict(self) -> dict[str, JSONValue]:
        """Its fields as JSON values (``steps``' records are JSON by construction)."""
        out: dict[str, JSONValue] = asdict(self)
        out["tokens_per_output_token"] = self.tokens_per_output_token
        return out


#: the preset that is the config's own defaults (what every door uses without a preset)
PRODUCT_PRESET = "product"
#: the preset the paper's experiments ran with (``Watermark.presets``)
PAPER_PRESET = "paper"


class Watermark(abc.ABC):
    """A watermarking scheme: generate marked text, detect it with a calibrated p-value."""

    name: str
    #: prompts the harness hands to one ``generate_batch`` call (1: one at a time)
    batch_size: int = 1

    # -- what callers read of a scheme (the CLI, the server, rings): declared here, kept
    # by every scheme (samark.testing checks it), never probed -----------------------
    #: the key it marks and detects with (None: a scheme that writes no watermark)
    key: WatermarkKey | None = None
    #: the sentence embedder it scores with (None: a token-level scheme)
    embedder: Embedder | None = None
    #: its parameters: a frozen :class:`SchemeConfig`, whose type each family narrows
    #: (token rows: ``LMGenerateConfig``; sentence rows: the loop's ``SentenceConfig``
    #: protocol; SAMark: ``SAMarkConfig``); a caller that knows no family reads nothing of it
    config: object
    #: named sets of parameters over the config's defaults (``create_scheme(...,
    #: preset=NAME)``; SAMark's are data files): ``"paper"``, what the paper's experiments
    #: ran with (SAMark: the z statistic), which every scheme has (empty unless it says
    #: otherwise), and ``"product"``: the config's defaults themselves
    presets: ClassVar[Mapping[str, Mapping[str, object]]] = {"paper": {}}

    @classmethod
    def preset(cls, name: str) -> dict[str, object]:
        """The parameters of preset ``name`` (a clear error for an unknown one)."""
        if name == PRODUCT_PRESET:
            return {}
        if name not in cls.presets:
            known = sorted({*cls.presets, PRODUCT_PRESET})
            raise ValueError(f"{cls.name} has no preset {name!r}; its presets: {known}")
        return dict(cls.presets[name])

    @property
    def alpha(self) -> float:
        """The level its verdicts are taken at (``p_value < alpha``); each scheme that
        detects reads it from its config, one that detects nothing has none."""
        raise NotImplementedError(f"{self.name} takes no verdict")

    @property
    def key_id(self) -> str | None:
        """The public id of its key (never the key); None without one."""
        return None if self.key is None else self.key.key_id

    @property
    def info(self) -> SchemeInfo:
        """Its registration: unit, the engines it writes through and its abilities
        (``candidates``, ``statistics``, ``pivot_detector``, ``payload_flags``, ...)."""
        return scheme_info(self.name)

    @property
    def engine(self) -> Engine | None:
        """The engine it writes with (loaded on first use); None: it writes with none."""
        return None

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase | None:
        """Its generator's tokenizer (chat template, token counts) where its engine runs
        the generator in this process; None otherwise (a remote server's engine)."""
        engine = self.engine
        return None if engine is None else engine.tokenizer

    @property
    def token_counter(self) -> Callable[[str], int] | None:
        """Its generator's token count of a text (usage, ``max_tokens``), where it has a
        tokenizer; None otherwise."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            return None

        def count(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False)["input_ids"])

        return count

    def detector_id(self) -> str:
        """Equal for two schemes of one key exactly when their detectors give the same
        answers, so the harness scores shared human negatives once (a run holds one key:
        the id need not name it)."""
        return self.name

    @abc.abstractmethod
    def generate(
        self,
        prompt: str,
        *,
        max_new_sentences: int | None = None,
        seed: int | None = None,
        progress: ProgressCallback | None = None,
        on_sentence: SentenceCallback | None = None,
    ) -> Generation:
        """Continue ``prompt`` with up to ``max_new_sentences`` sentences. ``on_sentence``
        sees each sentence in order (a server streams it: a sentence-level scheme calls it
        as each is chosen, a token-level one once its text is written); when it returns
        True the text ends with that sentence (a token budget)."""

    def generate_batch(
        self, prompts: list[str], *, max_new_sentences: int | None = None, seed: int | None = None
    ) -> list[Generation]:
        """One generation per prompt. This default writes them one after another (the
        first with ``seed``, the next with ``seed + 1``, ...); schemes that decode prompts
        together override it and set ``batch_size``."""
        return [
            self.generate(
                p, max_new_sentences=max_new_sentences, seed=None if seed is None else seed + i
            )
            for i, p in enumerate(prompts)
        ]

    @abc.abstractmethod
    def detect(self, text: str) -> Detection:
        """Test ``text`` for this scheme's mark. Raises :class:`EmptyTextError` when the
        text has nothing to score."""

    def detect_many(self, texts: Sequence[str]) -> list[Detection | None]:
        """``detect`` on each text, ``None`` for one with nothing to score. Schemes that
        can score texts together (one embedding call) override it."""
        out: list[Detection | None] = []
        for text in texts:
            try:
                out.append(self.detect(text))
            except EmptyTextError:
                out.append(None)
        return out

    def detect_prepared(self, features: Sequence[TextFeatures]) -> list[Detection | EmptyTextError]:
        """Each prepared text's detection (:mod:`samark.schemes.features`: split and
        embedded once, for every key), or its own error where it has nothing to score.
        This default detects each text as given; a scheme that scores sentences or
        embeddings overrides it to read the features."""
        out: list[Detection | EmptyTextError] = []
        for f in features:
            try:
                out.append(self.detect(f.text))
            except EmptyTextError as exc:
                out.append(exc)
        return out

    def evidence(self, detection: Detection) -> dict[str, object]:
        """What this scheme shows of ``detection`` beyond its p-value, for the page and
        ``/v1/detect`` with ``details`` (fields of the answer, JSON-safe; MarkLLM's
        ``get_data_for_visualization``): none by default. The server asks every scheme
        this, never its class."""
        return {}

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Watermark:
        """This scheme from flat parameters (a caller's keywords, an experiment's TOML):
        its config's fields (over ``config=``, if given) and the rest, with the models in
        ``shared`` unless ``params`` names its own. A parameter it does not know is a
        ``TypeError``. A class registered with ``@register_scheme`` is built this way;
        each scheme family defines it once."""
        raise NotImplementedError(f"{cls.__name__} has no flat-parameter constructor")

    # -- in a keyring (samark.detection.ring_detector asks these, never a scheme's name) ----------
    @property
    def flag_channels(self) -> int:
        """Channels of the per-text flag pattern, in which a ring's payload can carry bits
        (0: the scheme has none)."""
        return 0

    @classmethod
    def ring_params(cls, params: Mapping[str, V], keys: int, alpha: float) -> dict[str, V | int]:
        """``params`` as a ring of ``keys`` keys at ``alpha`` needs them (SAMark: never
        fewer null pivot sets than the ring's smallest p-values need); the one place a
        ring's parameters are sized."""
        return dict(params)

    @classmethod
    def ring_scoring(cls, schemes: Sequence[Watermark]) -> RingScoring | None:
        """A joint scoring of ``schemes`` (one per key, all of this class), or None: each
        key detects alone and Holm's correction makes the ring's p-value."""
        return None


C = TypeVar("C")
SC = TypeVar("SC", bound="SchemeConfig")


def split_params(
    config_class: type[C], params: Mapping[str, object], base: C | None = None
) -> tuple[C, dict[str, object]]:
    """(``config_class``'s config: ``base``, else its defaults, with the fields that
    ``params`` names; the other params). An experiment's TOML and the CLI name a scheme's
    parameters flat; the config's own fields decide which are its."""
    names = {f.name for f in dataclasses.fields(config_class)}  # type: ignore[arg-type]
    given = {k: v for k, v in params.items() if k in names}
    rest = {k: v for k, v in params.items() if k not in names}
    if base is None:
        return config_class(**given), rest
    if not isinstance(base, config_class):
        raise TypeError(f"config must be a {config_class.__name__}, got {type(base).__name__}")
    return dataclasses.replace(base, **given), rest  # type: ignore[type-var]


@dataclass(frozen=True)
class SchemeConfig:
    """A scheme's parameters: immutable, validated when built (``__post_init__`` raises
    ValueError), on the model of transformers' watermarking configs. A scheme keeps its
    config as ``scheme.config``; its factory builds it with :meth:`split`."""

    def replace(self: SC, **changes: object) -> SC:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def split(
        cls: type[SC], params: Mapping[str, object], base: SC | None = None
    ) -> tuple[SC, dict[str, object]]:
        """(this config from ``base`` or the defaults and the fields ``params`` names, the
        other params: models and engines)."""
        return split_params(cls, params, base)


def require_key(name: str, key: WatermarkKey | None) -> WatermarkKey:
    """``key``, or a clear error where scheme ``name`` was given none."""
    if key is None:
        raise SamarkError(f"{name} marks and detects with a key: pass key=WatermarkKey(...)")
    return key


def check(ok: bool, message: str) -> None:
    """A config's validation: ValueError with ``message`` unless ``ok``."""
    if not ok:
        raise ValueError(message)


@dataclass(frozen=True)
class SharedResources:
    """What a harness or a server already holds and hands to every scheme it builds, so
    that each model loads once per process. Every factory accepts it as ``shared``."""

    #: the LM every scheme writes with (a preset name or a local folder)
    generator: str
    #: a loaded embedder for schemes that embed sentences (None: they load their own)
    embedder: Embedder | None = None
    #: per-step research records (experiments only: they derive from the key, never served)
    research_records: bool = False


#: what ``@register_scheme`` decorates: a :class:`Watermark` class
W = TypeVar("W", bound=type["Watermark"])
UNITS = ("sentence", "token")

SCHEMES: Registry[type[Watermark]] = Registry("scheme", catalog=CatalogModules(CATALOG))
#: what the schemes registered from outside the catalog are (a plugin's)
_INFO: dict[str, SchemeInfo] = {}


def register_scheme(
    name: str,
    *,
    unit: str | None = None,
    description: str | None = None,
    revision: int = 0,
    detectable: bool = True,
) -> Callable[[W], W]:
    """Register a :class:`Watermark` class under ``name``; it is built by its
    :meth:`~Watermark.from_params` from a key, the shared models and flat parameters
    (those it does not know raise ``TypeError``). A variant with other defaults is a
    subclass (``SAMarkDagger``): the registry keeps classes, so what a class says of
    itself (:meth:`~Watermark.ring_params`) is known before building.

    A built-in scheme's ``unit``, ``description`` and ``revision`` live in its
    :mod:`samark.schemes.catalog` entry (so that listing schemes imports none of them);
    a scheme registered from outside gives them here.

    ``revision`` counts the changes of what the scheme writes or scores under unchanged
    parameters. It enters the fingerprint of experiment rows, so records written before a
    change are never reused as if written after it; raise it with every such change."""
    if name in CATALOG:
        if unit is not None or description is not None:
            raise ValueError(f"{name!r} is catalogued: its description lives in the catalog")
        info = CATALOG[name][1]
    else:
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
        if revision < 0 or not description:
            raise ValueError("a scheme needs a description and a revision >= 0")
        info = SchemeInfo(name, unit, description, revision, detectable)
    add = SCHEMES.register(name)

    def wrap(registered: W) -> W:
        if not (isinstance(registered, type) and issubclass(registered, Watermark)):
            raise TypeError(f"register_scheme({name!r}) takes a Watermark class")
        add(registered)  # refuses a name registered twice
        _INFO[name] = info
        return registered

    return wrap


def scheme_info(name: str) -> SchemeInfo:
    """The registration of scheme ``name`` (a clear error for an unknown one), without
    importing its module."""
    if name in CATALOG:
        return CATALOG[name][1]
    if name not in _INFO:
        SCHEMES.get(name)  # the registry names an unknown scheme
    return _INFO[name]


def scheme_revision(name: str) -> int:
    """The registered ``revision`` of scheme ``name``."""
    return scheme_info(name).revision


#: the scheme of a key that names none (keys written before keys named their scheme)
OLDER_KEYS_SCHEME = "samark"


def create_scheme(
    name: str | None = None,
    *,
    shared: SharedResources | None = None,
    preset: str | None = None,
    **kwargs: object,
) -> Watermark:
    """Build scheme ``name`` with ``key=...`` and its parameters; ``shared`` hands over the
    models the caller already holds. Without ``name``, the scheme the key was made for
    (``WatermarkKey.made_for``; ``samark`` for an older key that names none). Parameters
    left out take the scheme's config defaults, the same from every door (Python, the CLI,
    the server, a keyring); ``preset`` (``"paper"``: the paper's experiments) sets a named
    group of them first, and the parameters given win over it."""
    from samark.keys import WatermarkKey

    params = dict(kwargs)
    key = params.pop("key", None)
    if not (key is None or isinstance(key, WatermarkKey)):
        raise TypeError(f"key must be a WatermarkKey, got {type(key).__name__}")
    if name is None:
        name = (key.made_for() if key is not None else None) or OLDER_KEYS_SCHEME
    cls = scheme_class(name)
    if preset is not None:
        params = {**cls.preset(preset), **params}
    return cls.from_params(key, shared, params)


def scheme_class(name: str) -> type[Watermark]:
    """The class registered as scheme ``name`` (importing its module on first use)."""
    return SCHEMES.get(name)


def scheme_names() -> list[str]:
    return SCHEMES.names()


def engine_for(name: str, spec: str | None) -> EngineSpec:
    """The engine scheme ``name`` writes through for the engine ``spec`` (``ENGINE[:MODEL]``;
    None: the scheme's own default, its first local engine): one of its catalogued
    engines, or, for a scheme that chooses among candidates, any registered engine that
    declares the abilities it needs. Every other is a clear error saying why."""
    from samark.sampling.engines import EngineSpec, engine_info, parse_engine_spec

    info = scheme_info(name)
    if spec is None:
        return EngineSpec(next(e for e in info.engines if e != "openai"))
    parsed = parse_engine_spec(spec)
    declared = dataclasses.asdict(engine_info(parsed.engine).abilities)
    lacks = [need for need in info.engine_needs if not declared[need]]
    if parsed.engine in info.engines or (info.candidates and not lacks):
        return parsed
    because = ""
    if "logits_processors" in lacks:
        because = (
            ": its watermark is a logits processor applied at each decoding step, and the "
            f"{parsed.engine} engine applies none"
        )
    elif lacks:
        because = f": it needs an engine that applies {' and '.join(lacks)}"
    elif info.unit == "token":
        because = ": only those engines write its token rule"
    raise SamarkError(
        f"{name} writes through {' or '.join(info.engines)}, not {parsed.engine}{because}"
    )
