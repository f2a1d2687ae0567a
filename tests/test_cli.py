"""The command line, end to end (in-process, real models)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from samark.cli import app
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.keys.samark_material import PivotDraw

HUMAN = (
    "The museum reopened after a two-year renovation. Visitors queued along the river to see "
    "the new galleries. Curators said the collection had grown by a third. Tickets sold out "
    "within hours."
)


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="module")
def key_file(tmp_path_factory, runner):
    path = tmp_path_factory.mktemp("keys") / "test.key"
    # made for the paper's samark: these tests read its statistics (the default key,
    # made for samark-layered, has its own tests)
    result = runner.invoke(app, ["keygen", str(path), "--scheme", "samark"])
    assert result.exit_code == 0, result.output
    return path


def test_keygen_writes_private_file_and_shows_no_secret(key_file, runner, tmp_path) -> None:
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    record = json.loads(key_file.read_text())
    assert record["embedder"]["name"] == "all-mpnet-base-v2" and record["avoid"]["rows"] == 3
    again = runner.invoke(app, ["keygen", str(tmp_path / "k2.key")])
    assert again.exit_code == 0
    assert record["secret"] not in again.output
    secret2 = json.loads((tmp_path / "k2.key").read_text())["secret"]
    assert secret2 not in again.output and secret2 != record["secret"]
    refused = runner.invoke(app, ["keygen", str(key_file)])
    assert refused.exit_code == 2 and "refusing to overwrite" in refused.output


def test_keygen_names_the_layered_marks_cells(key_file, runner, tmp_path) -> None:
    """A new key names its scheme, 64 keyed cells for its layered mark and their projected
    null draws (version 4); --cells 0 writes a static key (no cells, no draws); a value no
    layout has exits 2, writing nothing."""
    record = json.loads(key_file.read_text())
    assert (record["version"], record["cells"]) == (4, 64)
    assert record["null_draws"] == "projected"
    static = runner.invoke(app, ["keygen", str(tmp_path / "s.key"), "--cells", "0"])
    assert static.exit_code == 0 and "static pivots" in static.stderr, static.output
    record = json.loads((tmp_path / "s.key").read_text())
    assert record["version"] == 4 and "cells" not in record and "null_draws" not in record
    assert record["scheme"] == "samark-layered"  # keygen's default scheme
    bad = runner.invoke(app, ["keygen", str(tmp_path / "b.key"), "--cells", "1"])
    assert bad.exit_code == 2 and "--cells" in bad.output
    assert not (tmp_path / "b.key").exists()


def test_detect_text_argument(key_file, runner) -> None:
    result = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file)])
    assert result.exit_code in (0, 1)
    record = json.loads(result.stdout.splitlines()[0])
    assert {"z", "p_value", "is_watermarked", "n_units"} <= set(record)
    assert record["n_units"] == 4
    assert result.exit_code == (0 if record["is_watermarked"] else 1)
    # the scan's p-value does not come from the paper's z: z stays in the JSON line only
    assert "4 sentences" in result.stderr and "z =" not in result.stderr
    one = runner.invoke(app, ["detect", "One sentence here.", "--key", str(key_file)])
    assert ", 1 sentence" in one.stderr and "1 sentences" not in one.stderr, one.output
    by_z = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file), "--statistic", "z"])
    z = json.loads(by_z.stdout.splitlines()[0])["z"]
    assert f"z = {z:.2f}" in by_z.stderr  # the statistic its p-value is computed from


def test_a_file_name_that_names_no_file_is_an_error_unless_text_is_said(
    key_file, runner, tmp_path, monkeypatch
) -> None:
    """A one-word argument that looks like a file name is never scored as text; --text
    says it is the text (and wins over a file of that name)."""
    monkeypatch.chdir(tmp_path)
    missing = runner.invoke(app, ["detect", "nofile.txt", "--key", str(key_file)])
    assert missing.exit_code == 2 and "nofile.txt: no such file" in missing.stderr
    assert "--text" in missing.stderr and not missing.stdout
    said = runner.invoke(app, ["detect", "nofile.txt", "--text", "--key", str(key_file)])
    assert said.exit_code in (0, 1), said.output
    assert json.loads(said.stdout)["n_units"] == 1
    (tmp_path / "t.txt").write_text(HUMAN)
    by_file = runner.invoke(app, ["detect", "t.txt", "--key", str(key_file)])
    assert json.loads(by_file.stdout)["n_units"] == 4  # an existing file is read
    literal = runner.invoke(app, ["detect", "t.txt", "--text", "--key", str(key_file)])
    assert json.loads(literal.stdout)["n_units"] == 1  # --text: the words, not the file


def test_detect_a_long_one_line_text(key_file, runner) -> None:
    """A one-line text longer than a file name may be is text, not a path."""
    long = " ".join([HUMAN] * 3)
    assert len(long) > 500 and "\n" not in long
    result = runner.invoke(app, ["detect", long, "--key", str(key_file)])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout.splitlines()[0])["n_units"] == 12


def test_detect_statistic_and_localisation(key_file, runner) -> None:
    out = runner.invoke(
        app, ["detect", HUMAN, "--key", str(key_file), "--statistic", "scan", "--details"]
    )
    record = json.loads(out.stdout.splitlines()[0])
    assert record["statistic"] == "scan"
    assert len(record["sentence_p_values"]) == record["n_units"] == 4
    assert all(0 < p <= 1 for p in record["sentence_p_values"])
    bad = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file), "--statistic", "t"])
    assert bad.exit_code == 2 and "--statistic is one of z, alignment, scan" in bad.output
    # every command detects with the scan unless told; the paper's z on request
    default = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file)])
    assert json.loads(default.stdout.splitlines()[0])["statistic"] == "scan"
    paper = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file), "--statistic", "z"])
    assert json.loads(paper.stdout.splitlines()[0])["statistic"] == "z"


def test_a_key_names_its_scheme_and_a_mismatch_is_refused(runner, tmp_path) -> None:
    """keygen writes the scheme (samark-layered by default); detect uses it without
    --scheme, refuses another naming the key's, and allows it with --any-scheme."""
    path = tmp_path / "layered.key"
    assert (
        runner.invoke(app, ["keygen", str(path), "--embedder", "all-minilm-l6-v2"]).exit_code == 0
    )
    assert json.loads(path.read_text())["scheme"] == "samark-layered"
    default = runner.invoke(app, ["detect", HUMAN, "--key", str(path)])
    assert json.loads(default.stdout.splitlines()[0])["scheme"] == "samark-layered"
    refused = runner.invoke(app, ["detect", HUMAN, "--key", str(path), "--scheme", "samark"])
    assert refused.exit_code == 2 and "made for samark-layered, not samark" in refused.output
    assert "--any-scheme" in refused.output
    on_purpose = ["detect", HUMAN, "--key", str(path), "--scheme", "samark", "--any-scheme"]
    assert json.loads(runner.invoke(app, on_purpose).stdout.splitlines()[0])["scheme"] == "samark"
    bad = runner.invoke(app, ["keygen", str(tmp_path / "x.key"), "--scheme", "nope"])
    assert bad.exit_code == 2 and "unknown scheme" in bad.output


def test_older_key_files_default_to_what_they_were_made_for() -> None:
    """A 16-cell key of 2026-11-27 (version 3, no scheme written) was made by keygen for
    the layered mark; a version-1 key says nothing, and commands keep samark for it."""
    from samark.cli.loading import resolve_scheme
    from samark.keys import WatermarkKey

    keys = Path(__file__).parent / "data" / "keys"
    assert resolve_scheme(None, keys / "cells.key") == "samark-layered"
    assert resolve_scheme(None, keys / "plain.key") == "samark"
    assert resolve_scheme("kgw", keys / "plain.key") == "kgw"  # it names none: no refusal
    with pytest.raises(typer.Exit):
        resolve_scheme("samark", keys / "cells.key")
    assert resolve_scheme("samark", keys / "cells.key", any_scheme=True) == "samark"
    assert WatermarkKey.load(keys / "cells.key").made_for() == "samark-layered"
    assert WatermarkKey.load(keys / "plain.key").made_for() is None


def test_detect_with_the_layered_scheme(key_file, runner) -> None:
    """Both layers' p-values from the key file, with the tokenizer alone (no generator)."""
    out = runner.invoke(
        app, ["detect", HUMAN, "--key", str(key_file), "--scheme", "samark-layered", "--any-scheme"]
    )
    assert out.exit_code in (0, 1), out.output
    record = json.loads(out.stdout.splitlines()[0])
    assert (
        record["scheme"] == "samark-layered"
    )  # keygen's default scheme and record["statistic"] == "fisher(scan,green)"
    assert {"p_semantic", "p_token", "green_fraction"} <= set(record["details"])
    assert record["n_units"] == 4 and 0 < record["p_value"] <= 1


def test_detect_stdin_and_file(key_file, runner, tmp_path) -> None:
    path = tmp_path / "t.txt"
    path.write_text(HUMAN)
    by_file = runner.invoke(app, ["detect", str(path), "--key", str(key_file)])
    by_stdin = runner.invoke(app, ["detect", "-", "--key", str(key_file)], input=HUMAN)
    assert json.loads(by_file.stdout.splitlines()[0]) == json.loads(by_stdin.stdout.splitlines()[0])


def test_detect_jsonl_keeps_fields_and_reports_bad_records(key_file, runner, tmp_path) -> None:
    path = tmp_path / "in.jsonl"
    lines = [
        json.dumps({"id": "a", "text": HUMAN, "source": "news"}),
        json.dumps({"id": "b", "text": "   "}),
        "not json",
        json.dumps({"id": "c"}),
    ]
    bad_utf8 = b'{"id": "d", "text": "caf\xe9"}\n'  # Latin-1, not UTF-8
    path.write_bytes(("\n".join(lines) + "\n\n").encode() + bad_utf8)  # and a blank line
    result = runner.invoke(app, ["detect", str(path), "--key", str(key_file)])
    # every record has its line, and the records that could not be scored make it exit 2
    # (as grep does for a file it cannot read), named by their output lines
    assert result.exit_code == 2, result.output
    assert "4 of 5 records" in result.stderr and "output lines 2, 3, 4, 5" in result.stderr
    # progress counts records, not bytes, and says each count once
    assert "detecting in.jsonl: 5/5 records (" in result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(out) == 5
    assert out[4] == {"line": 6, "error": "record is not UTF-8 text"}
    assert out[0]["id"] == "a" and out[0]["source"] == "news" and 0 < out[0]["p_value"] <= 1
    assert out[1]["id"] == "b" and out[1]["p_value"] is None and "no sentence" in out[1]["error"]
    assert "invalid JSON" in out[2]["error"]
    assert out[3]["id"] == "c" and "no string field" in out[3]["error"]


@pytest.mark.parametrize(
    ("content", "message"), [(b"\x00\x01\x02", "binary"), (b"\xff\xfe bad", "not UTF-8")]
)
def test_detect_rejects_non_text_files(key_file, runner, tmp_path, content, message) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(content)
    result = runner.invoke(app, ["detect", str(path), "--key", str(key_file)])
    assert result.exit_code == 2 and message in result.output


def test_keygen_into_a_missing_folder_is_a_clear_error(runner, tmp_path) -> None:
    result = runner.invoke(app, ["keygen", str(tmp_path / "no" / "such" / "k.key")])
    assert result.exit_code == 2 and "cannot write key file" in result.output


def test_dagger_is_asked_of_the_scheme_catalog(key_file, runner) -> None:
    """--dagger reads the scheme's declared ablation: a scheme without one is refused
    before any model loads, naming the schemes that have one."""
    from samark.schemes.base import scheme_info

    assert scheme_info("samark").ablation == "samark-dagger"
    args = ["generate", "--text", "A prompt.", "--key", str(key_file), "--dagger"]
    result = runner.invoke(app, [*args, "--scheme", "kgw", "--any-scheme"])
    assert result.exit_code == 2 and "kgw has none" in result.output
    assert "samark" in result.output


def test_a_key_readable_by_others_is_warned_about(key_file, runner, tmp_path) -> None:
    shared = tmp_path / "shared.key"
    shared.write_bytes(key_file.read_bytes())
    shared.chmod(0o644)
    result = runner.invoke(app, ["detect", HUMAN, "--key", str(shared)])
    assert result.exit_code in (0, 1) and "readable by other users" in result.output
    quiet = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file)])
    assert "readable by other users" not in quiet.output


def test_detect_empty_text_is_an_error(key_file, runner) -> None:
    result = runner.invoke(app, ["detect", "-", "--key", str(key_file)], input="  \n")
    assert result.exit_code == 2 and "no sentence" in result.output


def test_wrong_key_files(runner, tmp_path, minilm) -> None:
    garbage = tmp_path / "garbage.key"
    garbage.write_text("hello")
    result = runner.invoke(app, ["detect", HUMAN, "--key", str(garbage)])
    assert result.exit_code == 2 and "not a samark key file" in result.output
    # A key made for other weights under the same name (e.g. another build of mpnet)
    stale = WatermarkKey.generate(EmbedderIdentity("all-mpnet-base-v2", "0" * 64))
    stale.save(tmp_path / "stale.key")
    result = runner.invoke(app, ["detect", HUMAN, "--key", str(tmp_path / "stale.key")])
    assert result.exit_code == 2 and "made for embedder 'all-mpnet-base-v2'" in result.output
    secret = json.loads((tmp_path / "stale.key").read_text())["secret"]
    assert secret not in result.output
    missing = runner.invoke(app, ["detect", HUMAN, "--key", str(tmp_path / "none.key")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


@pytest.mark.slow
def test_generate_json_then_detect(key_file, runner, smollm2, tmp_path) -> None:
    result = runner.invoke(
        app,
        [
            "generate",
            "The weather service issued a warning on Monday.",
            "--key",
            str(key_file),
            "--sentences",
            "2",
            "--candidates",
            "6",
            "--seed",
            "1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert {"text", "sentences", "tokens_sampled", "output_tokens", "fallbacks", "seconds"} <= set(
        record
    )
    assert 1 <= len(record["sentences"]) <= 2
    # progress per sentence, as lines when stderr is not a terminal (CI logs, nohup)
    assert re.search(r"sentence 1/2: \d+ candidates?, \d+ matched", result.stderr)
    secret = json.loads(key_file.read_text())["secret"]
    assert secret not in result.output and "flags" not in record
    path = tmp_path / "gen.jsonl"
    path.write_text(json.dumps(record) + "\n")
    detected = runner.invoke(app, ["detect", str(path), "--key", str(key_file)])
    assert json.loads(detected.stdout)["n_units"] == len(record["sentences"])


def test_key_brings_its_own_embedder(runner, tmp_path, minilm) -> None:
    path = WatermarkKey.generate(minilm.identity).save(tmp_path / "minilm.key")
    result = runner.invoke(app, ["detect", HUMAN, "--key", str(path)])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout.splitlines()[0])["n_units"] == 4


def test_invalid_options(key_file, runner) -> None:
    result = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file), "--alpha", "2"])
    assert result.exit_code == 2 and "alpha" in result.output


def test_generate_with_a_server_that_is_down_fails_clearly(key_file, runner) -> None:
    pytest.importorskip("openai")
    result = runner.invoke(
        app,
        [
            "generate",
            "A prompt.",
            "--key",
            str(key_file),
            "--sentences",
            "1",
            "--candidates",
            "2",
            "--engine",
            "http://127.0.0.1:9/v1#m",
        ],
    )
    assert result.exit_code == 2
    assert "unreachable" in result.output


def test_eval_rejects_a_bad_experiment(runner, tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[schemes]]\nname = "nope"\n')
    result = runner.invoke(app, ["eval", "run", str(bad), "-o", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "unknown scheme" in result.output
    assert not (tmp_path / "run").exists()  # nothing was started


def _records(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_attack_a_jsonl_file_keeps_fields_and_measures_fidelity(runner, tmp_path) -> None:
    src = tmp_path / "in.jsonl"
    texts = [HUMAN, "One short line. And another one here. A third closes it."]
    src.write_text(
        "".join(json.dumps({"id": i, "text": t, "lang": "en"}) + "\n" for i, t in enumerate(texts))
        + "\n"  # a blank line is skipped
    )
    dst = tmp_path / "out" / "attacked.jsonl"
    args = ["attack", "shuffle", str(src), "-o", str(dst), "--seed", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    recs = _records(dst)
    assert [r["id"] for r in recs] == [0, 1] and all(r["lang"] == "en" for r in recs)
    for r, original in zip(recs, texts, strict=True):
        assert r["original_text"] == original and r["text"] != original
        assert r["attack"]["name"] == "shuffle" and r["attack"]["params"] == {}
        assert r["fidelity"]["sentence_ratio"] == 1.0
        assert r["fidelity"]["word_overlap"] == 1.0
    assert "meaning-preserving" in result.output
    again = tmp_path / "again.jsonl"
    assert runner.invoke(app, [*args[:3], "-o", str(again), "--seed", "3"]).exit_code == 0
    assert _records(again) == recs  # seeded
    # each record stores the seed that reproduces it alone, outside its batch
    from samark.evaluation.attacks import create_attack

    alone = create_attack("shuffle").apply(texts[1], seed=recs[1]["attack"]["seed"])
    assert alone == recs[1]["text"] and recs[0]["attack"]["seed"] != recs[1]["attack"]["seed"]
    # parameters, validated by the attack
    deleted = tmp_path / "deleted.jsonl"
    result = runner.invoke(
        app, ["attack", "word-delete", str(src), "-o", str(deleted), "-p", "ratio=0.5"]
    )
    assert result.exit_code == 0, result.output
    first = _records(deleted)[0]
    assert first["attack"]["params"] == {"ratio": 0.5}
    assert len(first["text"].split()) == len(HUMAN.split()) - round(0.5 * len(HUMAN.split()))


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (b'{"text": "Fine."}\n{broken\n', [], "in.jsonl:2: invalid JSON"),
        (b'{"text": "Fine."}\n\xff\xfe\n', [], "in.jsonl:2: record is not UTF-8"),
        (b'{"body": "Fine."}\n', [], "no string field 'text'"),
        (b'{"text": "Fine."}\n', ["-p", "ratio=2"], "ratio must be"),
        (b'{"text": "Fine."}\n', ["-p", "ratio"], "NAME=VALUE"),
    ],
)
def test_attack_bad_input_is_a_clear_error_and_loses_nothing(
    runner, tmp_path, content, args, message
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(content)
    dst = tmp_path / "out.jsonl"
    dst.write_text("earlier results\n")
    result = runner.invoke(app, ["attack", "word-delete", str(src), "-o", str(dst), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert dst.read_text() == "earlier results\n"  # the old output is untouched
    assert {p.name for p in tmp_path.iterdir()} == {"in.jsonl", "out.jsonl"}  # no temp file


def test_attack_list_and_usage(runner) -> None:
    listed = runner.invoke(app, ["attack", "--list"])
    assert listed.exit_code == 0
    assert "doc-p-local" in listed.output and "faithful" in listed.output
    assert runner.invoke(app, ["attack", "shuffle"]).exit_code == 2
    unknown = runner.invoke(app, ["attack", "nope", "x.jsonl", "-o", "y.jsonl"])
    assert unknown.exit_code == 2 and "unknown attack" in unknown.output


@pytest.mark.slow
def test_demo_is_reproducible_and_clean_in_a_pipe(runner, smollm2, mpnet) -> None:
    args = ["demo", "--candidates", "4", "--sentences", "2", "--seed", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Watermarked continuation:" in result.stdout and "Detection" in result.stdout
    assert "4 candidates each" in result.stderr and "N = 64" in result.stderr
    assert "a demo key derived from seed 3" in result.stderr
    assert re.search(r"sentence 1/2: \d+ candidates?, \d+ matched", result.stderr)
    assert "total" in result.stdout and "human" in result.stdout
    # the layered mark: both layers' p-values, and a paraphrased copy (Doc-P) tested too
    assert "samark-layered" in result.stderr and "token p" in result.stdout
    assert "paraphrased" in result.stdout and "Paraphrased copy" in result.stdout
    # not a terminal: the text is printed whole, one line, progress on stderr apart from it
    assert "sentence 1/2" not in result.stdout
    line = next(x for x in result.stdout.splitlines() if "Watermarked continuation:" in x)
    assert len(line.split("Watermarked continuation:")[1].strip()) > 10
    prompt = next(x for x in result.stdout.splitlines() if x.startswith("Prompt:"))
    assert len(prompt) > 100  # never hard-wrapped at 80 columns
    # the same seed: the same key, text and p-values (only the timings differ)
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output

    def steady(out: str) -> list[str]:
        return [x for x in out.splitlines() if not x.startswith("generation ")]

    assert steady(again.stdout) == steady(result.stdout)


def test_demo_key_follows_the_seed(mpnet) -> None:
    from samark.cli.demo import demo_key

    first, same, other = demo_key(mpnet, 8), demo_key(mpnet, 8), demo_key(mpnet, 9)
    assert first.key_id == same.key_id != other.key_id
    assert demo_key(mpnet, None).key_id != demo_key(mpnet, None).key_id  # no seed: random
    # the same law as keygen's keys: pivots away from the shipped reference directions
    assert first.samark.avoid.shape == mpnet.reference_directions().shape


def test_demo_display_keeps_text_whole_and_labels_unsplit() -> None:
    """On a terminal the text is drawn above the bar in one live region (never split by
    it); the results table fits 80 columns without wrapping a label."""
    import io

    from rich.console import Console

    from samark.cli.demo import _DemoProgress, _results_table
    from samark.detection import Detection

    bar = _DemoProgress()
    bar.written += ["\n\nFirst sentence here.", " A second one."]  # as the engine gives them
    console = Console(file=io.StringIO(), width=80)
    console.print(*bar.get_renderables())
    drawn = console.file.getvalue()
    assert "Watermarked continuation: First sentence here. A second one." in drawn
    d = Detection("samark-layered", 2.5e-08, 0.01, 0.0, "fisher", 1.0, 6,
                  details={"p_semantic": 0.297, "p_token": 4e-09})  # fmt: skip
    console = Console(file=io.StringIO(), width=80)
    console.print(_results_table([("sentences shuffled", d), ("human", d)]))
    table = console.file.getvalue().splitlines()
    assert any("sentences shuffled" in row for row in table)
    assert max(len(row) for row in table) <= 80


@pytest.mark.slow
def test_every_scheme_is_listed_and_token_schemes_run_from_the_key_file(
    runner, tmp_path, smollm2, mpnet_key
) -> None:
    from samark.schemes import scheme_names

    # a fixed key: whether 3 KGW sentences reach p < 0.01 depends on the key, and a test
    # that draws a new one each run would pass or fail by chance
    key_file = tmp_path / "fixed.key"
    mpnet_key.save(key_file)

    listed = runner.invoke(app, ["schemes", "list"])
    assert listed.exit_code == 0
    for name in scheme_names():
        assert name in listed.output
    assert "token" in listed.output and "sentence" in listed.output
    prompt = "The city council met on Monday to discuss the new budget for schools."
    args = [
        "generate",
        prompt,
        "--key",
        str(key_file),
        "--scheme",
        "kgw",
        "--any-scheme",
        "--sentences",
        "3",
    ]
    made = runner.invoke(app, [*args, "--seed", "2", "--json"])
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout.splitlines()[-1])
    assert record["scheme"] == "kgw" and len(record["sentences"]) == 3
    secret = json.loads(key_file.read_text())["secret"]
    assert secret not in made.output
    text = tmp_path / "kgw.txt"
    text.write_text(record["text"])
    mine = runner.invoke(
        app, ["detect", str(text), "--key", str(key_file), "--scheme", "kgw", "--any-scheme"]
    )
    assert mine.exit_code == 0, mine.output
    found = json.loads(mine.stdout.splitlines()[0])
    assert found["unit"] == "token" and found["p_value"] < 0.01
    # another scheme's detector on the same text, and the same detector on human text
    other = runner.invoke(
        app, ["detect", str(text), "--key", str(key_file), "--scheme", "synthid", "--any-scheme"]
    )
    assert other.exit_code == 1 and json.loads(other.stdout.splitlines()[0])["p_value"] > 0.01
    human = runner.invoke(
        app, ["detect", HUMAN, "--key", str(key_file), "--scheme", "kgw", "--any-scheme"]
    )
    assert human.exit_code == 1
    # a JSONL file of records goes through the same detector, one line per record
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"text": record["text"]}) + "\n" + json.dumps({"t": 1}) + "\n")
    lines = runner.invoke(
        app, ["detect", str(records), "--key", str(key_file), "--scheme", "kgw", "--any-scheme"]
    )
    rows = [json.loads(x) for x in lines.stdout.splitlines()]
    assert rows[0]["p_value"] < 0.01 and rows[1]["error"]
    for bad, message in (
        (["--scheme", "kgw2"], "unknown scheme"),
        (["--scheme", "unwatermarked", "--any-scheme"], "no detector"),
        (["--scheme", "kgw", "--any-scheme", "--statistic", "scan"], "not an option of kgw"),
    ):
        refused = runner.invoke(app, ["detect", HUMAN, "--key", str(key_file), *bad])
        assert refused.exit_code == 2 and message in refused.output, refused.output


@pytest.fixture(scope="module")
def news_minilm(minilm) -> dict:
    """MiniLM's vectors of the news sentences both key-check tests below read, embedded
    once (as ``known`` for ``minilm.remembering``): the first 10 sentences of 150
    CNN/DailyMail articles (what ``check-key cnn_dailymail --limit 150 --sentences 10``
    and ``--screen-texts 150`` score) and sentences 10-25 of the first 80 (whose mean
    is the news direction a leaning key leans to)."""
    from samark.cli.loading import human_heads
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    heads = human_heads("cnn_dailymail", "text", 10, 150)
    later = [s for d in load_dataset("cnn_dailymail")[:80] for s in split_sentences(d.text)[10:25]]
    sentences = list(dict.fromkeys([s for h in heads for s in split_sentences(h)] + later))
    return dict(zip(sentences, minilm.encode(sentences), strict=True))


@pytest.mark.slow
def test_check_key_on_human_text_of_a_domain(runner, tmp_path, minilm, news_minilm) -> None:
    import numpy as np
    from scipy import stats

    from samark.datasets import load_dataset
    from samark.keys.pivots import derive_pivots
    from samark.segment import split_sentences

    args = ["cnn_dailymail", "--limit", "150", "--sentences", "10"]
    fair = WatermarkKey(
        bytes([7]) * 32, minilm.identity, PivotDraw.avoiding(minilm.reference_directions())
    )
    fair.save(tmp_path / "fair.key")
    with minilm.remembering(news_minilm):  # every check reads the same 1,500 sentences
        out = runner.invoke(app, ["check-key", *args, "--key", str(tmp_path / "fair.key")])
        record = json.loads(out.stdout.splitlines()[0])
        assert record["texts"] == 150 and record["alpha"] == 0.01
        assert record["bound"] == stats.binom.ppf(0.999, 150, 0.01) == 6
        assert out.exit_code == (0 if record["holds"] else 1) == 0, out.output
        assert "secret" not in out.output and fair.key_id in out.output

        # a key whose pivots lean towards the news mean (no avoided directions; the secret
        # with the largest lean of 300): its p-values on news sit below uniform, and it is
        # caught
        docs = load_dataset("cnn_dailymail")[:80]
        news = [s for d in docs for s in split_sentences(d.text)[10:25]]
        mean = minilm.encode(news).mean(axis=0)
        mean /= np.linalg.norm(mean)
        secret = max(
            (bytes([i % 256, i // 256]) * 16 for i in range(300)),
            key=lambda s: np.abs(derive_pivots(s, minilm.dim, 2) @ mean).max(),
        )
        leaning = WatermarkKey(secret, minilm.identity)
        leaning.save(tmp_path / "leaning.key")
        out = runner.invoke(app, ["check-key", *args, "--key", str(tmp_path / "leaning.key")])
        record = json.loads(out.stdout.splitlines()[0])
        assert out.exit_code == 1 and not record["holds"] and "does not hold" in out.output
        assert record["flagged"] > record["bound"] or record["ks_pvalue"] < 1e-3, record

        # screening (keyring new/add --screen) refuses the leaning key and keeps the next
        from samark.cli.loading import human_heads
        from samark.detection.key_check import check_key, screen_key
        from samark.schemes import create_scheme

        texts = human_heads("cnn_dailymail", "text", 10, 150)
        draws = iter([leaning, fair])
        chosen, refused = screen_key(
            lambda: next(draws),
            lambda k: [
                check_key(create_scheme("samark", key=k, embedder=minilm, statistic="scan"), texts)
            ],
        )
        assert chosen is fair and refused == 1
        ring = tmp_path / "ring"
        out = runner.invoke(
            app,
            ["keyring", "new", str(ring), "--embedder", "all-minilm-l6-v2", "--keys", "2",
             "--screen", "cnn_dailymail", "--screen-texts", "150"],
        )  # fmt: skip
        assert out.exit_code == 0 and "the screen refused" in out.output, out.output
        assert len(json.loads((ring / "ring.json").read_text())["keys"]) == 2


def test_check_key_refuses_bad_sources(runner, key_file, tmp_path) -> None:
    out = runner.invoke(app, ["check-key", "no_such_corpus", "--key", str(key_file)])
    assert out.exit_code == 2 and "neither a .jsonl" in out.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"body": "Some text. More text. Even more text."}\n')
    out = runner.invoke(app, ["check-key", str(bad), "--key", str(key_file)])
    assert out.exit_code == 2 and "no string field 'text'" in out.output
    few = tmp_path / "few.jsonl"
    few.write_text(json.dumps({"text": HUMAN}) + "\n")
    out = runner.invoke(app, ["check-key", str(few), "--key", str(key_file)])
    assert out.exit_code == 2 and "at least 20 human texts" in out.output


_NO_MODEL_SCRIPT = """
import json, sys
from typer.testing import CliRunner
from samark.cli import app
results = []
for args in json.loads(sys.argv[1]):
    r = CliRunner().invoke(app, args)
    results.append({"code": r.exit_code, "out": r.stdout, "err": r.stderr,
                    "torch": "torch" in sys.modules})
print(json.dumps(results))
"""


def _without_models(cwd, *commands: list[str]) -> list[dict]:
    """Run commands in one fresh process and say, after each, whether torch had been
    imported: no model loads without it."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _NO_MODEL_SCRIPT, json.dumps(list(commands))],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    return json.loads(done.stdout)


@pytest.fixture
def offline_key(tmp_path):
    """A valid key file made without loading an embedder (its fingerprint is made up:
    a command that got as far as loading the embedder would refuse it)."""
    return WatermarkKey.generate(EmbedderIdentity("all-mpnet-base-v2", "ab" * 32)).save(
        tmp_path / "k.key"
    )


def test_arguments_and_files_are_checked_before_any_model_loads(tmp_path, offline_key) -> None:
    """Each usage or input error fails at once (exit 2, a clear message), in a process
    that never imports torch."""
    from samark.keys.keyring import Keyring

    key = ["--key", str(offline_key)]
    kgw = ["--scheme", "kgw", "--any-scheme"]
    (tmp_path / "empty.txt").write_text(" \n")
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "bad.jsonl").write_text('{"text": "Fine. Good. Well."}\n\n{broken\n')
    (tmp_path / "nofield.jsonl").write_text('{"text": "A. B. C."}\n{"body": "A. B. C."}\n')
    (tmp_path / "few.jsonl").write_text(json.dumps({"text": HUMAN}) + "\n")
    (tmp_path / "folder.txt").mkdir()
    ring = Keyring.create(tmp_path / "ring", EmbedderIdentity("all-mpnet-base-v2", "ab" * 32))
    ring.add(WatermarkKey.load(offline_key), "k0")
    cases = [
        (["detect", "nofile.txt", *key], "nofile.txt: no such file (to use these words"),
        (["detect", "runs.jsonl", *key], "runs.jsonl: no such file"),
        (["detect", "sub/dir/t", *key], "sub/dir/t: no such file"),
        (["detect", "folder.txt", *key], "folder.txt is a folder"),
        (["detect", "empty.txt", *key], "empty.txt is empty: no sentence to score"),
        (["detect", "@missing", *key], "cannot read missing"),
        (["detect", "@gone.jsonl", *key], "cannot read gone.jsonl"),  # '@': one text
        (["detect", "empty.jsonl", *key], "empty.jsonl holds no records"),
        (["detect", "Some text.", "--key", "none.key"], "key file none.key does not exist"),
        (["detect", "Some text."], "no key file samark.key: make one with `samark keygen"),
        (["detect", "Some text.", *key, "--alpha", "2"], "--alpha must be between 0 and 1"),
        (["generate", "nofile.txt", *key], "nofile.txt: no such file"),
        # --text: the file-like prompt is the prompt; the command goes on to the next check
        (["generate", "nofile.txt", "--text", "--keyring", "nokeyring"], "nokeyring is not"),
        (["generate", "A prompt.", *key, "--sentences", "0"], "--sentences must be at least 1"),
        (["generate", "A prompt.", *key, "--candidates", "0"], "--candidates must be at least"),
        (["demo", "--sentences", "0"], "--sentences must be at least 1, got 0"),
        (["keygen", str(offline_key)], "exists; refusing to overwrite a key file (--force"),
        (["keygen", "no/such/dir/k.key"], "folder no/such/dir does not exist"),
        (["keygen", "new.key", "--embedder", "nope"], "unknown embedder 'nope'"),
        (["check-key", "empty.jsonl", *key], "empty.jsonl holds no records"),
        (["check-key", "bad.jsonl", *key], "bad.jsonl:3: invalid JSON record"),
        (["check-key", "nofield.jsonl", *key], "nofield.jsonl:2: record has no string field"),
        (["check-key", "few.jsonl", *key], "at least 20 human texts of at least 3 sentences"),
        (["check-key", "cnn_dailymail", *key, "--limit", "5"], "--limit must be at least 20"),
        (["check-key", "gone.jsonl", *key], "gone.jsonl: no such file"),
        (["keyring", "new", str(tmp_path / "ring")], "exists and is not an empty folder"),
        (["keyring", "new", "r2", "--screen", "few.jsonl"], "--screen few.jsonl: a key check"),
        (["keyring", "add", str(tmp_path / "ring"), "--label", "k0"], "already has a key"),
        (["keyring", "add", str(tmp_path / "ring"), "--label", "a b"], "invalid key label"),
        (["attack", "shuffle", "gone.jsonl", "-o", "o.jsonl"], "gone.jsonl: no such file"),
        (["attack", "shuffle", "empty.jsonl", "-o", "o.jsonl"], "empty.jsonl holds no records"),
        (["attack", "shuffle", "bad.jsonl", "-o", "o.jsonl"], "bad.jsonl:3: invalid JSON"),
        (["attack", "shuffle", "nofield.jsonl", "-o", "o.jsonl"], "nofield.jsonl:2: no string"),
        (["serve", *key, "--no-auth", "--candidates", "0"], "--candidates must be at least 1"),
        (["serve", *key, "--no-auth", "--sentences", "9", "--max-sentences", "4"],
         "--sentences (9) must not exceed --max-sentences (4)"),
        (["serve", *key, "--no-auth", "--statistic", "t"], "--statistic is one of z,"),
        (["serve", *key, "--no-auth", "--timeout", "0"], "--timeout must be more than 0"),
        (["serve", *key, *kgw, "--engine", "vllm"], "kgw writes through"),
        (["serve", *key, "--no-auth", "--centring", "no.centring"], "no.centring does not exist"),
        (["serve", *key, *kgw, "--centring", "few.jsonl"], "--centring is not an option of kgw"),
        (["detect", "Some text.", *key, "--centring", "no.centring"], "no.centring does not"),
        (["check-key", "cnn_dailymail", *key, "--centring", "no.c"], "no.c does not exist"),
        (["centring", "build", "few.jsonl", *key, "-o", "r.c"], "more than --neighbours (32)"),
        (["centring", "build", "few.jsonl", *key, "-o", "few.jsonl"], "few.jsonl exists; pass"),
        (["centring", "build", "few.jsonl", *key, "-o", "r.c", "--neighbours", "0"], ">= 1"),
    ]  # fmt: skip
    results = _without_models(tmp_path, *(args for args, _ in cases))
    for (args, message), result in zip(cases, results, strict=True):
        assert result["code"] == 2, (args, result)
        assert message in result["err"], (args, result["err"])
        assert not result["torch"], (args, "imported torch before failing")
    assert not (tmp_path / "r2").exists() and not (tmp_path / "new.key").exists()
    assert not (tmp_path / "o.jsonl").exists()


def test_listing_and_help_load_nothing(tmp_path) -> None:
    listed, help_ = _without_models(tmp_path, ["attack", "--list"], ["keygen", "--help"])
    assert listed["code"] == 0 and "doc-p-local" in listed["out"] and not listed["torch"]
    assert help_["code"] == 0 and "--force" in help_["out"]
    assert "<bool>" not in help_["out"]  # a flag takes no value: no type beside it


def _commands(command, path=("samark",)):
    """Every command and group under ``command``, with its path."""
    import typer

    yield path, command
    if hasattr(command, "list_commands"):
        ctx = typer.Context(command)
        for name in command.list_commands(ctx):
            yield from _commands(command.get_command(ctx, name), (*path, name))


def _summary_rows(help_text: str) -> dict[str, list[str]]:
    """The Commands table of a ``--help`` page: each command's name and the lines of its
    summary (a row whose name cell is blank continues the row above)."""
    rows: dict[str, list[str]] = {}
    table = help_text.split("─ Commands ", 1)[1].split("╰", 1)[0]
    last = None
    for line in table.splitlines()[1:]:
        cells = line.strip("│ ").split(None, 1)
        if not line.startswith("│") or not cells:
            continue
        if line[2] != " ":  # a command's name opens its row
            last = cells[0]
            rows[last] = [cells[1] if len(cells) > 1 else ""]
        else:
            rows[last].append(line.strip("│ "))  # type: ignore[index]
    return rows


def test_help_summaries_are_whole_sentences() -> None:
    """`samark --help` (and each group's) shows every command's first docstring paragraph;
    typer's rich tables keep a docstring's line breaks, so a summary must be one line, and a
    whole sentence, or the table breaks it mid-sentence."""
    import inspect

    import typer.main

    groups = []
    for path, command in _commands(typer.main.get_command(app)):
        first = inspect.cleandoc(command.help or "").split("\n\n")[0]
        assert first and "\n" not in first, (path, first)
        assert first.endswith("."), (path, first)
        if hasattr(command, "list_commands"):
            groups.append((path, command))
    for path, group in groups:
        shown = CliRunner().invoke(app, [*path[1:], "--help"], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        rows = _summary_rows(shown.stdout)
        ctx = typer.Context(group)
        assert set(rows) == set(group.list_commands(ctx)), (path, rows)
        for name, lines in rows.items():
            assert len(lines) == 1, (path, name, lines)  # wide enough: one line a row
            first = inspect.cleandoc(group.get_command(ctx, name).help).split("\n\n")[0]
            assert lines[0] == first and lines[0].endswith("."), (path, name, lines)
    narrow = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"})
    for name, lines in _summary_rows(narrow.stdout).items():  # wrapped, never cut short
        assert " ".join(lines).endswith("."), (name, lines)


def test_line_progress_says_each_count_once(capsys) -> None:
    """Progress lines in a log: a task's description as it changes, its count (in its
    unit) while it does not, never the same figures twice on one line."""
    from samark.cli.common import LineProgress, sentence_progress

    with LineProgress(every=0.0) as bar:
        task = bar.add_task("detecting runs.jsonl", total=3, unit="records")
        for _ in range(3):
            bar.advance(task)
        steps = bar.add_task("drawing candidates for sentence 1", total=2)
        show = sentence_progress(bar, steps, 2)
        show("One.", {"candidates": 64, "matched": 12})
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "detecting runs.jsonl"
    assert re.fullmatch(r"detecting runs\.jsonl: 1/3 records \(\d+ s\)", lines[1]), lines
    assert lines[3].startswith("detecting runs.jsonl: 3/3 records")
    assert lines[4] == "drawing candidates for sentence 1"
    assert re.fullmatch(
        r"sentence 1/2: 64 candidates, 12 matched, \d+\.\d s; about \d+ s left", lines[5]
    ), lines
    assert len(lines) == 6


def test_messages_keep_their_brackets(capsys) -> None:
    """Errors are text, not rich markup: an extra's name in brackets is printed."""
    from samark.cli.common import fail

    exit_ = fail("needs the server extra: pip install 'samark[server]'")
    assert exit_.exit_code == 2
    assert "pip install 'samark[server]'" in capsys.readouterr().err


def test_serve_refuses_what_it_cannot_serve(runner, key_file) -> None:
    """Any scheme with a key is served; one without, or a token scheme with an upstream
    (which only draws SAMark's candidates), is a clear error before anything loads."""
    common = ["serve", "--key", str(key_file), "--no-auth"]
    out = runner.invoke(
        app, [*common, "--scheme", "kgw", "--any-scheme", "--upstream", "http://127.0.0.1:9/v1#m"]
    )
    said = " ".join(out.output.split())
    assert out.exit_code == 2 and "kgw writes through transformers, not openai" in said, said
    assert "--upstream is deprecated: use --engine" in said  # the former name still works
    out = runner.invoke(app, [*common, "--scheme", "unwatermarked", "--any-scheme"])
    assert out.exit_code == 2 and "no key" in out.output, out.output


def test_serve_logs_each_completion_with_its_key_id() -> None:
    """`samark serve` hands uvicorn a logging config in which the server's own logger
    (samark.serve) prints at INFO: the per-completion line naming the key id appears
    (without a handler, Python printed only its warnings)."""
    import subprocess
    import sys

    pytest.importorskip("uvicorn")
    script = (
        "import logging, logging.config\n"
        "from samark.cli.serve import log_config\n"
        "logging.config.dictConfig(log_config())\n"
        "logging.getLogger('samark.serve').info("
        "'generated %d sentences in %.1f s (finish %s, key %s)', 12, 3.5, 'length', 'k1d')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "INFO:" in done.stderr and "(finish length, key k1d)" in done.stderr, done.stderr


def test_serve_defaults_to_the_timeout_of_its_settings() -> None:
    """The CLI's --timeout default is the server's (long enough for a default completion
    on a busy 2-core CPU: docs/serving.md)."""
    pytest.importorskip("fastapi")
    import typer.main

    from samark.serving.settings import DEFAULT_TIMEOUT_S, ServeSettings

    command = typer.main.get_command(app).commands["serve"]
    timeout = next(p for p in command.params if p.name == "timeout")
    assert timeout.default == DEFAULT_TIMEOUT_S == ServeSettings(auth=False).request_timeout_s
    assert DEFAULT_TIMEOUT_S >= 1200


@pytest.mark.slow
def test_a_centring_reference_of_the_domain_lets_a_leaning_key_hold(
    runner, tmp_path, minilm, key_file, news_minilm
) -> None:
    # The key with the largest lean towards the news mean (of 300 secrets, no avoided
    # directions) fails check-key on news; a centring reference built from *other* news
    # text (sentences 10-20 of the articles, never scored here) removes that lean.
    import numpy as np

    from samark.datasets import load_dataset
    from samark.keys.pivots import derive_pivots
    from samark.segment import split_sentences

    docs = load_dataset("cnn_dailymail")
    later = [split_sentences(d.text)[10:20] for d in docs]
    with minilm.remembering(news_minilm):  # the news mean's and check-key's sentences
        mean = minilm.encode([s for t in later[:80] for s in t]).mean(axis=0)
        mean /= np.linalg.norm(mean)
        secret = max(
            (bytes([i % 256, i // 256]) * 16 for i in range(300)),
            key=lambda s: np.abs(derive_pivots(s, minilm.dim, 2) @ mean).max(),
        )
        WatermarkKey(secret, minilm.identity).save(tmp_path / "leaning.key")
        key = ["--key", str(tmp_path / "leaning.key")]
        source = tmp_path / "my-news.jsonl"
        source.write_text(
            "".join(json.dumps({"text": " ".join(t)}) + "\n" for t in later if len(t) >= 3)
        )
        ref = tmp_path / "news.centring"
        out = runner.invoke(
            app, ["centring", "build", str(source), "-o", str(ref), *key, "--neighbours", "16"]
        )
        assert out.exit_code == 0 and ref.is_file(), out.output
        assert "secret" not in out.output
        again = runner.invoke(app, ["centring", "build", str(source), "-o", str(ref), *key])
        assert again.exit_code == 2 and "exists" in again.output

        args = ["check-key", "cnn_dailymail", "--limit", "150", "--sentences", "10", *key]
        raw = runner.invoke(app, args)
        assert raw.exit_code == 1, raw.output
        centred = runner.invoke(app, [*args, "--centring", str(ref)])
        record = json.loads(centred.stdout.splitlines()[0])
        assert centred.exit_code == 0 and record["holds"], centred.output
        low, high = record["fpr_95"]
        assert low <= record["fpr"] <= high and high < 0.1

        # detection reads the same file; a reference of another embedder is refused
        text = " ".join(split_sentences(docs[0].text)[:6])
        out = runner.invoke(app, ["detect", text, *key, "--centring", str(ref)])
        assert out.exit_code in (0, 1), out.output
        missing = runner.invoke(app, ["detect", text, *key, "--centring", str(tmp_path / "no")])
        assert missing.exit_code == 2 and "does not exist" in missing.output
    other = runner.invoke(app, ["detect", text, "--key", str(key_file), "--centring", str(ref)])
    assert other.exit_code == 2 and "another embedder" in other.output, other.output
