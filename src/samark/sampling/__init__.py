"""Candidate samplers: the interface, and the engines by name (:mod:`samark.sampling.engines`)."""

from __future__ import annotations

from samark.sampling.base import Candidate, CandidateBatch, CandidateSampler, SamplingParams
from samark.sampling.engines import (
    EngineSpec,
    engine_info,
    engine_names,
    load_engine,
    parse_engine_spec,
    register_engine,
)


def load_sampler(spec: str) -> CandidateSampler:
    """An engine by spec (:func:`~samark.sampling.engines.parse_engine_spec`):
    ``transformers:MODEL`` or a bare preset / folder (local transformers),
    ``vllm:MODEL`` (in-process vLLM), ``openai:URL#MODEL`` or ``URL#MODEL`` (an
    OpenAI-compatible completions server)."""
    return load_engine(spec)


__all__ = [
    "Candidate",
    "CandidateBatch",
    "CandidateSampler",
    "EngineSpec",
    "SamplingParams",
    "engine_info",
    "engine_names",
    "load_engine",
    "load_sampler",
    "parse_engine_spec",
    "register_engine",
]
