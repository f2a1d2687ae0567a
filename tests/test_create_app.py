"""Serving from Python without the CLI: ``create_app(ServerConfig(...))`` builds the whole
server from a key or a keyring, a scheme name and an engine spec (the block of
docs/serving.md, run as written), with the session's SmolLM2 and mpnet (loaded once)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="serving needs samark[server]")
pytest.importorskip("uvicorn", reason="serving needs samark[server]")

from samark.errors import SamarkError
from samark.sampling.batching import BatchingEngine
from samark.serving import ServerConfig, ServeSettings, create_app

TOKEN = "python-served-token-0123456789"
HUMAN = (
    "The council approved the budget on Tuesday after a long debate. Residents had asked "
    "for more money for parks and libraries. The mayor said the plan balances those needs."
)
ACCESS = ServeSettings(tokens=frozenset({TOKEN}), default_sentences=2, max_sentences=2)


def _documented_block() -> str:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "serving.md").read_text()
    section = doc.split("## Serving from Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/serving.md lost its Python block"
    return found.group(1)


def test_the_documented_block_serves(
    tmp_path, monkeypatch, mpnet_key, smollm2, served_app, post_json
) -> None:
    """docs/serving.md's five lines, run as written (a key file my.key, the token in
    SAMARK_API_TOKEN): a server that answers with the scheme, its embedder and engine,
    detects, and refuses a caller without the token."""
    mpnet_key.save(tmp_path / "my.key")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SAMARK_API_TOKEN", TOKEN)
    namespace: dict[str, Any] = {}
    exec(compile(_documented_block(), "docs/serving.md", "exec"), namespace)
    app = namespace["app"]
    engine = app.state.worker.scheme.engine
    assert isinstance(engine, BatchingEngine) and engine.engine is smollm2  # loaded once
    with served_app(app) as base:
        with urllib.request.urlopen(f"{base}/healthz", timeout=60) as response:
            health = json.loads(response.read())
        assert health["scheme"] == "samark" and health["embedder"] == "all-mpnet-base-v2"
        status, found = post_json(base, "/v1/detect", {"text": HUMAN}, TOKEN)
        assert status == 200 and found["is_watermarked"] is False and found["n_units"] == 3
        status, _ = post_json(base, "/v1/detect", {"text": HUMAN}, "not-" + TOKEN)
        assert status == 401


def test_a_keyring_served_from_python_writes_and_names_payloads(
    tmp_path, mpnet, smollm2, served_app, post_json
) -> None:
    """A keyring of two keys served with a token scheme: a request's payload marks with
    its key, and detection against the ring names that key."""
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring

    ring = Keyring.create(tmp_path / "ring", mpnet.identity)
    for i, label in enumerate(["tenant-a", "tenant-b"]):
        ring.add(WatermarkKey(bytes([90 + i]) * 32, mpnet.identity), label)
    config = ServerConfig(keyring=tmp_path / "ring", scheme="kgw", access=ACCESS)
    app = create_app(config)
    assert app.state.worker.scheme.engine is smollm2  # the token row's own engine
    with served_app(app) as base:
        body = {"model": "samark", "prompt": "The city council met on Monday.", "payload": 0}
        body |= {"max_sentences": 2, "seed": 3}
        status, made = post_json(base, "/v1/completions", body, TOKEN)
        assert status == 200, made
        assert made["samark"]["key_label"] == "tenant-a" and made["samark"]["payload"] == 0
        text = made["choices"][0]["text"]
        status, found = post_json(base, "/v1/detect", {"text": text}, TOKEN)
        assert status == 200 and found["ring_keys"] == 2
        assert found["is_watermarked"] is True and found["key_label"] == "tenant-a"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "serve a key or a keyring"),
        ({"key": "k", "scheme": "unwatermarked"}, "no key and no detector"),
        ({"key": "k", "scheme": "kgw", "engine": "vllm"}, "kgw writes through transformers"),
        ({"key": "k", "candidates": 0}, "candidates must be at least 1"),
        ({"key": "k", "scheme": "kgw", "statistic": "scan"}, "--statistic is not an option of kgw"),
        ({"key": "k", "label": "a"}, "label chooses a key of a keyring"),
    ],
)
def test_a_config_that_cannot_serve_is_refused_before_anything_loads(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(SamarkError, match=message):
        ServerConfig(access=ACCESS, **fields)
