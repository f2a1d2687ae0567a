"""The vLLM tier (``pytest -m vllm tests/vllm_tier`` in the vLLM environment: docs/usage.md):
real vLLM on the CPU, one engine per test session. Skipped where vLLM is not installed."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("vllm", reason="the vLLM tier needs vLLM (docs/usage.md, 'vLLM')")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

GENERATOR = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def vllm_engine():
    from samark.sampling.vllm_engine import load_vllm_engine

    return load_vllm_engine(GENERATOR)


@pytest.fixture(scope="session", autouse=True)
def _vllm_shut_down_at_the_end():
    """Stop the session's vLLM engine while pytest still holds its streams (vLLM's own
    exit hook would log into closed ones)."""
    yield
    from samark.sampling.vllm_engine import close_vllm_engines

    close_vllm_engines()
