"""What samark does inside vLLM's sampler: one V1 logits processor, configured per request.

vLLM loads logits processors by class when its engine starts and hands each request's
``SamplingParams.extra_args`` to them; :class:`SamarkLogitsProcessor` reads the entry
``extra_args["samark"]`` (a :class:`RowRules` as a dict) and, for each row of such a
request, at each step:

1. **ends the row at a sentence boundary**: once the segmenter sees sentence
   ``sentences + 1`` begin (the candidate engine's completeness rule: "U.S." inside a
   sentence does not end it), every logit but the stop token's is set to -inf, so vLLM
   ends the row there with ``finish_reason == "stop"``. A candidate is then one sentence
   and a token or so (what the local engine decodes too), not the whole token cap;
2. **suppresses** the given token ids (the model's special tokens, for the token rows that
   write to a fixed number of sentences);
3. **adds the token layer** of ``samark-layered`` (:class:`samark.token_layer.GreenListLayer`),
   its bias scaled by the request's temperature so that, after vLLM divides the logits by
   it, a green token's probability is multiplied by ``exp(delta)`` as in the local engine;
4. or **picks vLLM's own Gumbel-max watermark token** (``vllm-gumbel``): vLLM's native
   watermarking (``watermark_config``) runs only in its Model Runner V2, which needs
   Triton, so not on a CPU. The processor applies the rule of that sampler
   (``vllm.v1.watermarking.gpu_sampler.GPUWatermarkSampler``) with vLLM's own pieces:
   temperature, vLLM's ``apply_top_k_top_p``, the context of the row's last
   ``context_width`` generated tokens padded with -1, vLLM's ``repeated_context_mask``
   (a repeated context is sampled without the mark, ``deduplicate_contexts="single_turn"``)
   and ``GumbelWatermarker.sample`` for the pick, then leaves only the picked token for
   vLLM's sampler. ``tests/vllm_tier`` checks the picks against ``GumbelWatermarker``'s.

The spec, derived secrets included, crosses from vLLM's front end to its engine-core
process on the same machine, never a network. vLLM applies logits processors before
temperature and nucleus filtering: the token layer's nucleus is therefore cut from the
biased distribution (the local engine cuts it from the model's), a difference on the
generation side only; detection is the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from samark.segment import SENTENCE_END_HINTS, first_sentence, split_sentences

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase
    from vllm import SamplingParams
    from vllm.config import VllmConfig

    from samark.token_layer import TokenLayerSpec

#: the ``SamplingParams.extra_args`` entry that carries a request's rules
RULES_ARG = "samark"
#: the class as vLLM's engine loads it (a qualified name survives its worker processes)
PROCESSOR = "samark.sampling.vllm_processors:SamarkLogitsProcessor"


@dataclass(frozen=True)
class GumbelRule:
    """vLLM's Gumbel-max watermark: its 64-bit key and PRF context width."""

    key: int = field(repr=False)  # a secret: never logged
    context_width: int = 4


@dataclass(frozen=True)
class RowRules:
    """What the processor does to every row of one request (see the module docstring)."""

    #: end the row once this many sentences are complete (None: vLLM's own limits only)
    sentences: int | None = None
    #: the token a row is ended with (a stop token of the request)
    stop_id: int | None = None
    suppress: tuple[int, ...] = ()
    token_layer: TokenLayerSpec | None = field(default=None, repr=False)  # to_spec(): secret
    gumbel: GumbelRule | None = None
    #: (temperature, top_p) of the request, which the Gumbel pick and the layer need
    sampling: tuple[float, float] = field(default=(1.0, 1.0))

    def __post_init__(self) -> None:
        if self.sentences is not None and (self.sentences < 1 or self.stop_id is None):
            raise ValueError("sentences must be >= 1 and needs a stop_id")
        if self.gumbel is not None and self.token_layer is not None:
            raise ValueError("a row carries the token layer or the Gumbel mark, not both")

    def to_args(self) -> dict[str, dict[str, object]]:
        """The ``extra_args`` of a request that carries these rules."""
        return {RULES_ARG: asdict(self)}

    @classmethod
    def from_args(cls, extra_args: Mapping[str, object] | None) -> RowRules | None:
        """The rules :meth:`to_args` wrote in a request's ``extra_args`` (None: none)."""
        raw = (extra_args or {}).get(RULES_ARG)
        if not raw or not isinstance(raw, dict):
            return None
        gumbel = raw.get("gumbel")
        return cls(
            sentences=raw.get("sentences"),
            stop_id=raw.get("stop_id"),
            suppress=tuple(raw.get("suppress", ())),
            token_layer=raw.get("token_layer"),
            gumbel=GumbelRule(**gumbel) if gumbel else None,
            sampling=tuple(raw.get("sampling", (1.0, 1.0))),
        )


class TokenPieces:
    """Which tokens may end a sentence (a piece with an end hint) and which begin a word
    (a piece that starts with whitespace), for the tokenizer of the served model."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, vocab: int) -> None:
        self.tokenizer = tokenizer
        pieces = [str(p) for p in tokenizer.batch_decode([[i] for i in range(vocab)])]
        self.hint = np.array([any(h in p for h in SENTENCE_END_HINTS) for p in pieces])
        self.space = np.array([p[:1].isspace() for p in pieces])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


class SentenceCounter:
    """One row's check that its text holds ``want`` complete sentences: looked at on the
    first word after a sentence-end hint, as the local engine does."""

    def __init__(self, pieces: TokenPieces, want: int) -> None:
        self.pieces, self.want = pieces, want
        self.seen = 0  # output tokens already looked at
        self.pending = False

    def done(self, output_ids: Sequence[int]) -> bool:
        pieces, finished = self.pieces, False
        for tok in output_ids[self.seen :]:
            if 0 <= tok < len(pieces.hint) and pieces.hint[tok]:
                self.pending = True
            elif self.pending and 0 <= tok < len(pieces.space) and pieces.space[tok]:
                self.pending = False
                finished = finished or self._complete(output_ids)
        self.seen = len(output_ids)
        return finished

    def _complete(self, output_ids: Sequence[int]) -> bool:
        text = self.pieces.decode(output_ids)
        if self.want == 1:
            return first_sentence(text) is not None
        return len(split_sentences(text)) > self.want


class GumbelPick:
    """vLLM's Gumbel-max pick for one row (module docstring, step 4)."""

    def __init__(self, rule: GumbelRule, temperature: float, top_p: float) -> None:
        from vllm.v1.watermarking import GumbelWatermarker

        self.marker = GumbelWatermarker(rule.key, rule.context_width)
        self.width = rule.context_width
        self.temperature = temperature
        self.top_p = None if top_p >= 1.0 else torch.tensor([top_p])

    def __call__(self, output_ids: Sequence[int], logits: torch.Tensor) -> torch.Tensor:
        from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p
        from vllm.v1.worker.gpu.sample.watermark import repeated_context_mask

        history = list(output_ids)
        context = torch.tensor([([-1] * self.width + history)[-self.width :]])
        total = len(history)
        repeated = repeated_context_mask(
            torch.tensor([history or [0]], dtype=torch.int64),
            torch.tensor([0]),
            torch.tensor([0]),
            torch.tensor([total]),
            context,
            8192,
        )
        if bool(repeated[0]):  # vLLM samples a repeated context without the mark
            return logits
        processed = apply_top_k_top_p(
            (logits.float() / self.temperature).unsqueeze(0).clone(), None, self.top_p
        )
        pick = int(self.marker.sample(processed, context).token_ids[0])
        out = torch.full_like(logits, float("-inf"))
        out[pick] = 0.0
        return out


class SamarkLogitsProcessor(AdapterLogitsProcessor):
    """samark's rules on the rows of requests that carry them (module docstring)."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        self._model_config = vllm_config.model_config

    def is_argmax_invariant(self) -> bool:
        return False

    @functools.cached_property
    def pieces(self) -> TokenPieces:
        from transformers import AutoTokenizer

        cfg = self._model_config
        tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer)
        return TokenPieces(tokenizer, int(cfg.get_vocab_size()))

    def new_req_logits_processor(
        self, params: SamplingParams
    ) -> Callable[..., torch.Tensor] | None:
        rules = RowRules.from_args(getattr(params, "extra_args", None))
        if rules is None:
            return None
        return row_processor(rules, self.pieces if rules.sentences else None)


def row_processor(
    rules: RowRules, pieces: TokenPieces | None
) -> Callable[[list[int], list[int], torch.Tensor], torch.Tensor]:
    """The function vLLM applies to one row's logits at each step (given the prompt's
    and the row's token ids)."""
    from samark.token_layer import GreenListLayer

    temperature, top_p = rules.sampling
    counter = SentenceCounter(pieces, rules.sentences) if pieces and rules.sentences else None
    layer = GreenListLayer.from_spec(rules.token_layer) if rules.token_layer else None
    gumbel = GumbelPick(rules.gumbel, temperature, top_p) if rules.gumbel else None
    suppress = torch.tensor(rules.suppress, dtype=torch.long) if rules.suppress else None

    def apply(prompt_ids: list[int], output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        if counter is not None and counter.done(output_ids):
            out = torch.full_like(logits, float("-inf"))
            out[int(rules.stop_id or 0)] = 0.0
            return out
        if suppress is not None:
            logits = logits.index_fill(0, suppress.to(logits.device), float("-inf"))
        if layer is not None:
            h = layer.context
            context = (list(prompt_ids[-h:]) + list(output_ids))[-h:]
            row = layer.bias([context], int(logits.shape[-1]))[0]
            bias = torch.from_numpy(row * temperature).to(logits.device, logits.dtype)
            logits = logits + bias
        if gumbel is not None:
            logits = gumbel(output_ids, logits)
        return logits

    return apply
