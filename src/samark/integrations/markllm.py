"""A samark scheme as a MarkLLM watermark: MarkLLM's pipelines, calculators and editors on
samark's texts (the ``markllm`` extra, and ``pip install --no-deps markllm==0.1.5``).

:func:`register` adds ``"samark"`` to MarkLLM's ``AutoWatermark`` at run time (MarkLLM's
files are not edited), so ``AutoWatermark.load("samark", algorithm_config=...)`` builds a
:class:`SamarkWatermark`. Its ``algorithm_config`` is a JSON file or a dict::

    {"algorithm_name": "samark", "scheme": "unigram", "key": "ref.key",
     "params": {"delta": 2.0}}

``key`` is a key file (``samark keygen``); ``scheme`` defaults to the one the key was made
for; ``params`` are the scheme's (``create_scheme``); an optional integer ``seed`` makes a
pipeline's run reproducible (its i-th generation is seeded ``seed + i``).

What MarkLLM expects and what it gets:

- ``generate_watermarked_text(prompt)``: the scheme's text, *without* the prompt (MarkLLM's
  own watermarks return prompt and continuation). A token scheme writes with MarkLLM's model
  object and tokenizer when ``transformers_config`` gives them (a causal LM with a
  tokenizer); the sentence schemes (SAMark and its family) write with samark's own
  generator and embedder, because they sample many candidates per sentence through
  samark's engine and score them with the embedder a key is bound to.
- ``detect_watermark(text)``: ``{"is_watermarked", "score", "p_value", "z"}``. MarkLLM
  ranks by ``score`` (its dynamic-threshold calculator), so the score is
  ``-log10(p_value)`` (capped at 300): higher is more marked, one scale for every scheme.
  ``is_watermarked`` is ``p_value < alpha``, the scheme's level.
- ``get_data_for_visualization(text)``: one entry per sentence (MarkLLM's "tokens" are
  the sentences), highlighted 1 where the sentence's own p-value is under 0.5, weighted
  ``1 - p``; a sentence scheme's per-sentence p-values are its detector's, a token
  scheme's are each sentence detected alone.
- MarkLLM's pipelines go one prompt at a time; so does this adapter (samark's batch
  generation is not reached through them).

MarkLLM's evaluation modules download at import time; import them under
:func:`samark.evaluation.markllm_offline.offline`.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markllm.visualize.data_for_visualization import DataForVisualization
from markllm.watermark import auto_watermark
from markllm.watermark.base import BaseWatermark

from samark.errors import EmptyTextError, SamarkError
from samark.keys import WatermarkKey
from samark.schemes import create_scheme
from samark.schemes.base import Watermark
from samark.schemes.lm_generate import LMGenerateScheme
from samark.segment import split_sentences

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    # what ``AutoModelForCausalLM.from_pretrained`` gives: the model an engine holds
    from transformers.models.auto.modeling_auto import _BaseModelWithGenerate

    from samark.sampling.transformers_engine import TransformersEngine

#: the name the adapter registers in MarkLLM's AutoWatermark
ALGORITHM_NAME = "samark"
#: the largest score (``-log10`` of a p-value of 0)
MAX_SCORE = 300.0


def p_to_score(p_value: float) -> float:
    """MarkLLM's score for a p-value: ``-log10(p)``, capped at :data:`MAX_SCORE` (a
    non-finite p reads as 1: no evidence)."""
    if not math.isfinite(p_value) or p_value >= 1.0:
        return 0.0
    if p_value <= 0.0:
        return MAX_SCORE
    return min(-math.log10(p_value), MAX_SCORE)


def register() -> None:
    """Make ``AutoWatermark.load("samark", ...)`` build a :class:`SamarkWatermark` (its
    algorithm map is a module dict; nothing of MarkLLM's is edited on disk)."""
    auto_watermark.WATERMARK_MAPPING_NAMES[ALGORITHM_NAME] = f"{__name__}.SamarkWatermark"


@dataclass(frozen=True)
class _AlgorithmConfig:
    """A samark algorithm config, checked: the scheme (None: the key's own), the key
    file, the scheme's parameters and the first generation's seed."""

    scheme: str | None
    key: str | os.PathLike[str]
    #: the scheme's keyword arguments (its constructor checks them)
    params: dict[str, Any]
    seed: int | None


def _read_config(algorithm_config: str | Mapping[str, object]) -> _AlgorithmConfig:
    config: object
    if isinstance(algorithm_config, Mapping):
        config = dict(algorithm_config)
    else:
        try:
            config = json.loads(Path(algorithm_config).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SamarkError(
                f"cannot read the algorithm config {algorithm_config}: {exc}"
            ) from None
    if (
        not isinstance(config, dict)
        or config.get("algorithm_name", ALGORITHM_NAME) != ALGORITHM_NAME
    ):
        raise SamarkError(f'a samark algorithm config has "algorithm_name": "{ALGORITHM_NAME}"')
    unknown = set(config) - {"algorithm_name", "scheme", "key", "params", "seed"}
    if unknown:
        raise SamarkError(f"unknown entries in the samark algorithm config: {sorted(unknown)}")
    seed = config.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise SamarkError("a samark algorithm config's seed is an integer")
    if "key" not in config:
        raise SamarkError('a samark algorithm config names its key file ("key")')
    scheme, key, params = config.get("scheme"), config["key"], config.get("params", {})
    if scheme is not None and not isinstance(scheme, str):
        raise SamarkError("a samark algorithm config's scheme is a scheme name")
    if not isinstance(key, str | os.PathLike):
        raise SamarkError("a samark algorithm config's key is a key file's path")
    if not isinstance(params, dict):
        raise SamarkError("a samark algorithm config's params are an object")
    return _AlgorithmConfig(scheme, key, dict(params), seed)


def _given_engine(
    model: _BaseModelWithGenerate, tokenizer: PreTrainedTokenizerBase
) -> TransformersEngine:
    """samark's transformers engine over a model and tokenizer already loaded (MarkLLM's),
    instead of loading its own copy: the fields ``TransformersEngine`` sets when it loads."""
    import torch

    from samark.sampling.transformers_engine import TransformersEngine

    engine = TransformersEngine.__new__(TransformersEngine)
    engine.name = str(getattr(model.config, "_name_or_path", "") or type(model).__name__)
    engine.path = Path(engine.name)
    engine.share_prefix = True
    engine.device = torch.device(next(model.parameters()).device)
    engine.tokenizer = tokenizer
    engine.model = model
    cfg = model.config
    engine.max_context = int(getattr(cfg, "max_position_embeddings", 2048) or 2048)
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    engine.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    engine.model_lock = threading.RLock()
    engine.prefixes = None  # no prefix cache: MarkLLM's pipelines go one prompt at a time
    return engine


class _Config:
    """What MarkLLM reads from a watermark's ``config`` (its unwatermarked generation)."""

    def __init__(self, transformers_config: object) -> None:
        self.generation_model = getattr(transformers_config, "model", None)
        self.generation_tokenizer = getattr(transformers_config, "tokenizer", None)
        self.vocab_size = getattr(transformers_config, "vocab_size", None)
        self.device = getattr(transformers_config, "device", "cpu")
        self.gen_kwargs = dict(getattr(transformers_config, "gen_kwargs", {}) or {})


class SamarkWatermark(BaseWatermark):
    """A samark scheme behind MarkLLM's ``BaseWatermark``."""

    def __init__(
        self,
        algorithm_config: str | Mapping[str, object] | Watermark,
        transformers_config: object = None,
        *args: object,
        **kwargs: object,
    ) -> None:
        self.config = _Config(transformers_config)
        #: the next generation's seed (None: unseeded)
        self.seed: int | None = None
        if isinstance(algorithm_config, Watermark):
            self.scheme = algorithm_config
        else:
            c = _read_config(algorithm_config)
            self.seed = c.seed
            key = WatermarkKey.load(c.key)
            self.scheme = create_scheme(c.scheme, key=key, **c.params)
        #: whether the scheme writes with MarkLLM's model object (else samark's own)
        self.uses_given_model = False
        model, tokenizer = self.config.generation_model, self.config.generation_tokenizer
        if (
            isinstance(self.scheme, LMGenerateScheme)
            and model is not None
            and tokenizer is not None
        ):
            self.scheme._lm = _given_engine(model, tokenizer)
            self.uses_given_model = True

    def generate_watermarked_text(self, prompt: str, *args: object, **kwargs: object) -> str:
        """The scheme's text for ``prompt`` (without the prompt)."""
        return self.scheme.generate(prompt, seed=self._next_seed()).text

    def _next_seed(self) -> int | None:
        seed = self.seed
        if seed is not None:
            self.seed = seed + 1
        return seed

    def generate_unwatermarked_text(self, prompt: str, *args: object, **kwargs: object) -> str:
        """MarkLLM's own unwatermarked generation where it was given a model, else samark's
        unmarked row with the scheme's generator (without the prompt either way)."""
        if self.config.generation_model is not None:
            text = str(super().generate_unwatermarked_text(prompt))
            return text[len(prompt) :].lstrip() if text.startswith(prompt) else text
        generator = getattr(self.scheme, "generator", None)
        plain = create_scheme("unwatermarked", **({"generator": generator} if generator else {}))
        return plain.generate(prompt, seed=self._next_seed()).text

    def detect_watermark(
        self, text: str, return_dict: bool = True, *args: object, **kwargs: object
    ) -> dict[str, bool | float] | tuple[bool, float]:
        """samark's detection in MarkLLM's form; a text with nothing to score reads as
        unmarked (p = 1), as MarkLLM's pipelines cannot skip one."""
        try:
            d = self.scheme.detect(text)
            p, z, alpha = float(d.p_value), float(d.z), float(d.alpha)
        except EmptyTextError:
            p, z, alpha = 1.0, 0.0, float(getattr(self.scheme, "alpha", 0.01))
        marked = p < alpha
        score = p_to_score(p)
        if not return_dict:
            return marked, score
        return {"is_watermarked": marked, "score": score, "p_value": p, "z": z}

    def sentence_p_values(self, text: str) -> tuple[list[str], list[float]]:
        """The text's sentences and a p-value each (the detector's own, or each sentence
        detected alone)."""
        d = self.scheme.detect(text)
        if d.sentences and len(d.sentence_p_values) == len(d.sentences):
            return list(d.sentences), [float(p) for p in d.sentence_p_values]
        sentences = split_sentences(text)
        values = []
        for s in sentences:
            try:
                values.append(float(self.scheme.detect(s).p_value))
            except EmptyTextError:
                values.append(1.0)
        return sentences, values

    def get_data_for_visualization(
        self, text: str, *args: object, **kwargs: object
    ) -> DataForVisualization:
        sentences, p = self.sentence_p_values(text)
        return DataForVisualization(
            [s + " " for s in sentences], [int(v < 0.5) for v in p], [1.0 - v for v in p]
        )

    # MarkLLM's base class spells it both ways
    get_data_for_visualize = get_data_for_visualization
