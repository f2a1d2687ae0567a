"""The one interface every watermarking scheme implements, and the scheme registry."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from samark.detection import Detection
from samark.registry import Registry

ProgressCallback = Callable[[int, int], None]  # (sentences done, sentences planned)
#: called with each sentence as soon as it is chosen (leading whitespace kept, so that the
#: pieces concatenate to the output) and its step record (candidates, matched, ...: never
#: key material); returning True ends the generation after it
SentenceCallback = Callable[[str, Mapping[str, Any]], bool | None]


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
    steps: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    @property
    def tokens_per_output_token(self) -> float:
        return self.tokens_sampled / self.output_tokens if self.output_tokens else float("nan")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tokens_per_output_token"] = self.tokens_per_output_token
        return out


class Watermark(abc.ABC):
    """A watermarking scheme: generate marked text, detect it with a calibrated p-value."""

    name: str
    #: False for rows that only generate (the unwatermarked reference)
    detectable: bool = True

    def detector_id(self) -> str:
        """Equal for two schemes exactly when their detectors give the same answers, so the
        harness scores shared human negatives once."""
        return self.name

    @abc.abstractmethod
    def generate(
        self,
        prompt: str,
        *,
        max_new_sentences: int | None = None,
        seed: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Generation: ...

    @abc.abstractmethod
    def detect(self, text: str) -> Detection: ...


SchemeFactory = Callable[..., Watermark]
SCHEMES: Registry[SchemeFactory] = Registry("scheme")
_REVISIONS: dict[str, int] = {}


def register_scheme(name: str, *, revision: int = 0) -> Callable[[SchemeFactory], SchemeFactory]:
    """Register a scheme factory under ``name``.

    ``revision`` counts the changes of what the scheme writes or scores under unchanged
    parameters. It enters the fingerprint of experiment rows, so records written before a
    change are never reused as if written after it; raise it with every such change."""
    if revision < 0:
        raise ValueError("revision must be >= 0")
    add = SCHEMES.register(name)

    def wrap(factory: SchemeFactory) -> SchemeFactory:
        add(factory)  # refuses a name registered twice
        _REVISIONS[name] = revision
        return factory

    return wrap


def scheme_revision(name: str) -> int:
    """The registered ``revision`` of scheme ``name`` (0 if never revised)."""
    SCHEMES.get(name)  # a clear error for an unknown name
    return _REVISIONS.get(name, 0)


def create_scheme(name: str, **kwargs: Any) -> Watermark:
    return SCHEMES.get(name)(**kwargs)


def scheme_names() -> list[str]:
    return SCHEMES.names()
