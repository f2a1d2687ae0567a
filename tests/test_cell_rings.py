"""Keyrings with SAMark's keyed semantic cells (issue 44): the streamed null cell draws are
the held ones, the ring's p-value is exact over keys, a ring names the key whose cells a
text follows (samark's max-statistic, samark-layered's Holm), and the CLI and the server
detect with cells against a ring."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from samark.cli import app
from samark.detection.ring_detector import HOLM, MAX_STATISTIC, RingDetector, ring_null_count
from samark.errors import SamarkError
from samark.keys import WatermarkKey
from samark.keys.keyring import Keyring
from samark.keys.pivots import PivotLaw
from samark.schemes.samark.cell_pass import score_in_cells
from samark.schemes.samark.cells import (
    NullCellDraws,
    cell_evidence,
    key_cells,
    null_cells,
)
from samark.schemes.samark.statistics import (
    exchangeable_p_value,
    ring_max_p_value,
    sentence_p_values,
    statistic_values,
)

LAW = PivotLaw.of("avoid", None)
CELLS = 16


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _topic_texts(rng: np.random.Generator, count: int, n: int, dim: int) -> list[np.ndarray]:
    """Repetitive texts: ``n`` unit sentences sharing one topic (pairwise cosine ~0.6)."""
    out = []
    for _ in range(count):
        topic = _unit(rng.standard_normal(dim))
        out.append(
            _unit(math.sqrt(0.6) * topic + math.sqrt(0.4) * _unit(rng.standard_normal((n, dim))))
        )
    return out


def test_streamed_null_draws_score_as_the_held_ones() -> None:
    """Draws regenerated chunk by chunk are the held draws: the same null statistics (up to
    float32 rounding: BLAS may round a block of 256 draws and a chunk of 64 apart in the last
    bit), p-values and sentence p-values as scoring every draw at once, for two keys at once."""
    rng = np.random.default_rng(0)
    dim, count = 24, 150
    keys = null_cells(LAW, 2, dim, 4, 2, seed=77)
    texts = _topic_texts(rng, 3, 5, dim)
    held = NullCellDraws(LAW, count, dim, 4, 2, seed=3)
    streamed = dataclasses.replace(held, hold=4 * 70)  # one chunk held, the rest regenerated
    assert not held.streamed and streamed.streamed and streamed.held == 64
    nulls = null_cells(LAW, count, dim, 4, 2, seed=3)
    a = score_in_cells(keys, held, texts, kappa=30.0, use_tanh=True, statistic="scan")
    b = score_in_cells(keys, streamed, texts, kappa=30.0, use_tanh=True, statistic="scan")
    for emb, x, y in zip(texts, a, b, strict=True):
        np.testing.assert_allclose(x.null, y.null, rtol=1e-5, atol=1e-6)
        assert x.p_values() == y.p_values()
        np.testing.assert_array_equal(x.exceed, y.exceed)
        for k in range(2):  # each key as the single-key detector scores it
            signed = np.concatenate([keys.signed(emb)[k : k + 1], nulls.signed(emb)])
            evidence = cell_evidence(signed, 30.0)
            values = statistic_values(evidence, "scan")
            assert y.p_values()[k] == exchangeable_p_value(float(values[0]), values[1:])
            np.testing.assert_allclose(y.sentence_p_values(k), sentence_p_values(evidence))


def test_a_large_call_is_scored_in_groups_of_sentences_alike(monkeypatch) -> None:
    """Texts grouped up to a few sentences against each block of draws (a text longer than
    the bound alone): the same scores as all the sentences at once."""
    from samark.schemes.samark import cell_pass

    rng = np.random.default_rng(4)
    dim = 24
    keys = null_cells(LAW, 2, dim, 4, 2, seed=78)
    texts = [*_topic_texts(rng, 3, 5, dim), *_topic_texts(rng, 1, 9, dim)]
    draws = NullCellDraws(LAW, 99, dim, 4, 2, seed=3)
    whole = score_in_cells(keys, draws, texts, kappa=30.0, use_tanh=True, statistic="scan")
    monkeypatch.setattr(cell_pass, "_ROWS", 7)
    assert [m for _, _, m in cell_pass._groups([(0, 5), (5, 10), (10, 12), (12, 21)], 7)] == [
        [0],
        [1, 2],
        [3],
    ]
    grouped = score_in_cells(keys, draws, texts, kappa=30.0, use_tanh=True, statistic="scan")
    for x, y in zip(whole, grouped, strict=True):
        # float32 cosines of other batch shapes may round apart in the last bit
        np.testing.assert_allclose(x.null, y.null, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(x.exceed, y.exceed)
        assert x.p_values() == y.p_values()


def test_ring_max_statistic_with_cells_is_exact_over_keys() -> None:
    """H0: repetitive texts that depend on no key, a fresh ring of 3 keys (drawn from the
    keys' law) each time against 99 shared null draws: the ring's p-value is uniform or
    conservative."""
    rng = np.random.default_rng(1)
    dim, cells, rings = 24, 6, 300
    draws = NullCellDraws(LAW, 99, dim, cells, 2, seed=0)
    texts = _topic_texts(rng, rings, 6, dim)
    ps = []
    for i, emb in enumerate(texts):
        keys = null_cells(LAW, 3, dim, cells, 2, seed=5000 + i)
        (scores,) = score_in_cells(keys, draws, [emb], kappa=30.0, use_tanh=True, statistic="scan")
        ps.append(ring_max_p_value(scores.values, scores.null))
    assert stats.kstest(ps, "uniform", alternative="greater").pvalue > 1e-3
    assert np.mean(np.array(ps) <= 0.05) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / rings)


# -- real embedder ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(minilm):
    """Human sentences (Wikipedia leads) and their embeddings: a key's text is the six
    that lie furthest on its cells' flag side, as its selection would pick them."""
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    docs = load_dataset("wikipedia_leads")[:120]
    sentences = [s for d in docs for s in split_sentences(d.text)]
    sentences = [s for s in dict.fromkeys(sentences) if 40 < len(s) < 200][:500]
    return sentences, minilm.encode(sentences)


def _marked_text(pool, key: WatermarkKey, dim: int, n: int = 6) -> str:
    sentences, emb = pool
    signed = key_cells(key, dim, CELLS, 2).signed(emb)[0]
    return " ".join(sentences[i] for i in np.argsort(-signed.min(axis=1))[:n])


def _human_texts(pool, count: int = 3) -> list[str]:
    sentences = pool[0]
    return [" ".join(sentences[40 * t + 3 * i] for i in range(6)) for t in range(count)]


def test_a_detector_past_its_hold_streams_the_same_draws(minilm, pool) -> None:
    """A single key's detector whose draws do not fit its hold regenerates them, one pass
    for a batch: the same detections as holding them all (detect and detect_many)."""
    from samark.schemes.samark.config import SAMarkDetection
    from samark.schemes.samark.detector import SAMarkDetector

    key = WatermarkKey(bytes([110]) * 32, minilm.identity)
    held = SAMarkDetector(key, minilm, SAMarkDetection(statistic="scan", n_null=199), cells=CELLS)
    streamed = SAMarkDetector(
        key, minilm, SAMarkDetection(statistic="scan", n_null=199), cells=CELLS
    )
    assert held.null_cell_draws is not None and streamed.null_cell_draws is not None
    streamed.null_cell_draws = dataclasses.replace(streamed.null_cell_draws, hold=CELLS * 64)
    assert streamed.null_cell_draws.streamed and not held.null_cell_draws.streamed
    texts = [_marked_text(pool, key, minilm.dim), *_human_texts(pool, 2), ""]
    for a, b in zip(held.detect_many(texts), streamed.detect_many(texts), strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            # equal up to float32 rounding (BLAS rounds other block shapes apart)
            assert a.p_value == b.p_value and a.sentence_p_values == b.sentence_p_values
            assert a.score == pytest.approx(b.score, rel=1e-5, abs=1e-6)
    assert streamed.detect(texts[0]).p_value == held.detect(texts[0]).p_value < 0.01


@pytest.fixture(scope="module")
def cell_ring(tmp_path_factory, minilm) -> Keyring:
    ring = Keyring.create(tmp_path_factory.mktemp("cell-ring") / "ring", minilm.identity)
    for i in range(3):
        ring.add(WatermarkKey(bytes([120 + i]) * 32, minilm.identity), f"tenant-{i}")
    return ring


@pytest.mark.parametrize(
    ("scheme", "method"), [("samark", MAX_STATISTIC), ("samark-layered", HOLM)]
)
def test_a_ring_with_cells_names_the_key_and_passes_human_text(
    minilm, pool, cell_ring, scheme: str, method: str
) -> None:
    from samark.schemes import create_scheme

    detector = RingDetector.from_ring(cell_ring, scheme, statistic="scan", cells=CELLS)
    assert detector.method == method
    assert all(
        s.detector_id().endswith(f"/cells{CELLS}") or f"/cells{CELLS}/" in s.detector_id()
        for s in detector.schemes
    )
    marked = [_marked_text(pool, cell_ring.key(f"tenant-{i}"), minilm.dim) for i in range(3)]
    human = _human_texts(pool)
    results = detector.detect_many([*marked, *human, ""])
    assert results[-1] is None
    for i, r in enumerate(results[:3]):
        assert r is not None and r.is_watermarked and r.label == f"tenant-{i}", r
        assert r.position == i and r.detection.details["n_null"] == ring_null_count(3, 0.01)
    for r in results[3:6]:
        assert r is not None and not r.is_watermarked and r.label is None, r
    if scheme == "samark":  # a key's own p-value is its single detector's over the ring's draws
        single = create_scheme(
            "samark",
            key=cell_ring.key("tenant-1"),
            embedder=minilm,
            statistic="scan",
            cells=CELLS,
            n_null=ring_null_count(3, 0.01),
        ).detect(marked[1])
        r = results[1]
        assert r is not None and r.key_p_value == single.p_value
        assert r.detection.sentence_p_values == single.sentence_p_values


def test_a_flag_payload_ring_with_cells_is_refused_by_its_cause(tmp_path, minilm) -> None:
    """Cells carry no flag payload (a cell's flags are the key's): the refusal says so, not
    that samark has no flag pattern."""
    ring = Keyring.create(tmp_path / "flagged", minilm.identity, flag_bits=1)
    for i in range(2):
        ring.add(WatermarkKey(bytes([140 + i]) * 32, minilm.identity), f"k{i}")
    with pytest.raises(SamarkError, match="with keyed semantic cells has none") as refused:
        RingDetector.from_ring(ring, "samark", statistic="scan", cells=4)
    assert "detect it with samark" not in str(refused.value)


def test_cli_detects_with_cells_against_a_keyring(tmp_path, minilm, pool) -> None:
    runner = CliRunner()
    ring = tmp_path / "ring"
    made = runner.invoke(
        app, ["keyring", "new", str(ring), "--embedder", "all-minilm-l6-v2", "--keys", "2"]
    )
    assert made.exit_code == 0, made.output
    text = _marked_text(pool, Keyring.load(ring).key("key-01"), minilm.dim)
    # the text leans on the cells as samark reads them (the ring's keys are made for
    # samark-layered: another scheme on purpose)
    as_samark = ["--scheme", "samark", "--any-scheme"]
    base = ["detect", text, "--keyring", str(ring), "--cells", str(CELLS), *as_samark]
    found = runner.invoke(app, base)
    assert found.exit_code == 0, found.output
    result = json.loads(found.stdout.splitlines()[0])
    assert result["key_label"] == "key-01" and result["ring_method"] == MAX_STATISTIC
    assert result["ring_keys"] == 2 and "by key 'key-01'" in found.output
    dated = runner.invoke(app, [*base, "--at", "2999-01-01"])  # both keys in use then
    assert (
        dated.exit_code == 0 and json.loads(dated.stdout.splitlines()[0])["key_label"] == "key-01"
    )
    static = runner.invoke(app, ["detect", text, "--keyring", str(ring), *as_samark])
    assert json.loads(static.stdout.splitlines()[0])["p_value"] != result["p_value"]


def test_a_served_ring_with_cells_marks_and_detects(
    tmp_path, minilm, smollm2, served_app, post_json, monkeypatch
) -> None:
    """``ServerConfig(cells=16)`` over a keyring: the served text is the cells' (the
    served scheme's detector scores on them), and /v1/detect answers as the ring with cells,
    a batch scored in units (here of 3 sentences) as each text alone."""
    pytest.importorskip("fastapi", reason="serving needs samark[server]")
    from samark.serving import ServerConfig, ServeSettings, create_app

    ring = Keyring.create(tmp_path / "ring", minilm.identity)
    for i in range(2):
        ring.add(WatermarkKey(bytes([150 + i]) * 32, minilm.identity), f"k{i}")
    token = "cells-served-token-0123456789"
    access = ServeSettings(tokens=frozenset({token}), default_sentences=2, concurrent_generations=1)
    config = ServerConfig(
        keyring=ring.path, scheme="samark-layered", cells=CELLS, candidates=4, access=access
    )
    served = create_app(config)
    worker = served.state.worker
    assert worker.scheme.detector.key_cells is not None and worker.keys.ring.method == HOLM
    with served_app(served) as base:
        body = {"model": "samark", "prompt": "The city council met on Monday.", "seed": 2}
        status, made = post_json(base, "/v1/completions", body, token)
        assert status == 200, made
        text = made["choices"][0]["text"]
        status, found = post_json(base, "/v1/detect", {"text": text}, token)
        monkeypatch.setattr("samark.serving.scheduling.UNIT_SENTENCES", 3)
        status_batch, batch = post_json(base, "/v1/detect", {"texts": [text, " ", text]}, token)
    assert status == 200 and found["ring_keys"] == 2
    # the groups [text, " "] and [text]: each answer as alone, the empty one in the ring's words
    assert status_batch == 200 and batch["data"][0] == found == batch["data"][2]
    assert batch["data"][1] == {"error": "the text has no sentence to score"}
    expected = RingDetector.from_ring(ring, "samark-layered", statistic="scan", cells=CELLS).detect(
        text
    )
    assert found["p_value"] == pytest.approx(expected.p_value)
    assert found["is_watermarked"] and found["key_label"] == "k1" == made["samark"]["key_label"]
    with pytest.raises(SamarkError, match="--cells is not an option of kgw"):
        ServerConfig(key="k", scheme="kgw", cells=CELLS, access=access)
