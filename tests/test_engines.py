"""The engine registry: one spec syntax, each engine's declared abilities (the catalog's and
its class's agree), which engines a scheme writes through and why not, and the walk-through
of CONTRIBUTING.md (an engine added from outside, used by name in a command)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from typer.testing import CliRunner

from samark.errors import SamarkError
from samark.sampling.base import (
    BatchSampler,
    Candidate,
    CandidateBatch,
    EngineAbilities,
    SampleRequest,
)
from samark.sampling.engines import (
    EngineSpec,
    engine_info,
    engine_names,
    load_engine,
    parse_engine_spec,
    register_engine,
)
from samark.schemes.base import engine_for


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("transformers", EngineSpec("transformers")),
        ("vllm:smollm2-135m-instruct", EngineSpec("vllm", "smollm2-135m-instruct")),
        ("openai:http://127.0.0.1:8000/v1#m", EngineSpec("openai", "http://127.0.0.1:8000/v1#m")),
        # the short forms the former --sampler / --upstream took
        ("http://127.0.0.1:8000/v1#m", EngineSpec("openai", "http://127.0.0.1:8000/v1#m")),
        ("smollm2-135m-instruct", EngineSpec("transformers", "smollm2-135m-instruct")),
    ],
)
def test_one_spec_syntax_names_every_engine(spec: str, parsed: EngineSpec) -> None:
    assert parse_engine_spec(spec) == parsed
    assert parse_engine_spec(str(parsed)) == parsed  # the spec prints as it parses


def test_a_bad_spec_is_a_clear_error() -> None:
    with pytest.raises(SamarkError, match=r"unknown engine 'tpu'; known: .*openai"):
        parse_engine_spec("tpu")
    with pytest.raises(SamarkError, match="vllm:MODEL"):
        parse_engine_spec("vllm:")
    with pytest.raises(SamarkError, match="openai:URL#MODEL"):
        load_engine("openai:http://127.0.0.1:9/v1")  # no model after '#'


def test_each_engine_declares_in_its_catalog_what_its_class_applies() -> None:
    """The registry answers from the catalog without loading an engine; the engine object
    answers schemes at run time: the two say the same."""
    from samark.sampling.openai_server import OpenAICompletionsSampler
    from samark.sampling.transformers_engine import TransformersSampler
    from samark.sampling.vllm_engine import VLLMSampler  # imports no vLLM

    classes = {
        "transformers": TransformersSampler,
        "vllm": VLLMSampler,
        "openai": OpenAICompletionsSampler,
    }
    assert {"transformers", "vllm", "openai"} <= set(engine_names())
    for name, cls in classes.items():
        assert engine_info(name).abilities == cls.abilities, name
    assert engine_info("transformers").abilities.logits_processors
    assert not engine_info("vllm").abilities.logits_processors


def test_the_registry_loads_the_process_engine(smollm2) -> None:
    """``load_sampler``'s specs go through the registry: the transformers engine is the
    process's one (loaded once), a server's is built without a request."""
    from samark.sampling import load_sampler
    from samark.sampling.openai_server import OpenAICompletionsSampler

    assert load_sampler("transformers:smollm2-135m-instruct") is smollm2
    assert load_engine("transformers", generator="smollm2-135m-instruct") is smollm2
    server = load_engine("openai:http://127.0.0.1:9/v1#tiny")
    assert isinstance(server, OpenAICompletionsSampler)
    assert (server.base_url, server.model, server.tokenizer) == (
        "http://127.0.0.1:9/v1",
        "tiny",
        None,
    )


@pytest.mark.parametrize(
    ("scheme", "spec", "why"),
    [
        ("kgw", "vllm", "kgw writes through transformers, not vllm: its watermark is a logits"),
        ("unwatermarked", "openai:http://h/v1#m", "the openai engine applies none"),
        ("samark-layered", "openai:http://h/v1#m", "needs an engine that applies token_layer"),
        ("vllm-gumbel", "transformers", "vllm-gumbel writes through vllm, not transformers"),
    ],
)
def test_a_scheme_refuses_an_engine_saying_why(scheme: str, spec: str, why: str) -> None:
    with pytest.raises(SamarkError, match=why):
        engine_for(scheme, spec)


def test_a_scheme_writes_through_its_own_engine_by_default() -> None:
    assert engine_for("samark", None) == EngineSpec("transformers")
    assert engine_for("vllm-gumbel", None) == EngineSpec("vllm")
    assert engine_for("samark", "http://h/v1#m") == EngineSpec("openai", "http://h/v1#m")
    assert engine_for("samark-layered", "vllm:m") == EngineSpec("vllm", "m")


# -- CONTRIBUTING.md, "Add an engine": one module and one registration -----------------
CANNED = (
    "The council met again on Thursday.",
    "Residents asked about the new park.",
    "The mayor promised an answer next week.",
    "Several members wanted more time.",
)


class CannedSampler(BatchSampler):
    """Candidates from a fixed list of sentences, in turn (no model): the smallest engine."""

    abilities = EngineAbilities()  # it applies nothing of its own

    def __init__(self, model: str) -> None:
        self.name = f"canned:{model}"

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        return [
            CandidateBatch(
                tuple(Candidate(" " + CANNED[k % len(CANNED)], 8) for k in range(r.n)),
                tokens_sampled=8 * r.n,
                prompt_tokens=0,
                seconds=0.0,
            )
            for r in requests
        ]


@pytest.fixture(scope="module")
def canned_engine() -> str:
    """The walk-through's registration (a plugin's: its description and abilities given
    here; a built-in engine's live in samark/sampling/catalog.py)."""
    if "canned" not in engine_names():
        register_engine(
            "canned",
            description="a fixed list of sentences (CONTRIBUTING.md's walk-through)",
            abilities=CannedSampler.abilities,
        )(CannedSampler)
    return "canned"


def test_an_engine_added_from_outside_is_used_by_name(canned_engine, mpnet_key, tmp_path) -> None:
    """Registered once, the engine is named like the built-in ones: by the registry, by a
    scheme that chooses among candidates, and by `samark generate --engine`."""
    from samark.cli import app

    assert engine_info(canned_engine).abilities == EngineAbilities()
    assert engine_for("samark", "canned:any") == EngineSpec("canned", "any")
    with pytest.raises(SamarkError, match="needs an engine that applies token_layer"):
        engine_for("samark-layered", "canned")  # it applies no token layer
    key = tmp_path / "walk.key"
    mpnet_key.save(key)
    args = ["generate", "--text", "The city council met on Monday.", "--key", str(key)]
    args += ["--engine", "canned", "--candidates", "4", "--sentences", "2", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(record["sentences"]) == 2
    assert set(record["sentences"]) <= set(CANNED)
