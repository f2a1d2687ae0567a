"""The OpenAI-compatible server engine against a real server on loopback: ``transformers
serve`` (transformers' own FastAPI server) serving the SmolLM2 weights. It ignores ``n`` and
answers one choice per request, so it also exercises the "fewer than N choices" path."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from samark.sampling.base import SamplingParams

pytest.importorskip("fastapi", reason="`transformers serve` needs fastapi (samark[test])")
pytest.importorskip("uvicorn", reason="`transformers serve` needs uvicorn (samark[test])")
pytest.importorskip("openai", reason="the server engine needs openai (samark[server])")

from samark.sampling.openai_server import OpenAICompletionsSampler, ServerError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from samark.models import DEFAULT_GENERATOR, resolve_generator

    if shutil.which("transformers") is None:
        pytest.skip("the `transformers` CLI is not on PATH")
    _, source = resolve_generator(DEFAULT_GENERATOR)
    model = tmp_path_factory.mktemp("served") / "smollm2"
    model.mkdir()
    for f in Path(source).iterdir():
        (model / f.name).symlink_to(f)
    # the server samples only if the model's generation config says so
    config = json.loads((Path(source) / "generation_config.json").read_text())
    (model / "generation_config.json").unlink()
    (model / "generation_config.json").write_text(json.dumps({**config, "do_sample": True}))
    port = _free_port()
    log = tmp_path_factory.mktemp("served") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                "transformers",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--device",
                "cpu",
                "--dtype",
                "float32",
                str(model),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"transformers serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)
    yield f"{base}/v1", str(model)
    proc.terminate()
    proc.wait(timeout=30)


def test_server_candidates_are_topped_up_to_n(server) -> None:
    url, model = server
    sampler = OpenAICompletionsSampler(url, model, max_retries=0)
    batch = sampler.sample(
        "The city council met on Monday to discuss the budget. The mayor said",
        4,
        SamplingParams(max_sentence_tokens=40),
        seed=1,
    )
    assert len(batch.candidates) == 4
    assert sampler.last_requests > 1  # the server answered fewer than n choices
    assert batch.tokens_sampled > 0
    complete = batch.complete
    assert complete and all(t.strip() and t.strip()[-1] in '.!?"' for t in complete)


def test_samark_generates_and_detects_through_the_server(server, mpnet, mpnet_key) -> None:
    from samark import SAMark, SAMarkConfig

    url, model = server
    scheme = SAMark(
        mpnet_key,
        config=SAMarkConfig(candidates=4, max_sentence_tokens=40),
        embedder=mpnet,
        sampler=OpenAICompletionsSampler(url, model),
    )
    gen = scheme.generate(
        "Scientists found a new frog species in Peru.", max_new_sentences=2, seed=3
    )
    assert 1 <= len(gen.sentences) <= 2
    assert scheme.detect(gen.text).n_sentences >= 1


def test_server_refusal_is_a_clear_error(server) -> None:
    url, _ = server
    sampler = OpenAICompletionsSampler(url, "no/such-model", max_retries=0, timeout=60)
    with pytest.raises(ServerError, match=r"refused|returned"):
        sampler.sample("Hello.", 2, SamplingParams(max_sentence_tokens=8), seed=0)


def test_server_down_is_a_clear_error() -> None:
    sampler = OpenAICompletionsSampler(
        f"http://127.0.0.1:{_free_port()}/v1", "m", max_retries=0, timeout=5
    )
    with pytest.raises(ServerError, match="unreachable"):
        sampler.sample("Hello.", 2, SamplingParams(max_sentence_tokens=8))
