"""``samark generate --engine vllm:MODEL`` in a fresh process, as a user runs it: stdout
holds the command's output and nothing else (vLLM's log lines, its engine processes'
included, go to stderr), so ``> out.txt`` and ``--json >> runs.jsonl`` stay clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from samark.keys import WatermarkKey

pytestmark = pytest.mark.vllm

PROMPT = "The city council met on Monday to discuss the budget."


def _generate(key_file, *extra: str) -> subprocess.CompletedProcess[str]:
    """One ``samark generate`` through vLLM in a new process, in the environment a user's
    shell has: no ``VLLM_LOGGING_*`` setting (this session's engine may have set some)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_LOGGING")}
    env.setdefault("OMP_NUM_THREADS", "1")
    done = subprocess.run(
        [
            sys.executable, "-m", "samark", "generate", "--text", PROMPT,
            "--key", str(key_file), "--scheme", "vllm-gumbel",
            "--engine", "vllm:smollm2-135m-instruct", "--sentences", "2", "--seed", "1",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_generate_through_vllm_writes_only_its_output_to_stdout(minilm, tmp_path) -> None:
    key_file = tmp_path / "stdout.key"
    WatermarkKey(b"vllm-stdout".ljust(32, b"0"), minilm.identity).save(key_file)

    plain = _generate(key_file)
    as_json = _generate(key_file, "--json")
    lines = as_json.stdout.splitlines()
    records = [json.loads(line) for line in lines]  # every stdout line is JSON
    assert len(records) == 1, lines
    # the whole of stdout is the text: the same seed writes the same text in both runs
    assert plain.stdout == records[0]["text"] + "\n"
    assert records[0]["text"].strip()
