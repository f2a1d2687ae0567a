"""Candidate samplers: the interface, and the engines by name (:mod:`samark.sampling.engines`)."""

from __future__ import annotations

from samark.sampling.base import Candidate, CandidateBatch, Engine, SamplingParams
from samark.sampling.engines import (
    EngineSpec,
    engine_info,
    engine_names,
    load_engine,
    parse_engine_spec,
    register_engine,
)

__all__ = [
    "Candidate",
    "CandidateBatch",
    "Engine",
    "EngineSpec",
    "SamplingParams",
    "engine_info",
    "engine_names",
    "load_engine",
    "parse_engine_spec",
    "register_engine",
]
