"""The engine seam: a batch of N candidate next sentences continuing a prefix.

SAMark and any other sentence-level scheme draw candidates through this interface; engines
(local transformers, OpenAI-compatible servers, vLLM) implement it.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

import numpy as np

from samark.segment import first_sentence
from samark.text import words

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from samark.sampling.token_writing import Written


@dataclass(frozen=True)
class SamplingParams:
    """How candidates are sampled: nucleus sampling at a temperature, one sentence each."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_sentence_tokens: int = 64  # a candidate with no sentence end by then is incomplete

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_sentence_tokens < 1:
            raise ValueError("max_sentence_tokens must be >= 1")


@dataclass(frozen=True)
class Candidate:
    """One sampled continuation cut at its first complete sentence.

    ``text`` keeps the leading whitespace so that ``prefix + text`` is the model's own
    output; it is ``None`` when no sentence was completed (length cap or empty output).
    """

    text: str | None
    n_tokens: int  # tokens decoded for this candidate (0: the engine reports only totals)

    @property
    def complete(self) -> bool:
        return self.text is not None

    @classmethod
    def from_completion(cls, text: str, finish_reason: str | None, n_tokens: int) -> Candidate:
        """A server's completion cut at its first sentence. When the model stopped on its
        own (EOS or a stop string: ``finish_reason == "stop"``) the text may end a sentence;
        cut by the length cap, its unfinished last sentence does not count."""
        return cls(first_sentence(text, final=finish_reason == "stop"), n_tokens)


@dataclass(frozen=True)
class CandidateBatch:
    candidates: tuple[Candidate, ...]
    tokens_sampled: int  # every token the engine decoded for this batch
    prompt_tokens: int
    seconds: float

    @property
    def complete(self) -> list[str]:
        return [c.text for c in self.candidates if c.text is not None]


class LogitsBias(Protocol):
    """A token-level watermark applied inside an engine (e.g.
    :class:`samark.token_layer.GreenListLayer`): an additive logit bias per row that
    depends on the row's last ``context`` tokens only."""

    @property
    def context(self) -> int: ...

    def bias(self, contexts: Sequence[Sequence[int]], width: int) -> np.ndarray: ...


class RowPruner(Protocol):
    """Early stopping of candidate rows: once every live row has decoded ``at`` tokens,
    only the ``keep`` live rows whose partial text scores best decode on (SAMark's
    pruned budget, ``SAMarkResearch.prune_at``). Rows that completed a sentence earlier stay
    candidates; pruned rows end as incomplete candidates."""

    @property
    def at(self) -> int: ...

    @property
    def keep(self) -> int: ...

    def score(self, partial_texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class SampleRequest:
    """One draw of ``n`` candidate next sentences of ``prefix``: the arguments of an
    engine's ``sample``, so that an engine can take several callers' draws in one batch
    (``sample_many``)."""

    prefix: str
    n: int
    params: SamplingParams
    seed: int | None = None
    token_layer: LogitsBias | None = None
    prune: RowPruner | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("n must be >= 1")


@dataclass(frozen=True)
class EngineAbilities:
    """What an engine applies inside its own sampling, declared so that a scheme asks
    instead of probing (an engine that cannot is refused with a clear error before any
    text is drawn)."""

    #: a token watermark (``LogitsBias``) on every candidate row: the layered mark
    token_layer: bool = False
    #: SAMark's semantic steering bias (a ``LogitsBias`` that reads the key's pivots)
    steering: bool = False
    #: row pruning (``RowPruner``): only the best rows decode past a few tokens
    prune: bool = False
    #: transformers' ``LogitsProcessor`` at each decoding step of a whole text: what the
    #: token-level schemes (KGW, SynthID, Unigram, MorphMark, EXP, UPV) write with
    logits_processors: bool = False


@dataclass(frozen=True)
class RowOptions:
    """What an engine applies to one generation's candidate rows: a logit bias (a token
    watermark, or SAMark's steering) and row pruning; None: nothing."""

    token_layer: LogitsBias | None = None
    prune: RowPruner | None = None


#: an engine that samples as asked and applies nothing of its own (a remote server)
SAMPLES_ONLY = EngineAbilities()


def engine_abilities(engine: Engine) -> EngineAbilities:
    """What ``engine`` declares it applies (its ``abilities``)."""
    return engine.abilities


class BatchEngine(abc.ABC):
    """An engine that draws several requests' candidates in one batch (``sample_many``);
    ``sample`` is one such draw."""

    name: str
    abilities: EngineAbilities = SAMPLES_ONLY
    #: the generator's tokenizer where the engine runs it in this process (None: a
    #: remote server's)
    tokenizer: PreTrainedTokenizerBase | None = None

    def close(self) -> None:
        """Release what the engine holds beyond this object (its processes): nothing by
        default; a server calls it when it stops."""
        return None

    def count_tokens(self, text: str) -> int:
        """``text``'s length in the generator's tokens where the engine holds its
        tokenizer in this process; in words otherwise."""
        if self.tokenizer is None:
            return len(words(text))
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @abc.abstractmethod
    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        """One candidate batch per request, in order."""

    def sample(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        *,
        seed: int | None = None,
        token_layer: LogitsBias | None = None,
        prune: RowPruner | None = None,
    ) -> CandidateBatch:
        """``n`` candidate next sentences of ``prefix``; with ``token_layer``, every row
        is sampled under that token watermark; with ``prune``, only its best ``keep`` live
        rows decode past its ``at`` tokens (engines that cannot say so)."""
        return self.sample_many([SampleRequest(prefix, n, params, seed, token_layer, prune)])[0]


@runtime_checkable
class Engine(Protocol):
    """Draws ``n`` independent next sentences of ``prefix``; with ``token_layer`` or
    ``prune``, under that bias or pruning. An engine that can apply them declares so in
    its ``abilities`` (:class:`EngineAbilities`); what it does not declare it does not
    apply, and it raises
    :class:`~samark.errors.SamarkError` when given one. ``tokenizer`` is the generator's
    where the engine runs it in this process (None: a remote server's)."""

    name: str

    @property
    def abilities(self) -> EngineAbilities: ...

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase | None: ...

    def count_tokens(self, text: str) -> int:
        """``text``'s length in the generator's tokens where the engine holds its
        tokenizer in this process; in words otherwise (a remote server's)."""
        ...

    def sample(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        *,
        seed: int | None = None,
        token_layer: LogitsBias | None = None,
        prune: RowPruner | None = None,
    ) -> CandidateBatch: ...

    def close(self) -> None:
        """Stop what the engine runs beyond this process's objects (a batching queue's
        thread, vLLM's processes, an HTTP client); nothing for an engine without such."""
        ...


#: what one whole text asks of an engine that writes it (the transformers engine's
#: ``WriteRequest``, vLLM's ``TextRequest``)
RequestT_contra = TypeVar("RequestT_contra", contravariant=True)


@runtime_checkable
class TextWriter(Engine, Protocol[RequestT_contra]):
    """A candidate engine that also writes whole texts token by token: what the token
    rows (the unwatermarked reference, KGW, SynthID, ..., vLLM's Gumbel mark) and the
    token-stealing attack write through. The request type is the engine's own (what it
    can apply to a row: transformers' logits processors, vLLM's Gumbel rule)."""

    @property
    def eos_ids(self) -> set[int]:
        """The generator's end-of-sequence token ids."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids (special tokens skipped)."""
        ...

    def write_many(self, requests: Sequence[RequestT_contra]) -> list[Written]:
        """One written text per request, in order, the requests decoding together."""
        ...
