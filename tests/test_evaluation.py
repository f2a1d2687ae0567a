"""The evaluation harness: experiment files, the append-only stage store, and a tiny real
experiment through the CLI that is killed with SIGKILL and resumed."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from samark.errors import SamarkError
from samark.evaluation.experiment import Experiment, ExperimentError
from samark.evaluation.store import FolderLock, RecordStore, compact_folder

TINY = """
name = "tiny"
seed = 1
[dataset]
name = "cnn_dailymail"
prompts = 2
sentences = 2
human_negatives = 5
[[schemes]]
name = "unwatermarked"
params = { tokens_per_sentence = 16 }
[[schemes]]
name = "kgw"
params = { tokens_per_sentence = 16 }
[[schemes]]
name = "samark"
params = { candidates = 4, n_null = 99, max_sentence_tokens = 24 }
[[attacks]]
name = "shuffle"
[metrics]
quality = ["sd", "distinct2", "rep4"]
bootstrap = 50
"""


def test_experiment_errors_are_clear() -> None:
    with pytest.raises(ExperimentError, match="unknown fields"):
        Experiment.parse(TINY + "\ntypo = 1\n")
    with pytest.raises(ExperimentError, match="unknown scheme"):
        Experiment.parse(TINY.replace('name = "kgw"', 'name = "kgw2"'))
    with pytest.raises(ExperimentError, match="unknown attack"):
        Experiment.parse(TINY.replace('name = "shuffle"', 'name = "shufle"'))
    with pytest.raises(ExperimentError, match="duplicate scheme labels"):
        Experiment.parse(TINY + '[[schemes]]\nname = "kgw"\n')
    with pytest.raises(ExperimentError, match="not valid TOML"):
        Experiment.parse("name = ")
    for bad in ("0", "2.5", '"10"'):
        with pytest.raises(ExperimentError, match="human_negatives must be an integer"):
            Experiment.parse(TINY.replace('name = "kgw"', f'name = "kgw"\nhuman_negatives = {bad}'))
    with pytest.raises(ExperimentError, match="asks for 6 human negatives; the experiment has 5"):
        Experiment.parse(TINY.replace('name = "kgw"', 'name = "kgw"\nhuman_negatives = 6'))
    with pytest.raises(ExperimentError, match="research must be true or false"):
        Experiment.parse(TINY.replace('name = "kgw"', 'name = "kgw"\nresearch = "yes"'))
    with pytest.raises(ExperimentError, match="plot_attacks names at most 7"):
        Experiment.parse(TINY.replace("bootstrap = 50", 'bootstrap = 50\nplot_attacks = ["x"]'))
    marked = Experiment.parse(TINY.replace('name = "kgw"', 'name = "kgw"\nresearch = true'))
    plain = Experiment.parse(TINY)
    # a research row is reported apart; its records are the same (same fingerprint)
    assert [s.research for s in marked.schemes] == [False, True, False]
    assert [s.fingerprint for s in marked.schemes] == [s.fingerprint for s in plain.schemes]
    exp = Experiment.parse(TINY)
    assert [s.label for s in exp.only_schemes(["kgw"]).schemes] == ["kgw"]
    assert exp.only_attacks([]).attacks == () and exp.only_attacks(["shuffle"]) == exp
    with pytest.raises(ExperimentError, match="no attack labelled"):
        exp.only_attacks(["Shuffle"])
    scan_row = '[[schemes]]\nname = "samark"\nlabel = "scan"\ntexts_from = "{}"\n'
    with pytest.raises(ExperimentError, match="not another row"):
        Experiment.parse(TINY + scan_row.format("samrak"))
    with pytest.raises(ExperimentError, match="name the row that generates them"):
        Experiment.parse(
            TINY + scan_row.format("samark") + scan_row.replace('"scan"', '"s2"').format("scan")
        )
    with pytest.raises(ExperimentError, match="no prompts of its own"):
        Experiment.parse(TINY + scan_row.format("samark") + "prompts = 1\n")
    with pytest.raises(ExperimentError, match="unknown field 'owner'"):
        Experiment.parse(TINY + scan_row.format("samark") + 'owner = ["samark", "x"]\n')
    with pytest.raises(ExperimentError, match="may not contain ','"):
        Experiment.parse(TINY + '[[schemes]]\nname = "kgw"\nlabel = "KGW, again"\n')

    def lengths(k: int, more: str = "") -> str:
        return TINY.replace("bootstrap = 50", f"bootstrap = 50\nlengths = [{k}]\n{more}")

    with pytest.raises(ExperimentError, match="sentence counts from 1 to 1"):
        Experiment.parse(lengths(2))  # the full length is the detect stage's
    with pytest.raises(ExperimentError, match="names no attack"):
        Experiment.parse(lengths(1, 'length_attacks = ["Shuffle"]'))
    ok = Experiment.parse(lengths(1, 'length_attacks = ["shuffle"]'))
    assert ok.metrics.lengths == (1,) and ok.metrics.length_attacks == ("shuffle",)
    # the judge's reference row: named, or the first row that writes no watermark
    assert exp.reference_row() == exp.schemes[0]
    named = TINY.replace("bootstrap = 50", 'bootstrap = 50\nreference = "kgw"')
    assert Experiment.parse(named).reference_row() == exp.schemes[1]
    with pytest.raises(ExperimentError, match="reference 'KGW' is not a row"):
        Experiment.parse(named.replace('reference = "kgw"', 'reference = "KGW"'))
    assert exp.only_schemes(["kgw"]).reference_row() is None
    # the report's robustness-quality plot finds paraphrases by what the attack declares
    from samark.evaluation.attacks import ATTACKS

    assert ATTACKS.get("doc-p-local").paraphrase and ATTACKS.get("doc-p").paraphrase
    assert not ATTACKS.get("shuffle").paraphrase and not ATTACKS.get("doc-t").paraphrase
    scan = Experiment.parse(TINY + scan_row.format("samark")).schemes[-1]
    assert scan.texts_owner == ("samark", exp.schemes[2].fingerprint)
    assert exp.schemes[2].texts_owner == ("samark", exp.schemes[2].fingerprint)
    sliced = exp.with_prompts(1)
    assert [s.prompts for s in sliced.schemes] == [1, 1, 1]
    assert sliced.dataset == exp.dataset  # a slice keeps the whole run's human negatives
    # the fingerprint changes with the parameters, so changed rows are never reused
    other = Experiment.parse(TINY.replace("candidates = 4", "candidates = 5"))
    assert exp.schemes[2].fingerprint != other.schemes[2].fingerprint
    # a row may draw its key's pivots in a shipped pivot space; its scan twin inherits it
    spaced = Experiment.parse(
        TINY.replace('name = "samark"', 'name = "samark"\npivot_space = "minilm-quiet-64"')
        + scan_row.format("samark")
    )
    assert spaced.schemes[2].fingerprint != exp.schemes[2].fingerprint
    assert spaced.schemes[-1].pivot_space == "minilm-quiet-64"
    assert exp.schemes[2].pivot_space is None  # rows without one keep their fingerprints
    with pytest.raises(ExperimentError, match="unknown pivot_space 'quiet'"):
        Experiment.parse(TINY.replace('name = "samark"', 'name = "samark"\npivot_space = "quiet"'))
    with pytest.raises(ExperimentError, match="whose key draws its pivots in"):
        Experiment.parse(TINY + scan_row.format("samark") + 'pivot_space = "minilm-quiet-64"\n')


WRITER = """
import sys
from samark.evaluation.store import RecordStore
s = RecordStore(sys.argv[1])
i = len(s)
while True:
    s.append(("k", str(i)), {"payload": "x" * 2000, "i": i})
    i += 1
"""


def test_store_survives_sigkill_without_duplicates(tmp_path) -> None:
    path = tmp_path / "stage.jsonl"
    for round_ in range(1, 4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
        deadline = time.time() + 120
        while time.time() < deadline and (
            not path.exists() or path.stat().st_size < round_ * 40_000
        ):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # simulate a torn last line too
    with path.open("ab") as f:
        f.write(b'{"key": ["k", "torn')
    stage = RecordStore(path)
    n = len(stage)
    assert n > 10
    assert sorted(int(r["i"]) for r in stage.records()) == list(range(n))  # no gap, no dup
    stage.append(("k", str(n)), {"i": n})
    lines = path.read_bytes().splitlines()
    assert len(lines) == n + 1  # the torn line is gone, the new one is whole
    assert all(json.loads(line) for line in lines)
    with pytest.raises(ValueError, match="already exists"):
        stage.append(("k", "0"), {})


def test_compaction_seals_every_record_once_and_appends_go_on(tmp_path) -> None:
    path = tmp_path / "detections.jsonl"
    writer = RecordStore(path)
    writer.append(("det", "a"), {"p": 0.5})
    writer.append(("det", "b"), {"p": 0.25})
    with path.open("ab") as f:
        f.write(b'{"key": ["det", "torn')  # a killed writer's last line
    reader = RecordStore(path)
    assert len(reader) == 2
    lines = path.read_bytes().splitlines()[:2]
    done = compact_folder(tmp_path, ["detections.jsonl", "quality.jsonl"])
    assert [name for name, _, _ in done] == ["detections.jsonl"]  # no quality file: skipped
    assert not path.exists()
    sealed = tmp_path / "detections.jsonl.gz"
    assert gzip.decompress(sealed.read_bytes()).splitlines() == lines  # the same bytes
    # a new store reads the sealed records and appends to a new live file
    after = RecordStore(path)
    assert [r["p"] for r in after.records()] == [0.5, 0.25]
    after.append(("det", "c"), {"p": 0.125})
    assert len(path.read_bytes().splitlines()) == 1
    # a store that read before the compaction still sees everything, and no duplicate
    reader.refresh()
    assert [tuple(r["key"]) for r in reader.records()] == [("det", x) for x in "abc"]
    with pytest.raises(ValueError, match="already exists"):
        reader.append(("det", "a"), {"p": 0.9})
    # a crash between sealing and removing the live file leaves a record twice: the sealed
    # copy wins, and the next compaction keeps it once
    with path.open("ab") as f:
        f.write(b'{"key": ["det", "a"], "p": 0.9}\n')
    assert RecordStore(path).get(("det", "a"))["p"] == 0.5
    compact_folder(tmp_path, ["detections.jsonl"])
    assert [json.loads(x)["p"] for x in gzip.decompress(sealed.read_bytes()).splitlines()] == [
        0.5,
        0.25,
        0.125,
    ]
    # the same records give the same file (no timestamp), and nothing new changes nothing
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "detections.jsonl").write_bytes(gzip.decompress(sealed.read_bytes()))
    compact_folder(copy, ["detections.jsonl"])
    assert (copy / "detections.jsonl.gz").read_bytes() == sealed.read_bytes()
    assert compact_folder(tmp_path, ["detections.jsonl"]) == []
    # a reader that found no live file sees a record appended and sealed since
    late = RecordStore(path)
    assert len(late) == 3 and not path.exists()
    RecordStore(path).append(("det", "d"), {"p": 0.0625})
    compact_folder(tmp_path, ["detections.jsonl"])
    late.refresh()
    assert late.get(("det", "d"))["p"] == 0.0625


def test_no_compaction_while_a_run_writes(tmp_path) -> None:
    from samark.evaluation.runner import Run

    run = Run(Experiment.parse(TINY), tmp_path / "run", progress=False)
    run.detections.append(("det", "a"), {"p": 0.5})
    with pytest.raises(SamarkError, match="a run is writing to this folder"):
        Run.compact(tmp_path / "run")
    assert (tmp_path / "run" / "detections.jsonl").exists()  # nothing moved
    other = FolderLock(tmp_path / "run")  # a second writer shares the folder
    run.close()
    with pytest.raises(SamarkError, match="a run is writing"):
        Run.compact(tmp_path / "run")
    other.release()
    assert [name for name, _, _ in Run.compact(tmp_path / "run")] == ["detections.jsonl"]
    assert Run.open(tmp_path / "run").detections.get(("det", "a"))["p"] == 0.5
    with pytest.raises(SamarkError, match="not a run folder"):
        Run.compact(tmp_path)


@dataclass
class _Ran:
    returncode: int
    stdout: str
    stderr: str


def _run(args: list[str], cwd: Path) -> _Ran:
    """``samark ARGS`` in ``cwd``, in this process (the models it loads stay loaded for
    the next call); the one run that is killed -9 is a real subprocess."""
    from typer.testing import CliRunner

    from samark.cli import app

    here = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return _Ran(result.exit_code, result.stdout, result.stderr)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_tiny_experiment_killed_resumed_and_extended(tmp_path) -> None:
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY)
    run_dir = tmp_path / "run"
    gens = run_dir / "generations.jsonl"
    # 1. start, kill -9 as soon as SAMark has written its first record
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "samark",
            "eval",
            "run",
            str(toml),
            "-o",
            str(run_dir),
            "--no-report",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    while time.time() < deadline:
        if gens.exists() and any(r["scheme"] == "samark" for r in _lines(gens)):
            break
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = {tuple(r["key"]): r for r in _lines(gens)}
    assert any(k[1] == "samark" for k in first)
    # 2. resume to the end, with the report
    done = _run(["eval", "run", str(toml), "-o", str(run_dir)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("generations", "attacks", "detections", "quality"):
        keys = [tuple(r["key"]) for r in _lines(run_dir / f"{name}.jsonl")]
        assert len(keys) == len(set(keys)), f"duplicates in {name}"
    after = {tuple(r["key"]): r for r in _lines(gens)}
    assert Counter(k[1] for k in after) == {"unwatermarked": 2, "kgw": 2, "samark": 2}
    for k, r in first.items():  # finished work was kept, not redone
        assert after[k]["text"] == r["text"]
    dets = _lines(run_dir / "detections.jsonl")
    assert sum(d["scheme"] == "human" for d in dets) == 2 * 5  # per detector: kgw, samark
    assert {(d["scheme"], d["attack"]) for d in dets if d["scheme"] != "human"} == {
        ("kgw", "none"),
        ("kgw", "shuffle"),
        ("samark", "none"),
        ("samark", "shuffle"),
    }
    report = (run_dir / "report" / "report.md").read_text()
    assert "| samark |" in report and "TP@FP1%" in report
    # every attack record says how faithful the attack was; shuffle keeps every sentence
    attacked = _lines(run_dir / "attacks.jsonl")
    assert len(attacked) == 4  # every text of kgw and samark, even one that came out empty
    for a in attacked:
        if a.get("source_empty"):  # nothing was attacked, so nothing was measured
            assert a["text"] == "" and "strength_embedder" not in a
            continue
        assert a["aligned_similarity"] > 0.9 and a["word_overlap"] == 1.0
        assert a["strength_embedder"] != "all-mpnet-base-v2"  # never the watermark's own
    # every detection carries its scheme's signal diagnostics
    for d in dets:
        if d["n_units"] == 0:
            continue  # an empty text: p = 1, no diagnostics
        if d["detector"].startswith("kgw"):
            assert 0 <= d["details"]["green_fraction"] <= 1
        else:
            assert 0 <= d["details"]["flag_side_share"] <= 1
            assert -1 <= d["details"]["mean_signed_cosine"] <= 1
    assert "## Attack fidelity" in report and "## Signal diagnostics" in report
    assert "flag_side_share" in report and "green_fraction" in report
    assert (run_dir / "report" / "signal.csv").stat().st_size > 100
    # experiments keep SAMark's per-step research records, and the report reads them
    steps = [st for g in _lines(gens) if g["scheme"] == "samark" for st in g["steps"]]
    assert steps and all(len(st["signal_chosen"]) == 2 for st in steps)
    assert "Where the margin comes from" in report
    for png in ("roc.png", "p-values.png", "tradeoff.png", "cost.png"):
        assert (run_dir / "report" / png).stat().st_size > 1000
    status = _run(["eval", "status", str(run_dir)], tmp_path)
    assert status.returncode == 0, status.stderr[-2000:]
    cells = re.findall(r"(\d+)/(\d+)", status.stdout)
    assert len(cells) == 3 * 6 and all(done == asked for done, asked in cells), status.stdout
    # kgw: 2 prompts generated, 5 human negatives; each text is shuffled once and detected
    # twice (as written and shuffled), and each non-empty one scored once for quality; no
    # lengths asked
    gen, attacked_n, detected, human, by_length, quality = cells[6:12]
    assert by_length == ("0", "0")
    assert gen == ("2", "2") and human == ("5", "5")
    assert int(detected[1]) == 2 * int(attacked_n[1]) == 4
    written = sum(bool(g["text"].strip()) for g in _lines(gens) if g["scheme"] == "kgw")
    assert int(quality[1]) == written
    elsewhere = _run(["eval", "report", str(run_dir), "-o", str(tmp_path / "rep")], tmp_path)
    assert elsewhere.returncode == 0, elsewhere.stderr[-2000:]
    assert (tmp_path / "rep" / "report.md").read_text() == report
    run_key = json.loads((run_dir / "key.json").read_text())
    secret = run_key["secret"]
    # a run's key names no keyed cells (samark keygen's do): rows ask for them in params
    assert run_key["version"] == 1 and "cells" not in run_key
    for f in run_dir.rglob("*"):
        if f.is_file() and f.name != "key.json" and f.suffix in (".jsonl", ".md", ".csv", ".toml"):
            assert secret not in f.read_text(), f"the key leaked into {f.name}"
    # 3. re-running a finished experiment does no model work
    sizes = {p.name: p.stat().st_size for p in run_dir.glob("*.jsonl")}
    again = _run(["eval", "run", str(toml), "-o", str(run_dir), "--no-report"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert {p.name: p.stat().st_size for p in run_dir.glob("*.jsonl")} == sizes
    # 4. adding an attack runs only that attack
    toml.write_text(
        TINY
        + textwrap.dedent("""
        [[attacks]]
        name = "word-delete"
        label = "Word-D 30%"
        params = { ratio = 0.3 }
    """)
    )
    more = _run(["eval", "run", str(toml), "-o", str(run_dir), "--no-report"], tmp_path)
    assert more.returncode == 0, more.stderr[-2000:]
    assert gens.stat().st_size == sizes["generations.jsonl"]
    attacks = _lines(run_dir / "attacks.jsonl")
    new = [r for r in attacks if r["attack"] == "Word-D 30%"]
    assert len(new) == 4, Counter(r["attack"] for r in attacks)  # 2 texts x (kgw, samark)
    assert len(attacks) == 8  # the 4 shuffle records kept
    # 5. a detection-only row scores samark's texts under another statistic: it generates,
    # attacks and scores quality for nothing; it detects every text and its own negatives
    # (three of the five, evenly spaced: a costly detector's ``human_negatives``).
    # Power against length: every detector also scores each text's and negative's first
    # sentence, as written and shuffled
    sizes = {p.name: p.stat().st_size for p in run_dir.glob("*.jsonl")}
    toml.write_text(
        toml.read_text().replace(
            "bootstrap = 50", 'bootstrap = 50\nlengths = [1]\nlength_attacks = ["shuffle"]'
        )
        + textwrap.dedent("""
        [[schemes]]
        name = "samark"
        label = "samark scan"
        texts_from = "samark"
        human_negatives = 3
        params = { candidates = 4, n_null = 99, max_sentence_tokens = 24, statistic = "scan" }
    """)
    )
    scan = _run(["eval", "run", str(toml), "-o", str(run_dir)], tmp_path)
    assert scan.returncode == 0, scan.stderr[-2000:]
    for name in ("generations", "attacks", "quality"):
        assert (run_dir / f"{name}.jsonl").stat().st_size == sizes[f"{name}.jsonl"], name
    dets = _lines(run_dir / "detections.jsonl")
    mine = [d for d in dets if d["scheme"] == "samark scan"]
    assert {d["statistic"] for d in mine} == {"scan"}
    assert len(mine) == len([d for d in dets if d["scheme"] == "samark"]) >= 2
    scan_humans = [d for d in dets if d["scheme"] == "human" and "/scan/" in d["detector"]]
    from samark.evaluation.runner import Run

    negatives = [d.id for d in Run.open(run_dir).negatives()]
    assert [d["item"] for d in scan_humans] == [negatives[i] for i in (0, 2, 4)]
    report = (run_dir / "report" / "report.md").read_text()
    assert "| samark scan |" in report
    assert "fewer human negatives" in report and "samark scan (3)" in report
    prefixes = _lines(run_dir / "lengths.jsonl")
    humans = Counter(d["detector"] for d in prefixes if d["scheme"] == "human")
    assert sorted(humans.values()) == [3, 5, 5]  # samark scan, kgw, samark z
    assert Counter(d["scheme"] for d in prefixes if d["scheme"] != "human") == {
        "kgw": 4,  # 2 texts x (as written, shuffled) x one length
        "samark": 4,
        "samark scan": 4,
    }
    full = {(d["scheme"], d["item"], d["attack"]): d for d in dets if d["scheme"] != "human"}
    for d in prefixes:
        assert d["sentences"] == 1
        if d["scheme"] == "human" or d["n_units"] == 0:
            continue
        whole = full[(d["scheme"], d["item"], d["attack"])]
        if d["scheme"] == "kgw":  # no more tokens than the text (all of them for a text
            # that came out as one run-on sentence)
            assert 0 < d["n_units"] <= whole["n_units"]
        else:
            assert d["n_units"] == 1 and d["unit"] == "sentence"
    assert "## Power against length" in report and "| 1 sent. | 2 sent. |" in report
    assert (run_dir / "report" / "length.png").stat().st_size > 1000
    status = _run(["eval", "status", str(run_dir)], tmp_path)
    cells = re.findall(r"(\d+)/(\d+)", status.stdout)
    assert cells[6 + 4] == ("4", "4") and all(d == a for d, a in cells), status.stdout
    # 6. a compacted folder holds the same records: the same status and report, and
    # re-running it does no model work
    compact = _run(["eval", "compact", str(run_dir)], tmp_path)
    assert compact.returncode == 0, compact.stderr[-2000:]
    assert not list(run_dir.glob("*.jsonl")) and len(list(run_dir.glob("*.jsonl.gz"))) == 5
    assert _run(["eval", "status", str(run_dir)], tmp_path).stdout == status.stdout
    sealed = _run(["eval", "report", str(run_dir), "-o", str(tmp_path / "sealed")], tmp_path)
    assert sealed.returncode == 0, sealed.stderr[-2000:]
    assert (tmp_path / "sealed" / "report.md").read_text() == report
    again = _run(["eval", "run", str(toml), "-o", str(run_dir), "--no-report"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not list(run_dir.glob("*.jsonl"))


def test_public_key_is_shared_and_never_mixed_with_a_secret_one(tmp_path) -> None:
    from samark.errors import SamarkError
    from samark.evaluation.runner import Run

    with pytest.raises(ExperimentError, match="key must be one of"):
        Experiment.parse('key = "open"\n' + TINY)
    public = Experiment.parse('key = "public"\nembedder = "all-minilm-l6-v2"\n' + TINY)
    a, b = Run(public, tmp_path / "a", progress=False), Run(public, tmp_path / "b", progress=False)
    assert a.key.key_id == b.key.key_id  # any machine resuming the run holds the same key
    assert not (tmp_path / "a" / "key.json").exists()
    reseeded = Experiment.parse(public.source.replace("seed = 1", "seed = 2"))
    assert Run(reseeded, tmp_path / "c", progress=False).key.key_id != a.key.key_id
    # a folder made with a secret key refuses the public one, and the other way round
    secret = Experiment.parse('embedder = "all-minilm-l6-v2"\n' + TINY)
    assert Run(secret, tmp_path / "s", progress=False).key.key_id != a.key.key_id
    with pytest.raises(SamarkError, match="holds a secret key"):
        _ = Run(public, tmp_path / "s", progress=False).key
    a.generations.append(("gen", "x"), {"text": "..."})
    with pytest.raises(SamarkError, match="no key\\.json"):
        _ = Run(secret, tmp_path / "a", progress=False).key


def test_a_public_key_may_be_made_as_a_new_key_is(mpnet) -> None:
    """``key_cells = "default"``: the run's public key names the cells and null draws a key
    from ``samark keygen`` names, so a row with no params is the shipped default
    (experiments/default.toml); without it, public keys are as they always were."""
    from samark.evaluation.runner import public_key
    from samark.keys.samark_material import DEFAULT_CELLS, DEFAULT_NULL_DRAWS

    default = Experiment.load(Path(__file__).parents[1] / "experiments" / "default.toml")
    assert default.key_cells == DEFAULT_CELLS and default.schemes[0].params == {}
    key = public_key(default, mpnet)
    assert (key.samark.cells, key.samark.null_draws) == (DEFAULT_CELLS, DEFAULT_NULL_DRAWS)
    assert key.made_for() == default.schemes[0].name == "samark-layered"
    plain = Experiment.parse('key = "public"\n' + TINY)
    assert plain.key_cells == 0 and public_key(plain, mpnet).samark.null_draws == "full"
    with pytest.raises(ExperimentError, match='key_cells is for key = "public"'):
        Experiment.parse('key_cells = "default"\n' + TINY)
    with pytest.raises(ExperimentError, match="key_cells"):
        Experiment.parse('key = "public"\nkey_cells = 1\n' + TINY)


def test_an_empty_generation_is_a_miss_not_a_gap(tmp_path, smollm2) -> None:
    """A row that wrote nothing for a prompt has missed it: the text is 'attacked' (to
    nothing), detected with p = 1 under every attack, and stays in the TP denominator."""
    from samark.evaluation.report import (
        attack_table,
        corpus_fpr_table,
        detection_table,
        efficiency_table,
        write_report,
    )
    from samark.evaluation.runner import Run
    from samark.segment import split_sentences

    exp = Experiment.parse(
        TINY.replace("human_negatives = 5", "human_negatives = 3")
        .replace("bootstrap = 50", "bootstrap = 50\nfprs = [0.05]\nalpha = 0.05")
        .replace('[[schemes]]\nname = "unwatermarked"\nparams = { tokens_per_sentence = 16 }\n', "")
        .replace(
            '[[schemes]]\nname = "samark"\n'
            "params = { candidates = 4, n_null = 99, max_sentence_tokens = 24 }\n",
            "",
        )
    )
    assert [s.label for s in exp.schemes] == ["kgw"]
    run = Run(exp, tmp_path / "run", progress=False)
    spec = exp.schemes[0]
    assert run.key  # the run's key exists before its first record
    empty, written = run.examples()
    for e, text in ((empty, ""), (written, e_text := written.human)):
        sentences = split_sentences(text)  # the human continuation: as many as asked
        run.generations.append(
            run.keys.generation(spec, e),
            {"scheme": "kgw", "item": e.id, "prompt": e.prompt, "text": text,
             "sentences": sentences, "tokens_sampled": len(text.split()),
             "output_tokens": len(text.split()), "seconds": 0.0},
        )  # fmt: skip
    assert e_text
    run.run(["attack", "detect", "quality"])
    attacks = {r["item"]: r for r in run.attacks.records()}
    assert attacks[empty.id]["text"] == "" and attacks[empty.id]["source_empty"]
    assert "source_empty" not in attacks[written.id]
    mine = [d for d in run.detections.records() if d["item"] == empty.id]
    assert sorted(d["attack"] for d in mine) == ["none", "shuffle"]
    assert all(d["p_value"] == 1.0 for d in mine)
    assert [r["item"] for r in run.quality.records()] == [written.id]
    (row,) = run.status()
    assert row["attack"] == (2, 2) and row["detect"] == (4, 4) and row["quality"] == (1, 1)
    # a record of an earlier version of the row (same label, another fingerprint) stays in
    # the file but out of the report
    stale = dict(mine[0], p_value=1e-9, z=50.0)
    del stale["key"]
    run.detections.append(("detect", "kgw", "0" * 12, empty.id, "none", ""), stale)
    table = detection_table(run)
    assert set(table["n_positive"]) == {2}  # the miss is in the denominator
    assert table.loc[table["attack"] == "none", "tpr_at_p_0.05"].item() <= 0.5
    assert attack_table(run)["n"].tolist() == [1]  # fidelity of real attacks only
    assert efficiency_table(run)["short_texts"].tolist() == [1]
    # a report at another alpha and FPR than 1% (no column assumes them)
    assert {"tp@fp5%", "tpr_at_p_0.05", "human_fpr_at_p_0.05"} <= set(table.columns)
    report = write_report(tmp_path / "run").read_text()
    assert "TP@FP5% / AUC" in report and "## Calibrated decision p < 0.05" in report
    # the negatives' FPR per source corpus: the prompts' own continuations, then CNN windows
    corpora = corpus_fpr_table(run)
    assert dict(zip(corpora["corpus"], corpora["n"], strict=True)) == {
        "continuations": 2,
        "cnn_dailymail": 1,
    }
    assert "by corpus" in report and "continuations (n=2)" in report


def test_reading_a_run_writes_nothing(tmp_path) -> None:
    """Status and reports open a run folder read-only: no key is made, the experiment file
    is not rewritten, however its text is laid out."""
    from samark.evaluation.runner import Run

    folder = tmp_path / "run"
    folder.mkdir()
    source = folder / "experiment.toml"
    source.write_text("# written by hand\n" + TINY)
    before = source.stat().st_mtime_ns
    run = Run.open(folder)
    rows = {r["scheme"]: r for r in run.status()}
    assert rows["kgw"]["generate"] == (0, 2) and rows["kgw"]["human"] == (0, 5)
    assert rows["unwatermarked"]["human"] == (0, 0)
    assert not (folder / "key.json").exists()
    assert source.stat().st_mtime_ns == before and source.read_text().startswith("# written")
    assert sorted(p.name for p in folder.iterdir()) == ["experiment.toml"]
    with pytest.raises(SamarkError, match=r"no key\.json yet"):
        run.key  # noqa: B018


def test_avoided_domains_of_an_experiment(mpnet) -> None:
    from samark.embed import AVOIDED_DOMAINS, LEGACY_AVOIDED_DOMAINS
    from samark.evaluation.runner import public_key

    assert Experiment.parse(TINY).avoided_domains == LEGACY_AVOIDED_DOMAINS
    named = Experiment.parse('avoided_domains = ["news", "wiki", "fiction"]\n' + TINY)
    assert named.avoided_domains == AVOIDED_DOMAINS
    for bad in ('"news"', '["news", "news"]', '["news", 3]', '[""]'):
        with pytest.raises(ExperimentError, match="avoided_domains"):
            Experiment.parse(f"avoided_domains = {bad}\n" + TINY)
    with pytest.raises(SamarkError, match="avoided domains must be"):
        public_key(Experiment.parse('avoided_domains = ["poetry"]\n' + TINY), mpnet)
    plain, more = (
        public_key(Experiment.parse(t), mpnet)
        for t in ('key = "public"\n' + TINY, 'key = "public"\n' + named.source)
    )
    assert plain.samark.avoid.shape == (2, 768) and more.samark.avoid.shape == (3, 768)
    np.testing.assert_array_equal(more.samark.avoid[:2], plain.samark.avoid)
    np.testing.assert_allclose(more.samark.pivots(768, 2) @ more.samark.avoid.T, 0.0, atol=1e-12)


@pytest.mark.parametrize(
    ("toml", "key_id"),
    [
        # the key ids in the committed records of experiments/runs/paper and .../local
        ("paper.toml", "1e58e2491cb59089"),
        ("local.toml", "555aa325215bf248"),
    ],
)
def test_committed_runs_keep_their_public_keys(mpnet, toml: str, key_id: str) -> None:
    from samark.evaluation.runner import public_key

    experiment = Experiment.load(Path(__file__).parents[1] / "experiments" / toml)
    assert public_key(experiment, mpnet).key_id == key_id


def test_store_refresh_sees_another_writer_without_rereading(tmp_path) -> None:
    # two processes on one folder: each sees the other's records before scoring an item
    path = tmp_path / "detections.jsonl"
    mine, theirs = RecordStore(path), RecordStore(path)
    mine.append(("det", "a"), {"p": 0.5})
    assert ("det", "a") in theirs  # first read: the whole file
    theirs.append(("det", "b"), {"p": 0.1})
    assert ("det", "b") not in mine  # not yet read
    mine.refresh()
    assert ("det", "b") in mine and mine.get(("det", "b"))["p"] == 0.1
    # a torn line (a writer mid-append) waits until it is complete
    with path.open("ab") as f:
        f.write(b'{"key": ["det", "c"], "p": 0.')
    mine.refresh()
    assert ("det", "c") not in mine
    with path.open("ab") as f:
        f.write(b"2}\n")
    mine.refresh()
    assert mine.get(("det", "c"))["p"] == 0.2
    assert [tuple(r["key"]) for r in mine.records()] == [("det", "a"), ("det", "b"), ("det", "c")]
    with pytest.raises(ValueError, match="already exists"):
        mine.append(("det", "b"), {"p": 0.9})
