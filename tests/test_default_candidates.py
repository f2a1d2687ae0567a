"""N = 32 is samark-layered's default (issue 63): every door builds it, experiment rows that
take the default get a new fingerprint while rows that name the old one keep their
records, and a row's records can be handed to a row of the same configuration."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from samark.errors import SamarkError
from samark.evaluation.experiment import Experiment, SchemeSpec
from samark.evaluation.row_adoption import adopt_row, same_configuration
from samark.evaluation.store import seal

ROOT = Path(__file__).resolve().parents[1]


def _plain_fingerprint(name: str, params: dict) -> str:
    """A fingerprint as it was computed before defaults could change (revision 0)."""
    return hashlib.sha256(json.dumps([name, params], sort_keys=True).encode()).hexdigest()[:12]


def test_the_layered_mark_draws_32_candidates_and_the_paper_64(mpnet_key) -> None:
    from samark.schemes import create_scheme
    from samark.schemes.samark.layered import DEFAULT_CANDIDATES, SAMarkLayered

    assert DEFAULT_CANDIDATES == 32
    assert create_scheme("samark-layered", key=mpnet_key).config.generation.candidates == 32
    assert SAMarkLayered(mpnet_key).config.generation.candidates == 32
    assert (
        create_scheme("samark-layered", key=mpnet_key, candidates=64).config.generation.candidates
        == 64
    )
    assert create_scheme("samark", key=mpnet_key).config.generation.candidates == 64  # the paper's


def test_the_demo_runs_the_shipped_default() -> None:
    from samark.cli.demo import DEMO_CANDIDATES
    from samark.schemes.samark.layered import DEFAULT_CANDIDATES

    assert DEMO_CANDIDATES == DEFAULT_CANDIDATES


def test_a_changed_default_moves_only_the_rows_that_take_it() -> None:
    # a row that leaves N out now means N = 32: not the records N = 64 wrote
    assert SchemeSpec("samark-layered", "d").fingerprint != _plain_fingerprint("samark-layered", {})
    # naming the old default finds the records written when it was left out
    assert SchemeSpec(
        "samark-layered", "d", params={"candidates": 64}
    ).fingerprint == _plain_fingerprint("samark-layered", {})
    assert SchemeSpec(
        "samark-layered", "c", params={"cells": 64, "candidates": 64}
    ).fingerprint == _plain_fingerprint("samark-layered", {"cells": 64})
    # rows that name another N, and other schemes, are untouched
    assert SchemeSpec(
        "samark-layered", "n", params={"candidates": 16}
    ).fingerprint == _plain_fingerprint("samark-layered", {"candidates": 16})
    assert SchemeSpec("samark", "s").fingerprint == _plain_fingerprint("samark", {})


def test_the_committed_default_run_holds_the_default_rows_records() -> None:
    """The first row of experiments/default.toml is the shipped default, and its records
    (40 texts, every attack) are in the run under the row's current fingerprint."""
    exp = Experiment.load(ROOT / "experiments" / "default.toml")
    first = exp.schemes[0]
    assert first.name == "samark-layered" and first.params == {}
    run = Experiment.load(ROOT / "experiments" / "runs" / "default" / "experiment.toml")
    assert [s.fingerprint for s in run.schemes] == [s.fingerprint for s in exp.schemes]
    records = [
        json.loads(line) for line in (ROOT / "experiments/runs/default/generations.jsonl").open()
    ]
    items = [r["item"] for r in records if r["key"][1:3] == [first.label, first.fingerprint]]
    assert len(set(items)) == exp.dataset.prompts


def _write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _records(row: str, fp: str) -> dict[str, list[dict]]:
    return {
        "generations.jsonl": [
            {"key": ["gen", row, fp, "item1", "12"], "scheme": row, "text": "a"},
            {"key": ["gen", "other", "f0", "item1", "12"], "scheme": "other", "text": "b"},
        ],
        "detections.jsonl": [
            {"key": ["detect", row, fp, "item1", "none", ""], "scheme": row, "p_value": 0.5},
            {"key": ["det", "human", "h1"], "scheme": "human", "p_value": 0.3},
        ],
    }


FILES = ("generations.jsonl", "attacks.jsonl", "detections.jsonl")


def test_adopting_a_row_rekeys_its_records_and_nothing_else(tmp_path) -> None:
    for name, recs in _records("N = 32", "aaa").items():
        _write(tmp_path / name, recs)
    moved = adopt_row(tmp_path, FILES, ("N = 32", "aaa"), ("default", "bbb"))
    assert moved == {"generations.jsonl": 1, "detections.jsonl": 1}
    gens = [json.loads(x) for x in (tmp_path / "generations.jsonl").open()]
    assert gens[0]["key"] == ["gen", "default", "bbb", "item1", "12"]
    assert gens[0]["scheme"] == "default" and gens[0]["text"] == "a"
    assert gens[1]["key"][1] == "other"  # another row is untouched
    dets = [json.loads(x) for x in (tmp_path / "detections.jsonl").open()]
    assert dets[0]["key"][:3] == ["detect", "default", "bbb"] and dets[1]["scheme"] == "human"
    # nothing left to move, and the new row's records are never overwritten
    with pytest.raises(SamarkError, match="no records"):
        adopt_row(tmp_path, FILES, ("N = 32", "aaa"), ("default", "ddd"))
    for name, recs in _records("N = 16", "ccc").items():
        with (tmp_path / name).open("a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs[:1]))
    before = (tmp_path / "generations.jsonl").read_text()
    with pytest.raises(SamarkError, match="already has records"):
        adopt_row(tmp_path, FILES, ("N = 16", "ccc"), ("default", "bbb"))
    assert (tmp_path / "generations.jsonl").read_text() == before


def test_adoption_refuses_sealed_records(tmp_path) -> None:
    for name, recs in _records("N = 32", "aaa").items():
        _write(tmp_path / name, recs)
    seal(tmp_path / "generations.jsonl")
    with pytest.raises(SamarkError, match="sealed"):
        adopt_row(tmp_path, FILES, ("N = 32", "aaa"), ("default", "bbb"))


def test_only_one_configuration_may_adopt(mpnet) -> None:
    from samark.embed import new_key
    from samark.schemes import create_scheme

    key = new_key(mpnet, cells=64)
    default = create_scheme("samark-layered", key=key, embedder=mpnet)
    named = create_scheme("samark-layered", key=key, embedder=mpnet, candidates=32, cells=64)
    assert same_configuration(default, named) == []
    other = create_scheme("samark-layered", key=key, embedder=mpnet, candidates=64)
    assert any("candidates=64" in d for d in same_configuration(default, other))
    assert any("class" in d for d in same_configuration(default, create_scheme("samark", key=key)))


def test_generate_shows_each_sentence_and_the_time_left() -> None:
    from samark.cli.common import LineProgress, duration, sentence_progress

    assert [duration(s) for s in (4.2, 89, 150, 3900)] == ["4 s", "89 s", "2 min", "1 h 5 min"]
    bar = LineProgress(every=0.0)
    task = bar.add_task("drawing candidates for sentence 1 of 3", total=3)
    on_sentence = sentence_progress(bar, task, 3)
    on_sentence("One.", {"candidates": 32, "matched": 5})
    first = bar.tasks[task]["description"]
    assert first.startswith("sentence 1/3: 32 candidates, 5 matched") and "left" in first
    on_sentence("Two.", {"candidates": 32, "matched": 2})
    on_sentence("Three.", {"candidates": 32, "matched": 7})
    last = bar.tasks[task]["description"]
    assert last.startswith("sentence 3/3") and "left" not in last
