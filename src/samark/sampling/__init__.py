"""Candidate samplers: the interface and its engines."""

from __future__ import annotations

from samark.errors import SamarkError
from samark.sampling.base import Candidate, CandidateBatch, CandidateSampler, SamplingParams


def load_sampler(spec: str) -> CandidateSampler:
    """An engine by spec: a preset name or folder (local transformers),
    ``vllm:<model>`` (in-process vLLM) or ``http(s)://host/v1#<model>`` (an
    OpenAI-compatible completions server)."""
    if spec.startswith(("http://", "https://")):
        from samark.sampling.openai_server import OpenAICompletionsSampler

        url, _, model = spec.partition("#")
        if not model:
            raise SamarkError(
                "a server sampler is 'URL#MODEL', e.g. http://127.0.0.1:8000/v1#smollm2"
            )
        return OpenAICompletionsSampler(url, model)
    if spec.startswith("vllm:"):
        from samark.sampling.vllm_engine import load_vllm_sampler

        model = spec.removeprefix("vllm:")
        if not model:
            raise SamarkError("a vLLM sampler is 'vllm:MODEL', e.g. vllm:smollm2-135m-instruct")
        return load_vllm_sampler(model)
    from samark.sampling.transformers_engine import load_transformers_sampler

    return load_transformers_sampler(spec)


__all__ = ["Candidate", "CandidateBatch", "CandidateSampler", "SamplingParams", "load_sampler"]
