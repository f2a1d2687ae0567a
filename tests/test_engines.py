"""The engine registry: one spec syntax, each engine's declared abilities (the catalog's and
its class's agree), which engines a scheme writes through and why not, and the walk-through
of CONTRIBUTING.md (an engine added from outside, used by name in a command)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from samark.errors import SamarkError
from samark.sampling.base import (
    BatchEngine,
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


@pytest.fixture(autouse=True)
def _engines_registered_here_stay_here() -> Iterator[None]:
    """An engine a test registers leaves with the test: the registry is the process's, and
    another test file on the same worker lists the engines (tests/test_vllm_absent.py).
    A built-in engine registered on first use stays (its module stays imported)."""
    from samark.sampling import engines
    from samark.sampling.catalog import ENGINE_CATALOG

    before = set(engines.ENGINES._items)
    yield
    for name in set(engines.ENGINES._items) - before - set(ENGINE_CATALOG):
        del engines.ENGINES._items[name]
        engines._INFO.pop(name, None)


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
    from samark.sampling.openai_server import OpenAICompletionsEngine
    from samark.sampling.transformers_engine import TransformersEngine
    from samark.sampling.vllm_engine import VLLMEngine  # imports no vLLM

    classes = {
        "transformers": TransformersEngine,
        "vllm": VLLMEngine,
        "openai": OpenAICompletionsEngine,
    }
    assert {"transformers", "vllm", "openai"} <= set(engine_names())
    for name, cls in classes.items():
        assert engine_info(name).abilities == cls.abilities, name
    assert engine_info("transformers").abilities.logits_processors
    assert not engine_info("vllm").abilities.logits_processors


def test_one_engine_interface_and_writers_on_it(smollm2) -> None:
    """Every engine is a ``Engine``; the one that writes whole token rows is also
    a ``TextWriter`` (the interface token rows write through), a remote server is not; the
    batching queue states the engine's abilities, tokenizer and token count and passes
    nothing else through."""
    from samark.sampling import load_engine
    from samark.sampling.base import Engine, TextWriter
    from samark.sampling.batching import BatchingEngine

    server = load_engine("openai:http://127.0.0.1:9/v1#tiny")
    assert isinstance(smollm2, TextWriter) and isinstance(smollm2, Engine)
    assert isinstance(server, Engine) and not isinstance(server, TextWriter)
    queue = BatchingEngine(smollm2)
    try:
        assert isinstance(queue, Engine) and not isinstance(queue, TextWriter)
        assert queue.abilities == smollm2.abilities and queue.tokenizer is smollm2.tokenizer
        assert queue.count_tokens("Two words.") == smollm2.count_tokens("Two words.")
        assert not hasattr(queue, "write_many") and not hasattr(queue, "eos_ids")
    finally:
        queue.close()


def test_the_registry_loads_the_process_engine(smollm2) -> None:
    """``load_engine``'s specs go through the registry: the transformers engine is the
    process's one (loaded once), a server's is built without a request."""
    from samark.sampling import load_engine
    from samark.sampling.openai_server import OpenAICompletionsEngine

    assert load_engine("transformers:smollm2-135m-instruct") is smollm2
    assert load_engine("transformers", generator="smollm2-135m-instruct") is smollm2
    server = load_engine("openai:http://127.0.0.1:9/v1#tiny")
    assert isinstance(server, OpenAICompletionsEngine)
    assert (server.base_url, server.model, server.tokenizer) == (
        "http://127.0.0.1:9/v1",
        "tiny",
        None,
    )


def test_models_run_where_asked_else_on_a_gpu_torch_sees(monkeypatch, smollm2) -> None:
    """An explicit device wins, then ``SAMARK_DEVICE``, then a GPU when torch sees one; the
    process's engine sits where ``SAMARK_DEVICE`` said when it loaded (the suite's conftest
    sets the CPU unless told otherwise), and so does a fresh embedder."""
    import torch

    from samark import Embedder
    from samark.models import resolve_device

    loaded_for = resolve_device()  # what the process's engine loaded with
    assert smollm2.device.type == torch.device(loaded_for).type
    assert next(smollm2.model.parameters()).device.type == torch.device(loaded_for).type
    monkeypatch.setenv("SAMARK_DEVICE", "cuda:3")
    assert resolve_device("cpu") == "cpu"
    assert resolve_device() == "cuda:3"
    monkeypatch.delenv("SAMARK_DEVICE")
    assert resolve_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    assert Embedder("all-minilm-l6-v2", device="cpu").device == "cpu"


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


# -- an engine from outside, and CONTRIBUTING.md's "Add an engine" -------------------------
class FixedSampler(BatchEngine):
    """One fixed sentence for every row (no model): a plugin's engine."""

    def __init__(self, model: str) -> None:
        self.name = f"fixed:{model}"

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        return [
            CandidateBatch((Candidate(" It rained.", 3),) * r.n, 3 * r.n, 0, 0.0) for r in requests
        ]


def test_an_engine_registered_from_outside_gives_what_it_is() -> None:
    """A plugin registers its engine with its description and abilities (a built-in one
    has them in the catalog); it is then named like the built-in ones."""
    register_engine("fixed-plugin", description="one fixed sentence", abilities=EngineAbilities())(
        FixedSampler
    )
    with pytest.raises(ValueError, match="already registered"):
        register_engine("fixed-plugin", description="again", abilities=EngineAbilities())(
            FixedSampler
        )
    with pytest.raises(ValueError, match="description and its abilities"):
        register_engine("no-description")
    assert engine_info("fixed-plugin").description == "one fixed sentence"
    engine = load_engine("fixed-plugin:m")
    assert isinstance(engine, FixedSampler) and engine.name == "fixed:m"
    assert engine_for("samark", "fixed-plugin") == EngineSpec("fixed-plugin")
    with pytest.raises(SamarkError, match="needs an engine that applies token_layer"):
        engine_for("samark-layered", "fixed-plugin")  # it applies no token layer


def _contributing_block(first_line: str) -> str:
    """CONTRIBUTING.md's python block whose first line is ``first_line``."""
    page = (Path(__file__).resolve().parents[1] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    found = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if b.startswith(first_line)]
    assert len(found) == 1, f"CONTRIBUTING.md has no single block starting {first_line!r}"
    return found[0]


def test_the_engine_walk_through(tmp_path, monkeypatch, mpnet_key) -> None:
    """CONTRIBUTING.md's engine, copied from the page into a module of its own plus its
    one catalog entry: listed without being imported, loaded by name, and used by
    `samark generate --engine`."""
    from samark.cli import app
    from samark.sampling.catalog import ENGINE_CATALOG, EngineInfo

    code = _contributing_block("# src/samark/sampling/canned.py")
    entry = _contributing_block("# src/samark/sampling/catalog.py, ENGINE_CATALOG: one entry")
    names = {"_S": "", "EngineInfo": EngineInfo, "EngineAbilities": EngineAbilities}
    stem, info = eval(entry.splitlines()[1].strip().rstrip(","), names)
    assert (stem, info.name) == ("canned", "canned")
    module = "engine_walkthrough_canned"
    (tmp_path / f"{module}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(ENGINE_CATALOG, info.name, (module, info))  # the one entry

    assert "canned" in engine_names() and module not in sys.modules  # listed, not imported
    assert engine_info("canned") == info
    engine = load_engine("canned:any")
    assert module in sys.modules and engine.name == "canned:any"
    assert engine.abilities == info.abilities  # the class declares what its entry says
    key = tmp_path / "walk.key"
    mpnet_key.save(key)
    args = ["generate", "--text", "The city council met on Monday.", "--key", str(key)]
    args += ["--engine", "canned", "--candidates", "4", "--sentences", "2", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    written = sys.modules[module].SENTENCES
    assert len(record["sentences"]) == 2 and set(record["sentences"]) <= set(written)
