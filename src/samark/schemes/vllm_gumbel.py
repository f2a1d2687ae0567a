"""vLLM's own watermark as a row: Gumbel-max sampling keyed by the last 4 generated tokens
(``vllm.v1.watermarking``), the mark an operator who serves with vLLM can switch on with
one option (``watermark_config={"algorithm": "gumbel"}``).

Generation runs in vLLM (:class:`~samark.sampling.vllm_engine.VLLMEngine`). vLLM's native
path needs its Model Runner V2, hence Triton, hence a GPU; elsewhere the row applies the
same sampler rule through samark's logits processor, built from vLLM's own pieces (its
PRF, ``GumbelWatermarker``, ``apply_top_k_top_p``, ``repeated_context_mask``:
:mod:`samark.sampling.vllm_processors`), and ``tests/vllm_tier`` checks its picks against
``GumbelWatermarker``'s. Detection is vLLM's ``GumbelWatermarkDetector`` on the generator
tokenizer's ids of the text: the sum of ``-log(1 - u)`` over the text's tokens with
distinct contexts is Gamma(n, 1) on a text that does not depend on the key, so its p-value
is exact (as EXP's, of which this is vLLM's form: contexts are generated tokens only, the
first ``context_width`` padded).

Like every token row it writes until the asked number of sentences (the model's special
tokens suppressed), at SAMark's temperature 0.7 and top-p 0.95. Detection needs vLLM
installed; it loads the generator's tokenizer, never the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self, Unpack, cast

from samark.detection_result import Detection
from samark.errors import SamarkError
from samark.keys import WatermarkKey
from samark.models import generator_tokenizer, resolve_generator
from samark.sampling.base import TextWriter
from samark.schemes.base import (
    Generation,
    SharedResources,
    check,
    register_scheme,
)
from samark.schemes.lm_generate import TokenRowModels, TokenWatermark, TokenWatermarkConfig
from samark.segment import whole_sentences

if TYPE_CHECKING:
    from samark.sampling.vllm_engine import VLLMEngine


@dataclass(frozen=True)
class VLLMGumbelConfig(TokenWatermarkConfig):
    """vLLM's ``WatermarkConfig`` fields that change what is written or scored:
    ``context_width`` (vLLM's default 4)."""

    context_width: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        check(1 <= self.context_width <= 16, "context_width must be in [1, 16]")


@register_scheme("vllm-gumbel")
class VLLMGumbel(TokenWatermark):
    """vLLM's Gumbel-max watermark, written through vLLM, detected by vLLM's detector."""

    name = "vllm-gumbel"
    batch_size = 40  # vLLM schedules every prompt's text together
    config_class = VLLMGumbelConfig
    config: VLLMGumbelConfig

    def __init__(
        self,
        key: WatermarkKey,
        config: VLLMGumbelConfig | None = None,
        *,
        engine: VLLMEngine | None = None,
        **models: Unpack[TokenRowModels],
    ) -> None:
        super().__init__(key, config, **models)
        #: vLLM's key: 64 bits at most (its Philox PRF), derived one-way from the secret
        (self._vllm_key,) = self.key.derive_ints(self.name, 1, bits=63)
        self._engine = engine

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Self:
        """A token row's parameters, and ``engine``: a loaded vLLM engine to write with
        (None: its own, loaded on first use)."""
        rest = dict(params)
        engine = rest.pop("engine", None)
        scheme = super().from_params(key, shared, rest)
        scheme._engine = cast("VLLMEngine | None", engine)  # a VLLMEngine (not imported)
        return scheme

    @property
    def engine(self) -> VLLMEngine:
        """The process's vLLM engine for the generator (loaded on first use)."""
        if self._engine is None:
            from samark.sampling.vllm_engine import load_vllm_engine

            self._engine = load_vllm_engine(self.generator)
        return self._engine

    def detector_id(self) -> str:
        return f"vllm-gumbel/h{self.config.context_width}"

    def count_tokens(self, text: str) -> int:
        return int(self.engine.count_tokens(text))

    def generate_batch(
        self, prompts: list[str], *, max_new_sentences: int | None = None, seed: int | None = None
    ) -> list[Generation]:
        """Every prompt's text in one vLLM ``generate`` call (seeds ``seed + i``)."""
        from samark.sampling.vllm_engine import TextRequest
        from samark.sampling.vllm_processors import GumbelRule

        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise TypeError("prompts must be a non-empty list of str")
        c, engine = self.config, self.engine
        sentences = max_new_sentences or c.max_new_sentences
        special = {int(i) for i in engine.tokenizer.all_special_ids} | set(engine.eos_ids)
        rule = GumbelRule(self._vllm_key, c.context_width)
        requests = [
            TextRequest(
                prompt,
                sentences * c.tokens_per_sentence,
                sentences,
                temperature=c.temperature,
                top_p=c.top_p,
                seed=None if seed is None else seed + i,
                suppress=() if c.stop_at_eos else tuple(sorted(special)),
                gumbel=rule,
            )
            for i, prompt in enumerate(prompts)
        ]
        results = []
        writer: TextWriter[TextRequest] = engine  # the one interface token rows write through
        for prompt, written in zip(prompts, writer.write_many(requests), strict=True):
            kept = whole_sentences(writer.decode(written.tokens), sentences)
            final = " ".join(kept)
            results.append(
                Generation(
                    scheme=self.name,
                    prompt=prompt,
                    text=final,
                    sentences=tuple(kept),
                    tokens_sampled=written.tokens_sampled,
                    output_tokens=writer.count_tokens(final) if final else 0,
                    seconds=written.seconds,
                    sampling_seconds=written.seconds,
                )
            )
        return results

    def detect(self, text: str) -> Detection:
        from samark.sampling.vllm_engine import send_vllm_output_to_stderr

        send_vllm_output_to_stderr()  # before vLLM's first import: its log is not output
        try:
            from vllm.v1.watermarking import GumbelWatermarkDetector
        except ImportError as exc:
            raise SamarkError(
                f"vllm-gumbel's detector is vLLM's: install vLLM (docs/usage.md) ({exc})"
            ) from None
        self.require_text(text)
        tokenizer = generator_tokenizer(str(resolve_generator(self.generator)[1]))
        ids = [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
        detector = GumbelWatermarkDetector(
            self._vllm_key, self.config.context_width, p_value_threshold=self.alpha
        )
        found = detector.detect(ids)
        if found.num_scored_tokens == 0:
            raise self.too_short(1)
        n = found.num_scored_tokens
        return Detection(
            scheme=self.name,
            p_value=float(found.p_value),
            alpha=self.alpha,
            z=(found.score - n) / n**0.5,
            statistic="gumbel_gamma",
            score=float(found.score),
            n_units=n,
            unit="token",
            details={"mean_score": found.score / n},
        )
