"""Detection of record files: batched embedding gives the per-text answers, JSONL and
Parquet stream the same results, and the same job on a local Ray instance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.detection.record_files import detect_records, read_jsonl
from samark.schemes.samark.detector import SAMarkDetector

TEXTS = [
    "The council approved the budget on Tuesday. Residents asked for more parks. The vote "
    "was five to two.",
    "",
    "A storm hit the coast overnight. Power was cut to thousands of homes.",
    "   \n ",
    "Scientists found a new frog species in Peru. It lives high in the cloud forest. Its "
    "call sounds like a whistle. The team named it after a local guide.",
    "One sentence only.",
]


@pytest.fixture(scope="module")
def detector(mpnet, mpnet_key) -> SAMarkDetector:
    return SAMarkDetector(mpnet_key, mpnet)


@pytest.fixture(scope="module")
def key_file(mpnet_key, tmp_path_factory) -> Path:
    return mpnet_key.save(tmp_path_factory.mktemp("key") / "test.key")


def test_detect_many_is_detect_on_each(detector) -> None:
    many = detector.detect_many(TEXTS)
    for text, result in zip(TEXTS, many, strict=True):
        if not text.strip():
            assert result is None
            continue
        single = detector.detect(text)
        assert result is not None and result.n_units == single.n_units
        # equal up to float rounding of batched embeddings: a near-tie among the 999 null
        # sets may move p by one step of 1/1000 (tests/test_fuzz.py found one)
        assert result.p_value == pytest.approx(single.p_value, abs=2.5e-3)
        assert result.sentence_p_values == pytest.approx(single.sentence_p_values, abs=2.5e-3)


def test_records_keep_order_fields_and_errors(detector, tmp_path) -> None:
    path = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": i, "text": t}).encode() for i, t in enumerate(TEXTS)]
    lines[3] = b"\xff\xfe not utf-8"
    lines.insert(1, b'{"id": "no text"}')
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = list(detect_records(detector, read_jsonl(path), chunk=2))
    assert len(out) == len(lines)
    assert out[1]["error"] == "record has no string field 'text'"
    assert out[2]["error"] == "the text has no sentence to score"  # TEXTS[1] is empty
    assert out[4]["error"] == "record is not UTF-8 text" and out[4]["line"] == 5
    ok = [r for r in out if "error" not in r]
    assert [r["id"] for r in ok] == [0, 2, 4, 5]
    again = list(detect_records(detector, read_jsonl(path), chunk=32))
    assert [r.get("error") for r in again] == [r.get("error") for r in out]
    for a, b in zip(again, out, strict=True):  # other chunks, other padding: float rounding
        assert a.get("p_value") == pytest.approx(b.get("p_value"), abs=2.5e-3)


def test_cli_reads_parquet_like_jsonl(key_file, tmp_path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [{"id": i, "text": t} for i, t in enumerate(TEXTS) if t.strip()]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parquet = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    runner = CliRunner()
    by_jsonl = runner.invoke(app, ["detect", str(jsonl), "--key", str(key_file)])
    by_parquet = runner.invoke(app, ["detect", str(parquet), "--key", str(key_file)])
    assert by_jsonl.exit_code == by_parquet.exit_code == 1, by_parquet.output
    a = [json.loads(x) for x in by_jsonl.stdout.splitlines()]
    b = [json.loads(x) for x in by_parquet.stdout.splitlines()]
    assert [r["p_value"] for r in a] == [r["p_value"] for r in b] and len(a) == len(rows)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    bad = runner.invoke(app, ["detect", str(broken), "--key", str(key_file)])
    assert bad.exit_code == 2 and "Parquet" in bad.stderr


@pytest.mark.slow
def test_ray_detection_matches_in_process(key_file, detector, tmp_path) -> None:
    pytest.importorskip("ray.data", reason="samark[scale] installs ray[data]")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [{"id": i, "text": t} for i, t in enumerate(TEXTS)]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), source)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            # one actor (each loads the embedder); the file is still cut into 4 blocks, so
            # the rows come back from several blocks and must be put together by id
            *("detect", str(source), "--key", str(key_file), "--ray", "1", "--out", str(out)),
            # no --statistic: the command's default is the in-process detector's (the config's)
            *("--chunk", "2"),  # Ray batches of 2 records: more batches, put together by id
        ],
    )
    assert result.exit_code == 2, result.output  # every row written; two not scored
    assert "2 of 6 records not scored" in result.stderr
    table = pq.read_table(out).to_pylist()
    by_id = {r["id"]: r for r in table}
    assert sorted(by_id) == list(range(len(TEXTS)))
    expected = detector.detect_many(TEXTS)
    for i, want in enumerate(expected):
        got = by_id[i]
        if want is None:
            assert got["p_value"] is None and got["error"]
        else:
            assert got["p_value"] == pytest.approx(want.p_value, abs=2.5e-3)
            assert got["n_units"] == want.n_units and got["error"] is None
    assert f"{len(TEXTS)} records" in result.stderr


def test_an_embedder_remembers_sentences_only_within_the_block(minilm) -> None:
    calls: list[list[str]] = []
    real = minilm._encode

    def counting(sentences: list[str]) -> np.ndarray:
        calls.append(list(sentences))
        return real(sentences)

    minilm._encode = counting
    try:
        with minilm.remembering():
            first = minilm.encode(["A cat sat.", "A dog ran."])
            again = minilm.encode(["A dog ran.", "A bird sang.", "A dog ran."])
        after = minilm.encode(["A dog ran."])
    finally:
        del minilm._encode
    # inside: each distinct sentence embedded once, in order; outside: afresh
    assert calls == [["A cat sat.", "A dog ran."], ["A bird sang."], ["A dog ran."]]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[1])
    assert again.shape == (3, minilm.dim)
    assert np.allclose(after[0], first[1], atol=1e-5)
    assert minilm._memo is None


@pytest.fixture(scope="module")
def ring_dir(mpnet, mpnet_key, tmp_path_factory) -> Path:
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring

    ring = Keyring.create(tmp_path_factory.mktemp("ring") / "ring", mpnet.identity)
    ring.add(WatermarkKey(bytes([9]) * 32, mpnet.identity), "other")
    ring.add(mpnet_key, "test")
    return ring.path


def test_keyring_records_name_the_key_in_jsonl_and_ray_batches(ring_dir, tmp_path) -> None:
    """A keyring's answers per record: the JSONL stream and a Ray actor's batch give the
    in-process ring's p-values, with key, payload and error columns."""
    pd = pytest.importorskip("pandas")
    from samark.detection.ray import _ActorDetector
    from samark.detection.ring_detector import RingDetector
    from samark.keys.keyring import Keyring

    expected = RingDetector.from_ring(Keyring.load(ring_dir), statistic="scan").detect_many(TEXTS)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    result = CliRunner().invoke(app, ["detect", str(source), "--keyring", str(ring_dir)])
    assert result.exit_code == 2, result.output  # two texts without a sentence: not scored
    assert "2 of 6 records" in result.stderr and "output lines 2, 4" in result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    actor = _ActorDetector(None, str(ring_dir), "samark", "text", {"statistic": "scan"}, 1)
    batch = actor(pd.DataFrame({"text": TEXTS}))
    assert {"key_label", "key_id", "payload", "p_value", "error"} <= set(batch.columns)
    for i, want in enumerate(expected):
        if want is None:
            assert lines[i]["error"] and pd.isna(batch["p_value"][i]) and batch["error"][i]
            continue
        assert lines[i]["p_value"] == pytest.approx(want.p_value, abs=2.5e-3)
        assert batch["p_value"][i] == pytest.approx(want.p_value, abs=2.5e-3)
        assert lines[i]["ring_keys"] == 2 and lines[i]["key_label"] == want.label
        assert lines[i]["payload"] == want.payload  # two keys: a 1-bit payload when flagged
        assert (batch["key_label"][i] if not pd.isna(batch["key_label"][i]) else None) == want.label
