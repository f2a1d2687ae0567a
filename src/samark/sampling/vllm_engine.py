"""Candidates from in-process vLLM (GPU users; ``pip install 'samark[vllm]'``).

One ``generate`` call with ``SamplingParams(n=N)`` and prefix caching on: vLLM prefills the
shared prefix once and decodes the N rows with paged attention. Sentence ends are found with
the project's segmenter, as in every engine. Untested in CI (no GPU there): see the README.
"""

from __future__ import annotations

import time
from typing import Any

from samark.errors import SamarkError
from samark.sampling.base import Candidate, CandidateBatch, SamplingParams


class VLLMSampler:
    def __init__(self, model: str, *, stop: tuple[str, ...] = ("\n",), **engine_args: Any) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise SamarkError(
                "the vLLM engine needs `pip install 'samark[vllm]'` and a GPU"
            ) from None
        engine_args.setdefault("enable_prefix_caching", True)
        try:  # the token layer of layered schemes (samark-layered), per request
            from samark.sampling.vllm_token_layer import GreenListLogitsProcessor

            engine_args.setdefault("logits_processors", [GreenListLogitsProcessor])
            self.supports_token_layer = True
        except ImportError:  # a vLLM without V1 logits processors
            self.supports_token_layer = False
        self.llm = LLM(model=model, **engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_context = int(self.llm.llm_engine.model_config.max_model_len)
        self.name = f"vllm:{model}"
        self.stop = list(stop)

    def __repr__(self) -> str:
        return f"VLLMSampler({self.name!r})"

    def sample(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        *,
        seed: int | None = None,
        token_layer: Any = None,
    ) -> CandidateBatch:
        """``n`` candidates; with ``token_layer`` (a
        :class:`~samark.token_layer.GreenListLayer`), every row is sampled under it."""
        from vllm import SamplingParams as VLLMParams
        from vllm.inputs import TokensPrompt

        if n < 1:
            raise ValueError("n must be >= 1")
        extra: dict[str, Any] | None = None
        if token_layer is not None:
            if not self.supports_token_layer:
                raise SamarkError("this vLLM has no V1 logits processors for a token layer")
            from samark.sampling.vllm_token_layer import SPEC_ARG

            extra = {SPEC_ARG: token_layer.to_spec()}
        start = time.perf_counter()
        ids = self.tokenizer(prefix)["input_ids"]
        ids = ids[-max(1, self.max_context - params.max_sentence_tokens) :]  # left-truncate
        sp = VLLMParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_sentence_tokens,
            seed=seed,
            stop=self.stop or None,
            extra_args=extra,
        )
        (result,) = self.llm.generate([TokensPrompt(prompt_token_ids=ids)], sp, use_tqdm=False)
        candidates = tuple(
            Candidate.from_completion(o.text, o.finish_reason, len(o.token_ids))
            for o in result.outputs
        )
        sampled = sum(c.n_tokens for c in candidates)
        return CandidateBatch(candidates, sampled, len(ids), time.perf_counter() - start)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
