"""Detection statistics against hand-computed values, and the exchangeability p-value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from samark.keys.pivots import null_pivots
from samark.schemes.samark.statistics import (
    alignment,
    channel_responses,
    exchangeable_p_value,
    inferred_flags,
    mean_alignment,
    paper_z,
    scan,
    scan_subset,
    sentence_p_values,
    statistic_values,
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


def test_scan_by_hand() -> None:
    # 4 sentences, 1 channel: sentence scores 0.9, -0.5, 0.8, 0.1 (already flag-signed)
    ev = np.array([[[0.9], [-0.5], [0.8], [0.1]]])
    # top-k sums / sqrt(k): 0.9, 1.7/sqrt2, 1.8/sqrt3, 1.3/2; k >= ceil(0.25 * 4) = 1
    assert scan(ev)[0] == pytest.approx(1.7 / math.sqrt(2))
    assert scan_subset(ev).tolist() == [True, False, True, False]
    # with k >= 3 the search may not stop at the best pair
    assert scan(ev, min_share=0.75)[0] == pytest.approx(1.8 / math.sqrt(3))
    assert scan_subset(ev, min_share=0.75).tolist() == [True, False, True, True]
    # every sentence marked alike: the scan keeps them all and equals sum / sqrt(n)
    flat = np.full((1, 6, 2), 0.5)
    assert scan(flat)[0] == pytest.approx(6 * 0.5 / math.sqrt(6))
    assert scan_subset(flat).all()


def test_sentence_p_values_formula() -> None:
    # row 0 = the key; sentence 0 beats every null, sentence 1 none, sentence 2 ties one
    ev = np.zeros((5, 3, 1))
    ev[0, :, 0] = [0.9, -0.9, 0.2]
    ev[1:, 0, 0] = 0.1
    ev[1:, 1, 0] = 0.0
    ev[1:, 2, 0] = [0.2, 0.1, 0.0, -0.1]
    np.testing.assert_allclose(sentence_p_values(ev), [1 / 5, 1.0, 2 / 5])


def _topic_text(rng: np.random.Generator, sentences: int, dim: int, spread: float) -> np.ndarray:
    """Unit "sentence embeddings" that share a random topic direction (so they are
    correlated, as a real text's sentences are), shape (sentences, dim)."""
    topic = rng.standard_normal(dim)
    emb = topic + spread * rng.standard_normal((sentences, dim))
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)


def _evidence(emb: np.ndarray, key: np.ndarray, nulls: np.ndarray) -> np.ndarray:
    """tanh evidence under the key's pivot set (row 0) and the null sets, kappa = 30."""
    return alignment(channel_responses(emb, np.concatenate([key, nulls])), 30.0)


@pytest.mark.parametrize("statistic", ["z", "alignment", "scan"])
def test_p_value_uniform_when_key_is_exchangeable(statistic: str) -> None:
    # Correlated "texts" (a shared topic direction) and a random key: p must be uniform.
    rng = np.random.default_rng(0)
    dim, k = 32, 99
    nulls = null_pivots(k, dim, 2, seed=0)
    ps = []
    for i in range(400):
        emb = _topic_text(rng, 6, dim, 0.7)
        key = null_pivots(1, dim, 2, seed=1000 + i)
        vals = statistic_values(_evidence(emb, key, nulls), statistic)  # type: ignore[arg-type]
        ps.append(exchangeable_p_value(vals[0], vals[1:]))
    assert stats.kstest(ps, "uniform").pvalue > 1e-3
    assert np.mean(np.array(ps) <= 0.05) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)


def test_sentence_p_values_uniform_when_key_is_exchangeable() -> None:
    # Every sentence's p-value is exact for a text that does not depend on the key, even
    # though the sentences share a topic (and so are not independent of each other).
    rng = np.random.default_rng(1)
    dim, k = 32, 99
    nulls = null_pivots(k, dim, 2, seed=0)
    ps = []
    for i in range(300):
        emb = _topic_text(rng, 5, dim, 0.7)
        key = null_pivots(1, dim, 2, seed=5000 + i)
        ev = _evidence(emb, key, nulls)
        ps.append(sentence_p_values(ev)[rng.integers(5)])  # one sentence per text
    assert stats.kstest(ps, "uniform").pvalue > 1e-3


def test_localisation_and_scan_find_the_marked_half() -> None:
    # Half of a text's sentences pushed towards the key's flag sides (a mixed text): their
    # p-values are small, the human half's are not, and the scan beats the mean on it.
    rng = np.random.default_rng(2)
    dim, k = 64, 199
    nulls = null_pivots(k, dim, 2, seed=0)
    hits = misses = false = 0
    scan_better = scan_worse = 0
    for i in range(40):
        key = null_pivots(1, dim, 2, seed=9000 + i)
        flags = rng.choice([-1.0, 1.0], size=2)
        emb = _topic_text(rng, 12, dim, 0.8)
        marked = np.arange(12) % 2 == 0
        emb[marked] += 0.3 * (flags @ key[0])
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        ev = _evidence(emb, key, nulls)
        p = sentence_p_values(ev)
        hits += int(np.sum(p[marked] < 0.05))
        misses += int(np.sum(p[marked] >= 0.05))
        false += int(np.sum(p[~marked] < 0.05))
        s, a = statistic_values(ev, "scan"), statistic_values(ev, "alignment")
        p_scan, p_mean = exchangeable_p_value(s[0], s[1:]), exchangeable_p_value(a[0], a[1:])
        scan_better += p_scan < p_mean
        scan_worse += p_scan > p_mean
    assert hits > 3 * misses  # recall above 75%
    assert false <= 0.05 * 240 + 3 * math.sqrt(0.05 * 0.95 * 240)  # human half: p valid
    assert scan_better > 3 * scan_worse
