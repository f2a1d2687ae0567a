"""Detection statistics against hand-computed values, and the exchangeability p-value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from samark.keys import null_pivots
from samark.statistics import (
    alignment,
    channel_responses,
    exchangeable_p_value,
    inferred_flags,
    mean_alignment,
    paper_z,
)


def test_paper_alg2_by_hand() -> None:
    # 3 sentences, 2 channels, pivots = axes of R^3
    emb = np.array([[0.6, -0.8, 0.0], [0.8, 0.0, 0.6], [0.0, -0.6, 0.8]])
    pivots = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    c = channel_responses(emb, pivots)
    np.testing.assert_allclose(c[0], [[0.6, -0.8], [0.8, 0.0], [0.0, -0.6]])
    assert inferred_flags(c).tolist() == [[1.0, -1.0]]
    a = alignment(c, kappa=2.0)[0]
    expected = np.tanh(2.0 * np.array([[0.6, 0.8], [0.8, 0.0], [0.0, 0.6]]))
    np.testing.assert_allclose(a, expected)
    flat = expected.ravel()
    z = flat.mean() * math.sqrt(6) / flat.std()
    assert paper_z(alignment(c, 2.0))[0] == pytest.approx(z)
    assert mean_alignment(alignment(c, 2.0))[0] == pytest.approx(flat.mean())
    np.testing.assert_allclose(
        alignment(c, 2.0, use_tanh=False)[0], [[0.6, 0.8], [0.8, 0.0], [0.0, 0.6]]
    )


def test_zero_spread_z_is_defined() -> None:
    same = np.full((1, 3, 2), 0.5)
    assert paper_z(same)[0] == math.inf
    assert paper_z(np.zeros((1, 3, 2)))[0] == 0.0


def test_ties_in_majority_vote_go_positive() -> None:
    c = np.array([[[0.1], [-0.1]]])
    assert inferred_flags(c).tolist() == [[1.0]]


def test_exchangeable_p_value_formula() -> None:
    null = np.array([0.1, 0.5, 0.5, 0.9])
    assert exchangeable_p_value(0.5, null) == pytest.approx(4 / 5)  # ties count against
    assert exchangeable_p_value(1.0, null) == pytest.approx(1 / 5)
    assert exchangeable_p_value(0.0, null) == pytest.approx(1.0)


@pytest.mark.parametrize("statistic", ["z", "alignment"])
def test_p_value_uniform_when_key_is_exchangeable(statistic: str) -> None:
    # Correlated "texts" (a shared topic direction) and a random key: p must be uniform.
    from samark.statistics import statistic_values

    rng = np.random.default_rng(0)
    dim, k = 32, 99
    nulls = null_pivots(k, dim, 2, seed=0)
    ps = []
    for i in range(400):
        topic = rng.standard_normal(dim)
        emb = topic + 0.7 * rng.standard_normal((6, dim))
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        key = null_pivots(1, dim, 2, seed=1000 + i)
        vals = statistic_values(
            alignment(channel_responses(emb, np.concatenate([key, nulls])), 30.0), statistic
        )  # type: ignore[arg-type]
        ps.append(exchangeable_p_value(vals[0], vals[1:]))
    assert stats.kstest(ps, "uniform").pvalue > 1e-3
    assert np.mean(np.array(ps) <= 0.05) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)
