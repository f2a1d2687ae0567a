"""``samark serve --engine vllm`` as an operator runs it: a real server process on
loopback, the official ``openai`` client, marked text detected by ``/v1/detect``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="`samark serve` needs samark[server]")
pytest.importorskip("fastapi", reason="`samark serve` needs samark[server]")

import openai

from samark.keys import WatermarkKey
from samark.segment import split_sentences

pytestmark = pytest.mark.vllm
TOKEN = "vllm-tier-token-0123456789abcdef"


def _wait(base: str, process: subprocess.Popen, log: Path, limit_s: float = 600) -> None:
    """Until the server answers /healthz (vLLM loads in about a minute on 2 cores)."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if process.poll() is not None:
            pytest.fail(f"samark serve exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(2)
    pytest.fail(f"samark serve did not start in {limit_s} s:\n{log.read_text()[-3000:]}")


def _detect(base: str, text: str) -> dict:
    request = urllib.request.Request(
        f"{base}/v1/detect",
        data=json.dumps({"text": text}).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return dict(json.loads(response.read()))


def test_serve_on_vllm_marks_and_detects(tmp_path, minilm, free_port) -> None:
    key = WatermarkKey(b"vllm-serve-key".ljust(32, b"0"), minilm.identity)
    key_file = tmp_path / "serve.key"
    key.save(key_file)
    port = free_port()
    log = tmp_path / "serve.log"
    args = [
        *("--key", str(key_file), "--scheme", "samark-layered", "--engine", "vllm"),
        *("--candidates", "8", "--sentences", "3", "--port", str(port), "--concurrency", "2"),
    ]
    env = {**os.environ, "SAMARK_API_TOKENS": TOKEN, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("samark")), "serve", *args],
            stdout=out,
            stderr=out,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(base, process, log)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=TOKEN, max_retries=0, timeout=600)
        answer = client.completions.create(
            model="samark",
            prompt="The city council voted on Tuesday to approve a new budget for schools.",
            seed=4,
        )
        text = answer.choices[0].text
        assert len(split_sentences(text)) == 3, text
        assert answer.model_extra["samark"]["key_id"] == key.key_id
        found = _detect(base, text)
        assert found["p_value"] < 0.05, found
        human = _detect(
            base,
            "The council approved the budget on Tuesday after a long debate. Residents had "
            "asked for more money for parks and libraries. The mayor said the plan balances "
            "those needs.",
        )
        assert human["p_value"] > 0.01, human
        import psutil  # vLLM's own dependency

        engine = [c.pid for c in psutil.Process(process.pid).children(recursive=True)]
        assert engine  # vLLM's engine core and worker
    finally:
        process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
    # the server stopped vLLM's processes with it: none is left running
    time.sleep(2)
    left = [p for p in engine if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not left, f"vLLM processes outlived the server: {left}"
    secret = json.loads(key_file.read_text())["secret"]
    assert secret not in log.read_text() and secret not in text
