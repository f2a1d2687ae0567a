"""Null cell draws in each text's span (issue 55): the same law as the d-dimensional draws
(two-sample KS over 10,000 draws of each), exact p-values on texts that depend on no key,
a text's p-value independent of the texts scored beside it, and keys that name their draws
(new keys "projected", keys written before "full", bit for bit)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from samark.errors import KeyFileError
from samark.keys import WatermarkKey
from samark.keys.pivots import PivotLaw
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.cell_pass import score_in_cells
from samark.schemes.samark.cells import cell_evidence, null_cells
from samark.schemes.samark.null_projection import (
    ProjectedNullCells,
    bartlett_wishart,
    span_coordinates,
)
from samark.schemes.samark.statistics import ring_max_p_value, statistic_values

KEYS = Path(__file__).parent / "data" / "keys"


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _text(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """A repetitive text: ``n`` unit sentences around one topic (pairwise cosine ~0.5)."""
    topic = _unit(rng.standard_normal(dim))
    return _unit(math.sqrt(0.5) * topic + math.sqrt(0.5) * _unit(rng.standard_normal((n, dim))))


def _laws(rng: np.random.Generator, dim: int) -> list[PivotLaw]:
    basis, _ = np.linalg.qr(rng.standard_normal((dim, 20)))  # a 20-d pivot space
    return [
        PivotLaw.of("avoid", None),
        PivotLaw.of("avoid", rng.standard_normal((3, dim))),
        PivotLaw.of("space", basis.T),
    ]


@pytest.mark.parametrize("law_index", [0, 1, 2])
def test_projected_draws_have_the_full_draws_law(law_index: int) -> None:
    """10,000 draws of each, one 768-d text of 7 sentences (one repeated): the signed
    cosines of two sentences, their sum and the z and scan statistics agree in law."""
    rng = np.random.default_rng(11)
    dim, cells, count = 768, 4, 10_000
    law = _laws(rng, dim)[law_index]
    text = _text(rng, 6, dim)
    text = np.vstack([text, text[2]])  # a repeated sentence: rank 6 of 7
    full = null_cells(law, count, dim, cells, 2, seed=5).signed(text.astype(np.float32))
    projected = np.concatenate(list(ProjectedNullCells(law, count, dim, cells, 2, 9).signed(text)))
    assert projected.shape == full.shape == (count, 7, 2)
    np.testing.assert_allclose(projected[:, 6], projected[:, 2])  # the repeated sentence
    features = {
        "cos[0,0]": lambda s: s[:, 0, 0],
        "cos[4,1]": lambda s: s[:, 4, 1],
        "sum": lambda s: s.sum(axis=(1, 2)),
        "z": lambda s: statistic_values(cell_evidence(s, 30.0), "z"),
        "scan": lambda s: statistic_values(cell_evidence(s, 30.0), "scan"),
    }
    for name, feature in features.items():
        p = stats.ks_2samp(feature(full), feature(projected)).pvalue
        assert p > 1e-3, f"{name}: KS p = {p:.2g}"


def test_projected_cells_share_pivots_as_the_full_draws_do() -> None:
    """Two sentences in one cell meet one pivot set: how often two near sentences share a
    cell and how their signed cosines co-vary agree with the full draws (low dimension,
    where a wrong chi-square tail or Wishart part would show)."""
    rng = np.random.default_rng(3)
    dim, cells, count = 12, 3, 20_000
    text = _text(rng, 3, dim)
    law = PivotLaw.of("avoid", rng.standard_normal((2, dim)))
    full = null_cells(law, count, dim, cells, 2, seed=1)
    projected = np.concatenate(list(ProjectedNullCells(law, count, dim, cells, 2, 4).signed(text)))
    full_cells = full.cell_of(text.astype(np.float32))
    assert 0 < np.mean(full_cells[:, 0] == full_cells[:, 1]) < 1
    signed = full.signed(text.astype(np.float32))
    for i, j in ((0, 1), (1, 2)):
        x = np.corrcoef(signed[:, i, 0], signed[:, j, 0])[0, 1]
        y = np.corrcoef(projected[:, i, 0], projected[:, j, 0])[0, 1]
        assert abs(x - y) < 0.04, (i, j, x, y)
    for k in range(2):
        assert stats.ks_2samp(signed[:, 0, k], projected[:, 0, k]).pvalue > 1e-3


def test_bartlett_wishart_has_the_wishart_mean_and_spread() -> None:
    rng = np.random.default_rng(0)
    for df in (1, 5, 700):
        w = bartlett_wishart(rng, df, 2, (20_000,))
        np.testing.assert_allclose(w.mean(axis=0), df * np.eye(2), atol=0.06 * df + 0.05)
        # Var(W_11) = 2 df, Var(W_12) = df
        assert w[:, 0, 0].var() == pytest.approx(2 * df, rel=0.08)
        assert w[:, 0, 1].var() == pytest.approx(df, rel=0.08)


def test_span_coordinates_keep_every_inner_product() -> None:
    rng = np.random.default_rng(2)
    e = _text(rng, 5, 40)
    e = np.vstack([e, e[1]])
    coords = span_coordinates(e)
    assert coords.shape == (6, 5)
    np.testing.assert_allclose(coords @ coords.T, e @ e.T, atol=1e-12)


def test_a_texts_draws_do_not_depend_on_its_neighbours() -> None:
    """Each text draws in its own span from the same seeded stream: its null statistics
    are the same alone as in a batch, and deterministic."""
    rng = np.random.default_rng(5)
    dim = 48
    law = PivotLaw.of("avoid", None)
    keys = null_cells(law, 2, dim, 8, 2, seed=70)
    draws = ProjectedNullCells(law, 2_500, dim, 8, 2, seed=0)
    texts = [_text(rng, n, dim) for n in (3, 7, 1)]
    together = score_in_cells(keys, draws, texts, kappa=30.0, use_tanh=True, statistic="scan")
    for text, batch in zip(texts, together, strict=True):
        (alone,) = score_in_cells(keys, draws, [text], kappa=30.0, use_tanh=True, statistic="scan")
        np.testing.assert_array_equal(alone.null, batch.null)
        assert alone.p_values() == batch.p_values()
        np.testing.assert_array_equal(alone.exceed, batch.exceed)


def test_ring_p_values_on_projected_draws_are_exact() -> None:
    """H0: repetitive texts that depend on no key, a fresh ring of 3 keys (drawn from the
    keys' law, full d-dimensional cells) each time, against 99 projected null draws: the
    ring's max-statistic p-value is uniform or conservative."""
    rng = np.random.default_rng(8)
    dim, cells, rings = 32, 6, 300
    law = PivotLaw.of("avoid", rng.standard_normal((2, dim)))
    draws = ProjectedNullCells(law, 99, dim, cells, 2, seed=0)
    ps = []
    for i in range(rings):
        keys = null_cells(law, 3, dim, cells, 2, seed=9000 + i)
        emb = _text(rng, 4 if i % 2 else 9, dim)  # fewer sentences than cells, and more
        (scores,) = score_in_cells(keys, draws, [emb], kappa=30.0, use_tanh=True, statistic="scan")
        ps.append(ring_max_p_value(scores.values, scores.null))
    assert stats.kstest(ps, "uniform", alternative="greater").pvalue > 1e-3
    assert np.mean(np.array(ps) <= 0.05) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / rings)


# -- keys name their draws --------------------------------------------------------------------
def test_a_new_key_with_cells_is_projected_and_round_trips(tmp_path: Path, minilm) -> None:
    from samark.embed import new_key

    key = new_key(minilm)
    assert key.samark.cells > 0 and key.samark.null_draws == "projected"
    path = key.save(tmp_path / "new.key")
    record = json.loads(path.read_text())
    assert record["version"] == 4 and record["null_draws"] == "projected"
    assert WatermarkKey.load(path).samark.null_draws == "projected"
    static = new_key(minilm, cells=0)  # static pivots have no cell draws: written as before
    assert static.samark.null_draws == "full"
    assert json.loads(static.save(tmp_path / "static.key").read_text())["version"] == 1
    assert new_key(minilm, null_draws="full").samark.null_draws == "full"


def test_keys_written_before_keep_the_full_draws_bit_for_bit(tmp_path: Path) -> None:
    """The committed 16-cell key (version 3) loads as "full" and is written back as it was."""
    key = WatermarkKey.load(KEYS / "cells.key")
    assert key.samark.null_draws == "full"
    again = key.save(tmp_path / "again.key")
    assert json.loads(again.read_text()) == json.loads((KEYS / "cells.key").read_text())


def test_a_damaged_version_4_key_is_refused(tmp_path: Path) -> None:
    """Null draws and a scheme are version 4's; an older version naming them, or draws no
    samark knows, is a damaged file."""
    record = json.loads((KEYS / "cells.key").read_text())
    path = tmp_path / "damaged.key"
    for damaged in ({**record, "null_draws": "projected"}, {**record, "scheme": "kgw"}):
        path.write_text(json.dumps(damaged))
        with pytest.raises(KeyFileError, match="names no scheme or null draws"):
            WatermarkKey.load(path)
    path.write_text(json.dumps({**record, "version": 4, "null_draws": "sideways"}))
    with pytest.raises(KeyFileError, match="damaged"):
        WatermarkKey.load(path)
    path.write_text(json.dumps({**record, "version": 4}))  # version 4 with cells, full draws
    assert WatermarkKey.load(path).samark.null_draws == "full"
    with pytest.raises(ValueError, match="keyed cells"):
        PivotDraw.avoiding(None, 0, "projected")


def test_the_detector_follows_the_key_and_a_config_may_override(minilm) -> None:
    from samark.schemes import create_scheme

    key = WatermarkKey(bytes([7]) * 32, minilm.identity, PivotDraw.avoiding(None, 8, "projected"))
    scheme = create_scheme(key=key, embedder=minilm)  # the scheme a key with cells is for
    assert scheme.name == "samark-layered"
    assert scheme.detector.null_draws == "projected"  # type: ignore[attr-defined]
    full = create_scheme("samark-layered", key=key, embedder=minilm, null_draws="full")
    assert full.detector.null_draws == "full"  # type: ignore[attr-defined]
    text = "The river rose overnight. Farmers moved their cattle. The mayor asked for calm."
    a, b = scheme.detect(text), full.detect(text)
    assert 0 < a.p_value <= 1 and 0 < b.p_value <= 1
    assert a.details["p_semantic"] != b.details["p_semantic"]  # other draws, other p
