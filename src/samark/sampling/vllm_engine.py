"""Candidates from in-process vLLM (GPU users; ``pip install 'samark[vllm]'``).

One ``generate`` call with ``SamplingParams(n=N)`` and prefix caching on: vLLM prefills the
shared prefix once and decodes the N rows with paged attention. Sentence ends are found with
the project's segmenter, as in every engine. Untested in CI (no GPU there): see the README.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from samark.errors import SamarkError
from samark.sampling.base import BatchSampler, Candidate, CandidateBatch, SampleRequest


class VLLMSampler(BatchSampler):
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

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        """Several draws in one ``generate`` call (one sampling setting per prompt):
        vLLM schedules their rows together (concurrent requests of ``samark serve``)."""
        from vllm import SamplingParams as VLLMParams
        from vllm.inputs import TokensPrompt

        if not requests:
            return []
        start = time.perf_counter()
        prompts, settings = [], []
        for r in requests:
            if r.prune is not None:
                raise SamarkError("the vLLM engine does not prune rows (prune_at)")
            extra: dict[str, Any] | None = None
            if r.token_layer is not None:
                to_spec = getattr(r.token_layer, "to_spec", None)
                if not self.supports_token_layer or to_spec is None:
                    raise SamarkError(
                        "this vLLM applies a green-list token layer through V1 logits "
                        "processors only"
                    )
                from samark.sampling.vllm_token_layer import SPEC_ARG

                extra = {SPEC_ARG: to_spec()}
            ids = self.tokenizer(r.prefix)["input_ids"]
            p = r.params
            ids = ids[-max(1, self.max_context - p.max_sentence_tokens) :]  # left-truncate
            prompts.append(TokensPrompt(prompt_token_ids=ids))
            settings.append(
                VLLMParams(
                    n=r.n,
                    temperature=p.temperature,
                    top_p=p.top_p,
                    max_tokens=p.max_sentence_tokens,
                    seed=r.seed,
                    stop=self.stop or None,
                    extra_args=extra,
                )
            )
        results = self.llm.generate(prompts, settings, use_tqdm=False)
        seconds = time.perf_counter() - start
        batches = []
        for prompt, result in zip(prompts, results, strict=True):
            candidates = tuple(
                Candidate.from_completion(o.text, o.finish_reason, len(o.token_ids))
                for o in result.outputs
            )
            sampled = sum(c.n_tokens for c in candidates)
            batches.append(
                CandidateBatch(candidates, sampled, len(prompt["prompt_token_ids"]), seconds)
            )
        return batches

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
