"""Keyrings: the ring folder, the family-wise p-value, attribution and payload (real
embedder; the ring's false-positive rate on human text is in test_calibration.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from samark.cli import app
from samark.detection.ring_detector import (
    HOLM,
    MAX_STATISTIC,
    RingDetector,
    holm_adjusted,
    ring_null_count,
)
from samark.errors import EmbedderMismatchError, SamarkError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.keys.keyring import INDEX, Keyring, KeyringError, flag_value
from samark.keys.samark_material import DEFAULT_CELLS, PivotDraw
from samark.schemes.samark.statistics import exchangeable_p_value, ring_max_p_value

IDENTITY = EmbedderIdentity("an-embedder", "f" * 64)


def _key(i: int, identity: EmbedderIdentity = IDENTITY) -> WatermarkKey:
    return WatermarkKey(bytes([i]) * 32, identity)


# -- the family-wise p-value ---------------------------------------------------------------
def test_ring_max_p_value_of_one_key_is_the_single_key_p_value() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        null, own = rng.standard_normal(99), rng.standard_normal(1)
        assert ring_max_p_value(own, null) == pytest.approx(exchangeable_p_value(own[0], null))


@pytest.mark.parametrize("keys", [4, 16])
def test_ring_max_p_value_is_uniform_over_exchangeable_values(keys: int) -> None:
    """Under H0 the ring's and the null sets' statistics are i.i.d.: P(p <= t) is t at
    every attainable level (and at most t elsewhere), where the best key's own p-value,
    uncorrected, flags far more."""
    rng = np.random.default_rng(keys)
    draws, null = 4000, 16 * keys
    p, naive = np.empty(draws), np.empty(draws)
    for i in range(draws):
        values = rng.standard_normal(keys + null)
        own, rest = values[:keys], values[keys:]
        p[i] = ring_max_p_value(own, rest)
        naive[i] = min(exchangeable_p_value(v, rest) for v in own)
    levels = np.unique(p)[:8]  # the attainable values: P(p <= q) = q exactly
    sd = np.sqrt(levels * (1 - levels) / draws)
    assert np.all(np.abs((p[:, None] <= levels).mean(axis=0) - levels) < 4 * sd + 1e-9)
    for t in (0.05, 0.2, 0.5):
        assert (p <= t).mean() <= t + 4 * np.sqrt(t * (1 - t) / draws)
    assert (naive <= 0.05).mean() > 2 * (p <= 0.05).mean()


def test_holm_adjusted_p_values() -> None:
    assert holm_adjusted([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm_adjusted([0.3]) == [0.3]
    assert holm_adjusted([0.6, 0.6]) == [1.0, 1.0]


def test_ring_null_count_keeps_the_smallest_p_value_below_alpha() -> None:
    assert ring_null_count(1, 0.01) == 999  # the single-key default
    for k in (4, 16, 64):
        m = ring_null_count(k, 0.01)
        assert k / (m + k) <= 0.001 and k / (m + 1) <= 0.001


# -- the ring folder ---------------------------------------------------------------------
def test_ring_files_are_private_and_hold_no_secret(tmp_path) -> None:
    ring = Keyring.create(tmp_path / "ring", IDENTITY)
    keys = [_key(i) for i in range(3)]
    for i, key in enumerate(keys):
        ring.add(key, f"tenant-{i}", created=f"2026-0{i + 1}-01T00:00:00+00:00")
    assert stat.S_IMODE((tmp_path / "ring").stat().st_mode) == 0o700
    for name in [INDEX, "tenant-0.key", "tenant-1.key", "tenant-2.key"]:
        assert stat.S_IMODE((tmp_path / "ring" / name).stat().st_mode) == 0o600
    index = (tmp_path / "ring" / INDEX).read_text()
    secrets = [
        json.loads((tmp_path / "ring" / f"tenant-{i}.key").read_text())["secret"] for i in range(3)
    ]
    assert not any(s in index or s in repr(ring) for s in secrets)
    again = Keyring.load(tmp_path / "ring")
    assert again.labels() == ["tenant-0", "tenant-1", "tenant-2"]
    assert [k.key_id for _, k in again.load_keys()] == [k.key_id for k in keys]
    assert again.current().label == "tenant-2"


def test_rotation_retires_a_key_that_still_detects(tmp_path) -> None:
    ring = Keyring.create(tmp_path / "ring", IDENTITY)
    ring.add(_key(1), "2026-q1", created="2026-01-01T00:00:00+00:00")
    ring.add(_key(2), "2026-q2", created="2026-04-01T00:00:00+00:00")
    ring.retire("2026-q2")
    again = Keyring.load(tmp_path / "ring")
    assert again.current().label == "2026-q1" and not again.entry("2026-q2").active
    assert len(again.load_keys()) == 2  # a retired key is kept for detection
    with pytest.raises(KeyringError, match="already retired"):
        again.retire("2026-q2")
    again.retire("2026-q1")
    with pytest.raises(KeyringError, match=r"every key .* is retired"):
        again.current()


def test_payload_positions(tmp_path) -> None:
    ring = Keyring.create(tmp_path / "ring", IDENTITY)
    for i in range(3):
        ring.add(_key(i), f"k{i}")
    assert ring.payload_bits is None
    with pytest.raises(KeyringError, match="2, 4, 8"):
        ring.payload_entry(0)
    ring.add(_key(3), "k3")
    assert ring.payload_bits == 2 and ring.payload_entry(3).label == "k3"
    with pytest.raises(KeyringError, match=r"0\.\.3"):
        ring.payload_entry(4)
    ring.retire("k1")
    with pytest.raises(KeyringError, match="retired"):
        ring.payload_entry(1)
    assert Keyring.load(tmp_path / "ring").position("k3") == 3  # retiring keeps places


def test_ring_refuses_bad_keys_labels_and_files(tmp_path) -> None:
    ring = Keyring.create(tmp_path / "ring", IDENTITY)
    ring.add(_key(1), "a")
    other = EmbedderIdentity("another", "0" * 64)
    with pytest.raises(EmbedderMismatchError, match="one ring detects with one embedder"):
        ring.add(_key(2, other), "b")
    with pytest.raises(KeyringError, match="already has a key labelled"):
        ring.add(_key(2), "a")
    with pytest.raises(KeyringError, match="already in the ring"):
        ring.add(_key(1), "c")
    for bad in ("../x", "", "-x", "a b", "x" * 65):
        with pytest.raises(KeyringError, match="invalid key label"):
            ring.add(_key(3), bad)
    with pytest.raises(KeyringError, match="no key labelled"):
        ring.entry("zz")
    with pytest.raises(KeyringError, match="not an empty folder"):
        Keyring.create(tmp_path / "ring", IDENTITY)
    # a key file swapped for another key is caught by its id
    (tmp_path / "ring" / "a.key").unlink()
    _key(9).save(tmp_path / "ring" / "a.key")
    with pytest.raises(KeyringError, match="the ring is damaged"):
        Keyring.load(tmp_path / "ring").key("a")
    (tmp_path / "ring" / INDEX).write_text("{not json")
    with pytest.raises(KeyringError, match="cannot read keyring index"):
        Keyring.load(tmp_path / "ring")
    with pytest.raises(KeyringError, match="not a samark keyring"):
        Keyring.load(tmp_path)


def test_flag_bits_add_payload_bits_in_the_flags(tmp_path) -> None:
    ring = Keyring.create(tmp_path / "ring", IDENTITY, flag_bits=2)
    ring.add(_key(0), "k0")
    assert ring.payload_bits == 2  # one key: the flags alone carry the payload
    ring.add(_key(1), "k1")
    assert ring.payload_bits == 3
    for value in range(8):
        signs = ring.payload_flags(value)
        assert ring.payload_entry(value).label == f"k{value >> 2}" and len(signs) == 2
        for first in (1, -1):  # flag 1 is drawn per text: either sign reads the same
            flags = (first, *(first * x for x in signs))
            assert flag_value(flags, 2) == value & 3
    assert ring.payload_flags(6) == (1, -1)  # 6 = 0b110: key 1, flag bits 0 then 1
    assert flag_value((-1, -1, 1), 2) == 2  # flag 2 as flag 1, flag 3 opposite
    with pytest.raises(KeyringError, match=r"0\.\.7"):
        ring.payload_flags(8)
    again = Keyring.load(tmp_path / "ring")
    assert again.flag_bits == 2 and again.payload_bits == 3
    index = json.loads((tmp_path / "ring" / INDEX).read_text())
    assert index["flag_bits"] == 2 and index["version"] == 2  # an older reader refuses it
    plain = Keyring.create(tmp_path / "plain", IDENTITY)
    plain_index = json.loads((tmp_path / "plain" / INDEX).read_text())
    assert "flag_bits" not in plain_index and plain_index["version"] == 1  # older bytes
    assert plain.flag_bits == 0 and plain.payload_bits is None
    with pytest.raises(KeyringError, match="flag_bits"):
        Keyring.create(tmp_path / "bad", IDENTITY, flag_bits=-1)
    assert not (tmp_path / "bad").exists()  # refused before any file
    index["flag_bits"] = "two"
    (tmp_path / "ring" / INDEX).write_text(json.dumps(index))
    with pytest.raises(KeyringError, match="damaged"):
        Keyring.load(tmp_path / "ring")
    with pytest.raises(KeyringError, match="3 flags"):
        flag_value((1, 1), 2)


def test_payload_flags_set_flags_relative_to_the_first_and_no_other_draw(minilm) -> None:
    from samark.schemes.samark import SAMark, SAMarkConfig

    with pytest.raises(ValueError, match="signs"):
        SAMarkConfig.of(payload_flags=(1, 0))
    with pytest.raises(ValueError, match="channels - 1"):
        SAMarkConfig.of(payload_flags=(1, -1))  # 2 channels carry 1 flag bit
    assert SAMarkConfig.of(channels=3, payload_flags=[-1]).generation.payload_flags == (-1,)  # TOML
    key = _key(7, minilm.identity)
    plain = SAMark(key, config=SAMarkConfig.of(channels=3), embedder=minilm)
    fixed = SAMark(key, config=SAMarkConfig.of(channels=3, payload_flags=(-1,)), embedder=minilm)
    firsts = set()
    for seed in range(12):
        a = plain.begin("A prompt.", np.random.default_rng(seed))
        b = fixed.begin("A prompt.", np.random.default_rng(seed))
        assert b.flags[0] == a.flags[0] and b.flags[1] == -b.flags[0] and b.flags[2] == a.flags[2]
        assert flag_value(tuple(b.flags), 1) == 1
        assert a.rng.integers(2**62) == b.rng.integers(2**62)  # the same candidate draws
        firsts.add(float(b.flags[0]))
    assert firsts == {-1.0, 1.0}  # flag 1 stays random: one value leans both ways


# -- detection against a ring (real embedder) ----------------------------------------------
@pytest.fixture(scope="module")
def pool(minilm):
    """Human sentences (Wikipedia leads) and their embeddings: the candidates from which
    a key's sentences are chosen as SAMark chooses among an LM's candidates."""
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    sentences = [s for d in load_dataset("wikipedia_leads")[:150] for s in split_sentences(d.text)]
    sentences = [s for s in dict.fromkeys(sentences) if 40 < len(s) < 200][:600]
    return sentences, minilm.encode(sentences)


def _marked_text(
    pool, key: WatermarkKey, dim: int, seed: int, n: int = 10, flags: tuple[int, ...] = ()
) -> str:
    """``n`` pool sentences on the key's flag side of both channels, the most aligned (the
    flags drawn from ``seed``, flag 2 on set relative to flag 1 by ``flags``)."""
    sentences, emb = pool
    drawn = np.random.default_rng(seed).choice([-1.0, 1.0], size=2)
    drawn[1 : 1 + len(flags)] = drawn[0] * np.asarray(flags, dtype=float)
    flags = drawn
    signed = (emb @ key.samark.pivots(dim, 2).T) * flags
    best = np.argsort(-signed.min(axis=1))[:n]
    return " ".join(sentences[i] for i in best)


@pytest.fixture(scope="module")
def minilm_ring(tmp_path_factory, minilm):
    avoid = minilm.reference_directions()
    ring = Keyring.create(tmp_path_factory.mktemp("rings") / "ring", minilm.identity)
    for i in range(4):
        ring.add(
            WatermarkKey(bytes([40 + i]) * 32, minilm.identity, PivotDraw.avoiding(avoid)),
            f"tenant-{i}",
        )
    return ring


def test_ring_attributes_a_marked_text_and_decodes_its_payload(minilm, minilm_ring, pool) -> None:
    from samark.schemes import create_scheme

    detector = RingDetector.from_ring(minilm_ring, "samark", statistic="scan")
    assert detector.method == MAX_STATISTIC and detector.payload_bits == 2
    texts = [_marked_text(pool, minilm_ring.key(f"tenant-{i}"), minilm.dim, i) for i in range(4)]
    human = " ".join(pool[0][i] for i in range(0, 200, 20))
    results = detector.detect_many([*texts, human, ""])
    assert results[-1] is None
    for i, r in enumerate(results[:4]):
        assert r is not None and r.is_watermarked, r
        assert r.label == f"tenant-{i}" and r.payload == i and r.position == i
        assert r.key_id == minilm_ring.entry(f"tenant-{i}").key_id
        # the key's own p-value is the single-key detector's with the ring's null pool
        single = create_scheme(
            "samark",
            key=minilm_ring.key(f"tenant-{i}"),
            statistic="scan",
            n_null=ring_null_count(4, 0.01),
        )
        assert r.key_p_value == pytest.approx(single.detect(texts[i]).p_value)
        assert r.key_p_value <= r.p_value <= 4 * r.key_p_value + 1e-9
        record = r.to_dict(details=True)
        assert record["key_label"] == f"tenant-{i}" and record["payload"] == i
        assert set(record["keys"]) == set(minilm_ring.labels())
        json.dumps(record)
    unmarked = results[4]
    assert unmarked is not None
    if not unmarked.is_watermarked:  # unmarked: no key and no payload are attributed
        assert unmarked.label is None and unmarked.payload is None and unmarked.key_id is None


def test_ring_decodes_payload_bits_from_the_flags(minilm, pool, tmp_path) -> None:
    ring = Keyring.create(tmp_path / "ring", minilm.identity, flag_bits=1)
    avoid = minilm.reference_directions()
    for i in range(2):
        ring.add(
            WatermarkKey(bytes([60 + i]) * 32, minilm.identity, PivotDraw.avoiding(avoid)), f"t{i}"
        )
    detector = RingDetector.from_ring(ring, "samark", statistic="scan")
    assert detector.payload_bits == 2 and detector.flag_bits == 1
    values = [0, 1, 2, 3, 1, 2]  # each value twice or more, flag 1 drawn per text
    texts = [
        _marked_text(
            pool,
            ring.key(ring.payload_entry(v).label),
            minilm.dim,
            seed,
            flags=ring.payload_flags(v),
        )
        for seed, v in enumerate(values)
    ]
    for value, r in zip(values, detector.detect_many(texts), strict=True):
        assert r is not None and r.is_watermarked, r
        assert r.payload == value and r.position == value >> 1
        assert r.to_dict()["flag_bits"] == 1
    with pytest.raises(SamarkError, match="flag pattern"):
        RingDetector.from_ring(ring, "kgw")
    two = Keyring.create(tmp_path / "two", minilm.identity, flag_bits=2)
    two.add(ring.key("t0"), "t0")
    with pytest.raises(SamarkError, match="needs 3 channels"):
        RingDetector.from_ring(two, "samark")


def test_a_dated_text_is_tested_against_the_keys_in_use_then(minilm, pool, tmp_path) -> None:
    avoid = minilm.reference_directions()
    ring = Keyring.create(tmp_path / "ring", minilm.identity)
    for i in range(4):
        key = WatermarkKey(bytes([60 + i]) * 32, minilm.identity, PivotDraw.avoiding(avoid))
        ring.add(key, f"2026-q{i + 1}", created=f"2026-{3 * i + 1:02d}-01T00:00:00+00:00")
    ring.retire("2026-q1", when="2026-05-01T00:00:00+00:00")
    assert [e.label for e in ring.in_use("2026-04-15")] == ["2026-q1", "2026-q2"]
    assert [e.label for e in ring.in_use("2026-06-01")] == ["2026-q2"]
    assert [e.label for e in ring.in_use("2026-01-01")] == ["2026-q1"]  # its creation day
    with pytest.raises(KeyringError, match="ISO 8601"):
        ring.in_use("yesterday")
    text = _marked_text(pool, ring.key("2026-q2"), minilm.dim, 5)
    dated = RingDetector.from_ring(ring, statistic="scan", at="2026-04-15")
    every = RingDetector.from_ring(ring, statistic="scan")
    assert dated.positions == (0, 1) and len(every.entries) == 4
    a, b = dated.detect(text), every.detect(text)
    assert a.is_watermarked and a.label == "2026-q2" and a.payload == 1  # its ring position
    assert a.ring_size == 2 and b.ring_size == 4 and b.label == "2026-q2" and b.payload == 1
    with pytest.raises(SamarkError, match="in use at"):
        RingDetector.from_ring(ring, at="2025-12-01")


def test_ring_of_another_scheme_uses_holm(minilm_ring, pool, minilm) -> None:
    from samark.schemes import create_scheme

    detector = RingDetector.from_ring(minilm_ring, "kgw")
    assert detector.method == HOLM
    text = _marked_text(pool, minilm_ring.key("tenant-1"), minilm.dim, 1)
    result = detector.detect(text)
    single = [create_scheme("kgw", key=k).detect(text).p_value for _, k in minilm_ring.load_keys()]
    assert result.key_p_values == pytest.approx(single)
    assert result.p_value == pytest.approx(min(1.0, 4 * min(single)))
    assert result.adjusted_p_values == pytest.approx(holm_adjusted(single))


def test_ring_of_layered_keys_scores_the_semantic_layer_in_one_pass(
    minilm, minilm_ring, pool
) -> None:
    from samark.schemes import create_scheme

    detector = RingDetector.from_ring(minilm_ring, "samark-layered")
    assert detector.method == HOLM
    text = _marked_text(pool, minilm_ring.key("tenant-2"), minilm.dim, 2)
    result = detector.detect(text)
    single = [
        create_scheme("samark-layered", key=k, embedder=minilm, n_null=ring_null_count(4, 0.01))
        .detect(text)
        .p_value
        for _, k in minilm_ring.load_keys()
    ]
    assert result.key_p_values == pytest.approx(single)
    assert result.p_value == pytest.approx(min(1.0, 4 * min(single)))
    assert result.key_p_value == pytest.approx(min(single))
    assert result.detection.details["p_token"] > 0  # the best key's own layered detection


# -- the command line --------------------------------------------------------------------
def test_keyring_commands(tmp_path, pool, minilm) -> None:
    runner = CliRunner()
    ring = tmp_path / "ring"
    made = runner.invoke(
        app, ["keyring", "new", str(ring), "--embedder", "all-minilm-l6-v2", "--keys", "4"]
    )
    assert made.exit_code == 0 and "2-bit payload" in made.output, made.output
    listed = runner.invoke(app, ["keyring", "list", str(ring), "--json"])
    record = json.loads(listed.stdout)
    assert [k["label"] for k in record["keys"]] == ["key-00", "key-01", "key-02", "key-03"]
    assert record["payload_bits"] == 2 and record["current"] == "key-03"
    secrets = [json.loads((ring / f"key-0{i}.key").read_text())["secret"] for i in range(4)]
    table = runner.invoke(app, ["keyring", "list", str(ring)], env={"COLUMNS": "80"})
    assert table.exit_code == 0 and "key-02" in table.output
    # every column named, dates whole (to the minute, UTC) on 80 columns, one row per key
    created = record["keys"][3]["created"]
    row = next(line for line in table.stdout.splitlines() if "key-03" in line)
    assert "status" in table.stdout and "created (UTC)" in table.stdout
    assert f"{created[:10]} {created[11:16]}" in row and "current: marks text" in row
    assert not any(s in listed.output + table.output + made.output for s in secrets)

    retired = runner.invoke(app, ["keyring", "retire", str(ring), "key-03"])
    assert retired.exit_code == 0
    again = json.loads(runner.invoke(app, ["keyring", "list", str(ring), "--json"]).stdout)
    assert again["current"] == "key-02" and again["keys"][3]["retired"]
    table = runner.invoke(app, ["keyring", "list", str(ring)], env={"COLUMNS": "80"})
    assert "retired 20" in next(x for x in table.stdout.splitlines() if "key-03" in x)
    wrong = WatermarkKey(bytes([5]) * 32, EmbedderIdentity("x", "0" * 64))
    wrong.save(tmp_path / "wrong.key")
    refused = runner.invoke(
        app, ["keyring", "add", str(ring), "--label", "x", "--key", str(tmp_path / "wrong.key")]
    )
    assert refused.exit_code == 2 and "one embedder" in refused.output

    text = _marked_text(pool, Keyring.load(ring).key("key-01"), minilm.dim, 3)
    # the text leans on the keys' static pivots: read as samark (the ring's keys name cells,
    # so they were made for samark-layered: another scheme is asked for on purpose)
    as_samark = ["--scheme", "samark", "--any-scheme"]
    found = runner.invoke(app, ["detect", text, "--keyring", str(ring), *as_samark])
    result = json.loads(found.stdout.splitlines()[0])
    assert found.exit_code == 0, found.output
    assert result["key_label"] == "key-01" and result["payload"] == 1
    assert result["ring_method"] == MAX_STATISTIC and result["ring_keys"] == 4
    assert "by key 'key-01'" in found.output and not any(s in found.output for s in secrets)
    # generation picks the key: a retired one is refused, a payload names its key
    for args, message in (
        (["--label", "key-03"], "retired"),
        (["--payload", "7"], "0..3"),
        (["--label", "key-00", "--payload", "1"], "not both"),
    ):
        out = runner.invoke(app, ["generate", "Hello.", "--keyring", str(ring), *args])
        assert out.exit_code == 2 and message in out.output, out.output
    key = ["--key", str(ring / "key-00.key")]
    out = runner.invoke(app, ["generate", "Hello.", *key, "--payload", "1"])
    assert out.exit_code == 2 and "--keyring" in out.output


def test_a_rings_keys_share_their_cells(tmp_path) -> None:
    """A new ring's keys name the default keyed cells (64), a ring with flag bits static pivots (its
    payload is in the flag pattern, which cells do not have); a key added later takes the
    ring's; asking for both exits 2 and makes no ring."""
    runner = CliRunner()
    plain, flagged = tmp_path / "plain", tmp_path / "flagged"
    for ring, extra in ((plain, []), (flagged, ["--flag-bits", "1"])):
        made = runner.invoke(
            app, ["keyring", "new", str(ring), "--embedder", "all-minilm-l6-v2", *extra]
        )
        assert made.exit_code == 0, made.output
        added = runner.invoke(app, ["keyring", "add", str(ring), "--label", "later"])
        assert added.exit_code == 0, added.output
    for ring, cells in ((plain, DEFAULT_CELLS), (flagged, 0)):
        opened = Keyring.load(ring)
        assert [opened.key(label).samark.cells for label in opened.labels()] == [cells, cells]
        draws = "projected" if cells else "full"  # a key added later takes the ring's draws
        assert [opened.key(x).samark.null_draws for x in opened.labels()] == [draws, draws]
    both = runner.invoke(
        app, ["keyring", "new", str(tmp_path / "both"), "--flag-bits", "1", "--cells", "16"]
    )
    assert both.exit_code == 2 and "--cells 0" in both.output
    assert not (tmp_path / "both").exists()


@pytest.mark.slow
def test_generate_with_a_payload_names_its_key(tmp_path) -> None:
    runner = CliRunner()
    ring = tmp_path / "ring"
    made = runner.invoke(app, ["keyring", "new", str(ring), "--keys", "2", "--flag-bits", "1"])
    assert made.exit_code == 0 and "2-bit payload" in made.output, made.output
    out = runner.invoke(
        app,
        [
            "generate",
            "The city council met on Tuesday.",
            "--keyring",
            str(ring),
            "--payload",
            "3",  # key 1, flag bit 1
            "--sentences",
            "1",
            "--candidates",
            "4",
            "--seed",
            "1",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout.splitlines()[0])
    assert record["key_label"] == "key-01" and record["payload"] == 3
    assert record["key_id"] == Keyring.load(ring).entry("key-01").key_id
    assert "secret" not in out.stdout


def test_a_served_payload_ring_keeps_the_served_settings(minilm, tmp_path) -> None:
    """`samark serve --keyring` (``create_app`` of a ring's ``ServerConfig``): each
    payload's scheme has the served scheme's config, generator (the layered mark's
    tokenizer), engine and embedder, under its own key; the ring detects with the same
    generator and the same scheme_params."""
    pytest.importorskip("fastapi", reason="serving needs samark[server]")
    from samark.models import DEFAULT_GENERATOR, resolve_generator
    from samark.serving import ServerConfig, ServeSettings, create_app

    ring = Keyring.create(tmp_path / "ring", minilm.identity)
    for i in range(2):
        ring.add(WatermarkKey(bytes([80 + i]) * 32, minilm.identity), f"k{i}")
    # the generator named by its folder, not the default preset's name: a payload scheme
    # or ring built with the default would name another generator
    folder = str(resolve_generator(DEFAULT_GENERATOR)[1])
    access = ServeSettings(auth=False, default_sentences=3, concurrent_generations=1)

    def served(ring_path: Path, scheme: str, **fields: Any) -> Any:
        config = ServerConfig(
            keyring=ring_path, label="k1", scheme=scheme, generator=folder, alpha=0.05,
            access=access, **fields,
        )  # fmt: skip
        worker = create_app(config).state.worker
        return worker.scheme, worker.keys

    # scheme_params reach the ring's detector too (a kappa of its own: detection differs),
    # but never fewer null sets than the ring needs
    params = {"kappa": 25.0, "null_seed": 3, "n_null": 19}
    served_scheme, keys = served(ring.path, "samark-layered", candidates=8, scheme_params=params)
    assert (
        served_scheme.config.detection.kappa == 25.0 and served_scheme.config.detection.n_null == 19
    )
    assert all(
        (s.config.detection.kappa, s.config.detection.null_seed, s.config.detection.n_null)
        == (25.0, 3, 999)
        and "/k25.0/" in s.detector_id()
        for s in keys.ring.schemes
    )
    assert served_scheme.generator_name != DEFAULT_GENERATOR
    assert served_scheme.config.generation.candidates == 8 and served_scheme.config.alpha == 0.05
    assert sorted(keys.payloads) == [0, 1] and keys.label == "k1"
    for position, (label, scheme) in keys.payloads.items():
        assert label == f"k{position}" and scheme.key_id == ring.entry(label).key_id
        assert scheme.config == served_scheme.config
        assert scheme.generator_name == served_scheme.generator_name
        assert scheme.engine is served_scheme.engine
        assert scheme.embedder is served_scheme.embedder
    assert keys.ring.method == HOLM and len(keys.ring.entries) == 2
    assert all(s.generator_name == served_scheme.generator_name for s in keys.ring.schemes)
    # a ring with a flag bit: one scheme per value, its key and its flag fixed
    flagged = Keyring.create(tmp_path / "flagged", minilm.identity, flag_bits=1)
    for label in ("k0", "k1"):
        flagged.add(ring.key(label), label)
    served_scheme, keys = served(flagged.path, "samark-layered", candidates=8)
    assert sorted(keys.payloads) == [0, 1, 2, 3] and keys.ring.flag_bits == 1
    for value, (label, scheme) in keys.payloads.items():
        assert label == f"k{value >> 1}" and scheme.config.generation.payload_flags == (
            (-1,) if value & 1 else (1,)
        )
        assert scheme.config.replace(payload_flags=()) == served_scheme.config
    # any scheme: each payload's scheme keeps the served scheme's config
    kgw, keys = served(ring.path, "kgw", scheme_params={"gamma": 0.3})
    assert kgw.config.gamma == 0.3 and sorted(keys.payloads) == [0, 1]
    assert all(s.config.gamma == 0.3 for s in keys.ring.schemes)  # the ring detects so too
    assert all(s.config == kgw.config for _, s in keys.payloads.values())
