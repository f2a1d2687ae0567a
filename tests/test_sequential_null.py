"""Sequential null draws (Besag and Clifford; ``SAMarkConfig.null_stop``, issue 55): valid
p-values, the fixed ones wherever a text is significant, far fewer draws for text no key
marked, Holm for a ring, and a clear refusal where the draws are not per text."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from samark.keys import WatermarkKey
from samark.keys.pivots import PivotLaw
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.cell_pass import score_in_cells
from samark.schemes.samark.cells import NullCellDraws, null_cells
from samark.schemes.samark.null_projection import ProjectedNullCells
from samark.schemes.samark.statistics import exchangeable_p_value, sequential_p_value


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _text(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    topic = _unit(rng.standard_normal(dim))
    return _unit(math.sqrt(0.5) * topic + math.sqrt(0.5) * _unit(rng.standard_normal((n, dim))))


def test_the_sequential_p_value_is_valid_and_exact_where_it_never_stops() -> None:
    """H0 (the observed value one more draw of the null's law), 20,000 trials of at most
    199 draws stopped at 5 exceedances: P(p <= u) <= u at every level, uniform within
    Monte Carlo error; a sequence that never reaches 5 gives the fixed p-value."""
    rng = np.random.default_rng(0)
    total, h, trials = 199, 5, 20_000
    values = rng.random((trials, total + 1))
    p = np.array([sequential_p_value(v[0], v[1:], h, total) for v in values])
    for u in (0.01, 0.025, 0.05, 0.1, 0.25, 0.5):
        assert np.mean(p <= u) <= u + 3 * math.sqrt(u * (1 - u) / trials), u
    assert np.mean(p <= 0.5) > 0.45  # not conservative to the point of uselessness
    few = np.array([0.1, 0.95, 0.2, 0.99])  # 2 exceedances of 0.9 in all 4 draws
    assert sequential_p_value(0.9, few, 5, 4) == exchangeable_p_value(0.9, few) == 3 / 5
    assert sequential_p_value(0.15, few, 2, 4) == 2 / 3  # the 2nd exceedance: 3rd draw
    with pytest.raises(ValueError, match="stopped too early"):
        sequential_p_value(0.9, few[:2], 5, 4)
    with pytest.raises(ValueError, match="at least 1"):
        sequential_p_value(0.9, few, 0, 4)


def test_unmarked_text_stops_early_and_marked_text_draws_everything() -> None:
    """A ring of 4 keys, 4,095 projected draws (4 blocks): a text that depends on no key
    stops after its first block with p-values near the fixed ones; a text written along
    key 0's cells draws all 4 blocks and key 0's p-value is the fixed one exactly."""
    rng = np.random.default_rng(1)
    dim, cells, count = 48, 8, 4_095
    law = PivotLaw.of("avoid", None)
    keys = null_cells(law, 4, dim, cells, 2, seed=33)
    draws = ProjectedNullCells(law, count, dim, cells, 2, seed=0)
    kw = {"kappa": 30.0, "use_tanh": True, "statistic": "scan"}
    human = [_text(rng, 8, dim) for _ in range(6)]
    seq = score_in_cells(keys, draws, human, stop_after=10, **kw)  # type: ignore[arg-type]
    fixed = score_in_cells(keys, draws, human, **kw)  # type: ignore[arg-type]
    for s, f in zip(seq, fixed, strict=True):
        np.testing.assert_array_equal(s.null, f.null[: s.null.size])  # the same draws, fewer
        if min(f.p_values()) > 0.05:
            assert s.null.size < count
        for ps, pf in zip(s.p_values(), f.p_values(), strict=True):
            assert ps == pytest.approx(pf, rel=1.5, abs=0.02)
    marked = _marked_text(keys, 0, dim, rng)
    (s,) = score_in_cells(keys, draws, [marked], stop_after=10, **kw)  # type: ignore[arg-type]
    (f,) = score_in_cells(keys, draws, [marked], **kw)  # type: ignore[arg-type]
    assert f.p_values()[0] < 10 / count
    assert s.null.size == count  # key 0 never reached 10 exceedances: every draw made
    assert s.p_values()[0] == f.p_values()[0]  # its p-value is the fixed one exactly


def _marked_text(keys: Any, k: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Sentences that score high under key ``k``: the 10 of 4,000 random sentences whose
    signed cosines to their cell's pivots under the key are largest (a selection, as
    generation makes one)."""
    pool = _unit(rng.standard_normal((4_000, dim)))
    signed = keys.signed(pool.astype(np.float32))[k]
    strength = signed.min(axis=1)
    return pool[np.argsort(-strength)[:10]]


def test_a_ring_with_sequential_draws_answers_with_holm(minilm) -> None:
    """The max-statistic needs a fixed count of draws; a ring with ``null_stop`` answers
    with Holm over the keys' sequential p-values, and a key of a ring gives its own
    sequential p-value."""
    from samark.detection.ring_detector import HOLM, MAX_STATISTIC, RingDetector
    from samark.keys.keyring import RingEntry
    from samark.models import DEFAULT_GENERATOR
    from samark.schemes.base import SharedResources

    keys = [
        WatermarkKey(bytes([9 + i]) * 32, minilm.identity, PivotDraw.avoiding(None, 8, "projected"))
        for i in range(3)
    ]
    entries = [(RingEntry(f"k{i}", k.key_id, "2026-01-01"), k) for i, k in enumerate(keys)]
    shared = SharedResources(DEFAULT_GENERATOR, minilm)
    text = (
        "The river rose overnight. Farmers moved their cattle. The mayor asked for calm. "
        "Schools stayed shut on Monday."
    )
    ring = RingDetector.from_keys(entries, shared=shared, cells=8)
    seq_ring = RingDetector.from_keys(entries, shared=shared, cells=8, null_stop=10)
    assert ring.method == MAX_STATISTIC and seq_ring.method == HOLM
    found = seq_ring.detect(text)
    assert found is not None and 0 < found.p_value <= 1
    assert found.p_value == pytest.approx(min(1.0, 3 * min(found.key_p_values)))
    seq_key = seq_ring.schemes[0]
    assert "/seq10" in seq_key.detector_id() and "/seq" not in ring.schemes[0].detector_id()
    alone = seq_key.detect(text)
    assert alone.p_value == pytest.approx(found.key_p_values[0])
    assert alone.details["null_stop"] == 10
    assert 0 < alone.details["null_draws_made"] <= alone.details["n_null"]


def test_sequential_draws_are_refused_where_draws_are_shared(minilm) -> None:
    from samark.schemes import create_scheme

    full = WatermarkKey(bytes([3]) * 32, minilm.identity, PivotDraw.avoiding(None, 8, "full"))
    with pytest.raises(ValueError, match="projected null draws"):
        create_scheme("samark", key=full, embedder=minilm, cells=8, null_stop=10)
    law = PivotLaw.of("avoid", None)
    with pytest.raises(ValueError, match="each text's span"):
        score_in_cells(
            null_cells(law, 2, 16, 4, 2, seed=1),
            NullCellDraws(law, 99, 16, 4, 2, 0),
            [_unit(np.ones((2, 16)))],
            kappa=30.0,
            use_tanh=True,
            statistic="scan",
            stop_after=5,
        )
    with pytest.raises(ValueError, match="null_stop"):
        create_scheme("samark", key=full, embedder=minilm, null_stop=0)


def test_sequential_p_values_stay_valid_on_projected_draws() -> None:
    """H0 on projected draws: 300 texts, a fresh ring of 3 keys each time, 4,095 draws
    (4 blocks), stopped at 5 exceedances; Holm's ring p-value is uniform or
    conservative."""
    rng = np.random.default_rng(8)
    dim, cells, rings = 32, 6, 300
    law = PivotLaw.of("avoid", rng.standard_normal((2, dim)))
    draws = ProjectedNullCells(law, 4_095, dim, cells, 2, seed=0)
    ps = []
    for i in range(rings):
        keys = null_cells(law, 3, dim, cells, 2, seed=9000 + i)
        emb = _text(rng, 4 if i % 2 else 9, dim)
        (s,) = score_in_cells(
            keys, draws, [emb], kappa=30.0, use_tanh=True, statistic="scan", stop_after=5
        )
        ps.append(min(1.0, 3 * min(s.p_values())))
    assert stats.kstest(ps, "uniform", alternative="greater").pvalue > 1e-3
    assert np.mean(np.array(ps) <= 0.05) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / rings)


def test_the_detect_command_takes_null_stop_and_refuses_it_for_other_schemes(tmp_path) -> None:
    from typer.testing import CliRunner

    from samark.cli import app

    runner = CliRunner()
    key = tmp_path / "k.key"
    assert runner.invoke(app, ["keygen", str(key), "--embedder", "all-minilm-l6-v2"]).exit_code == 0
    text = "The river rose overnight. Farmers moved their cattle. The mayor asked for calm."
    done = runner.invoke(app, ["detect", "--key", str(key), "--null-stop", "10", "--text", text])
    assert done.exit_code == 1, done.output  # grep's code: not watermarked
    assert "not watermarked" in done.output
    refused = runner.invoke(
        app,
        [
            "detect",
            "--key",
            str(key),
            "--scheme",
            "kgw",
            "--any-scheme",
            "--null-stop",
            "10",
            "--text",
            text,
        ],
    )
    assert refused.exit_code == 2 and "--null-stop" in refused.output
