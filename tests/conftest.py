"""Shared fixtures: real models from PyPI packages, loaded once per test session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def mpnet():
    from samark.embed import load_embedder

    return load_embedder("all-mpnet-base-v2")


@pytest.fixture(scope="session")
def minilm():
    from samark.embed import load_embedder

    return load_embedder("all-minilm-l6-v2")


@pytest.fixture(scope="session")
def mpnet_key(mpnet):
    from samark.keys import WatermarkKey

    return WatermarkKey(b"samark-test-key-0000000000000000", mpnet.identity)


@pytest.fixture(scope="session")
def smollm2():
    from samark.sampling.transformers_engine import load_transformers_sampler

    return load_transformers_sampler("smollm2-135m-instruct")
