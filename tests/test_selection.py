"""Each filter, score term and the softmax pick, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from samark.schemes.samark.selection import (
    MATCHED,
    UNFILTERED,
    UNMATCHED,
    SelectionRule,
    channel_match,
    ngram_overlap,
    pool_reference,
    select,
    semantic_similarity,
    softmax_pick,
    vocabulary_novelty,
    watermark_score,
)
from samark.text import ngrams, words


def test_ngram_overlap_by_hand() -> None:
    context = set(ngrams(words("the cat sat on the mat today"), 2))
    # candidate bigrams: {the cat, cat sat, sat quietly} -> 2 of 3 in the context
    assert ngram_overlap("The cat sat quietly.", context, 2) == pytest.approx(2 / 3)
    assert ngram_overlap("Dogs bark.", context, 4) == 0.0  # fewer than n words: no n-gram
    # repeated n-grams count once: {a a} -> in context
    assert ngram_overlap("a a a", {("a", "a")}, 2) == 1.0


def test_semantic_similarity_by_hand() -> None:
    cands = np.array([[1.0, 0.0], [0.6, 0.8]])
    hist = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(semantic_similarity(cands, hist), [1.0, 0.8])
    np.testing.assert_allclose(semantic_similarity(cands, np.zeros((0, 2))), [0.0, 0.0])


def test_vocabulary_novelty_by_hand() -> None:
    assert vocabulary_novelty("The red fox, the fox!", {"the", "dog"}) == pytest.approx(2 / 3)
    assert vocabulary_novelty("...", {"the"}) == 0.0


def test_channel_match_and_watermark_score_by_hand() -> None:
    cos = np.array([[0.05, -0.10], [0.05, 0.10], [-0.2, -0.01]])
    flags = np.array([1.0, -1.0])
    assert channel_match(cos, flags).tolist() == [True, False, False]
    expected0 = math.tanh(30 * 0.05) + math.tanh(30 * 0.10)
    s = watermark_score(cos, flags, 30.0, use_tanh=True)
    assert s[0] == pytest.approx(expected0)
    assert s[2] == pytest.approx(math.tanh(-6.0) + math.tanh(0.3))
    raw = watermark_score(cos, flags, 30.0, use_tanh=False)
    np.testing.assert_allclose(raw, [0.15, -0.05, -0.19])


def test_watermark_score_measures_margins_from_a_reference() -> None:
    cos = np.array([[0.05, -0.10], [0.01, -0.02], [0.03, 0.0]])
    flags = np.array([1.0, -1.0])
    ref = pool_reference(cos, flags)  # mean flag-signed cosine per channel
    np.testing.assert_allclose(ref, [0.03, 0.04])
    s = watermark_score(cos, flags, 30.0, use_tanh=True, reference=ref)
    assert s[0] == pytest.approx(math.tanh(30 * 0.02) + math.tanh(30 * 0.06))
    assert s[1] == pytest.approx(math.tanh(30 * -0.02) + math.tanh(30 * -0.02))
    raw = watermark_score(cos, flags, 30.0, use_tanh=False, reference=ref)
    np.testing.assert_allclose(raw, [0.08, -0.04, -0.04], atol=1e-12)


def test_pool_margin_prefers_larger_margins_once_the_pool_is_on_the_flag_side() -> None:
    # a pool that a text's topic has carried to the flag side (+0.06 on both channels, one
    # unmatched outlier): the paper's terms saturate for both matched candidates and the
    # pick is about even; measured from the pool mean, the larger margin wins
    def emb(a: float, b: float) -> list[float]:
        return [a, b, math.sqrt(1 - a * a - b * b)]

    cands = ["aa bb", "cc dd", "ee ff", "gg hh"]
    embs = [emb(0.07, 0.07), emb(0.15, 0.15), emb(0.06, 0.06), emb(-0.04, -0.04)]
    pivots = np.eye(3)[:2]
    rng_picks = {}
    for reference in ("zero", "pool"):
        picks = [
            _select(
                cands,
                embs,
                pivots=pivots,
                margin_reference=reference,
                lambda_div=0.0,
                lambda_nov=0.0,
                rng=np.random.default_rng(i),
            ).index
            for i in range(400)
        ]
        rng_picks[reference] = picks.count(1) / 400
    # zero: S = 2 tanh(30 x): 1.940 (0.07), 1.9995 (0.15), 1.895 (0.06) -> P(pick 1) ~ 0.52
    assert 0.4 < rng_picks["zero"] < 0.65
    # pool (mean 0.06): 2 tanh(0.3) = 0.58, 2 tanh(2.7) = 1.98, 0 -> P(pick 1) ~ 1 - 1e-6
    assert rng_picks["pool"] > 0.99


def test_softmax_pick_probabilities_and_frequencies() -> None:
    scores = np.array([1.0, 1.5, 0.2])
    _, q = softmax_pick(scores, 2.0, np.random.default_rng(0))
    e = np.exp(2.0 * scores)
    np.testing.assert_allclose(q, e / e.sum())
    rng = np.random.default_rng(1)
    counts = np.bincount([softmax_pick(scores, 2.0, rng)[0] for _ in range(6000)], minlength=3)
    assert stats.chisquare(counts, 6000 * q).pvalue > 1e-3
    # large epsilon -> argmax
    assert softmax_pick(scores, 1e4, rng)[0] == 1


def _setup():
    # 2-d toy embedding space with pivots on the axes
    pivots = np.eye(2)
    flags = np.array([1.0, 1.0])
    return pivots, flags


def _select(cands, embs, history=None, context="", pivots=None, **kw):
    default_pivots, flags = _setup()
    pivots = default_pivots if pivots is None else pivots
    history = np.zeros((0, pivots.shape[1])) if history is None else history
    params = dict(
        kappa=30.0,
        epsilon=10.0,
        lambda_div=0.35,
        lambda_nov=0.2,
        theta_sem=0.8,
        theta_ngram=0.4,
        ngram_n=2,
        rng=np.random.default_rng(0),
    )
    params.update(kw)
    rng = params.pop("rng")
    return select(
        cands,
        np.asarray(embs, float),
        pivots,
        flags,
        set(ngrams(words(context), 2)),
        set(words(context)),
        history,
        SelectionRule(**params),
        rng=rng,
    )


def test_select_keeps_only_matches_that_pass_filters() -> None:
    s = 1 / math.sqrt(2)
    cands = ["alpha beta gamma", "delta epsilon", "zeta eta", "the cat sat"]
    embs = [[s, s], [-s, s], [0.6, 0.8], [0.8, 0.6]]
    # candidate 3 repeats the context's bigrams; candidate 2 is a near-copy of history
    choice = _select(cands, embs, history=np.array([[0.0, 1.0]]), context="the cat sat")
    assert choice.kind == MATCHED and choice.index == 0
    assert (choice.n_candidates, choice.n_ngram_pass, choice.n_semantic_pass, choice.n_matched) == (
        4,
        3,
        2,
        1,
    )
    # score of the pick = S_wm + 0.35 * D + 0.2 * N, by hand
    d = 1 - s  # cosine to the history sentence (0, 1)
    assert choice.score == pytest.approx(2 * math.tanh(30 * s) + 0.35 * d + 0.2 * 1.0)


def test_select_fallback_unmatched_then_unfiltered() -> None:
    cands = ["one two", "three four"]
    embs = [[-0.6, 0.8], [0.8, -0.6]]  # no candidate in the (+,+) quadrant
    choice = _select(cands, embs)
    assert choice.kind == UNMATCHED and choice.n_matched == 0
    # both have S_wm = tanh(18) + tanh(-24): the novelty/diversity tie -> first max
    assert choice.index == 0
    # now every candidate fails the n-gram filter
    choice = _select(cands, embs, context="one two three four")
    assert choice.kind == UNFILTERED and choice.n_ngram_pass == 0


def test_filters_can_be_switched_off() -> None:
    cands = ["the cat sat"]
    embs = [[0.6, 0.8]]
    assert _select(cands, embs, context="the cat sat").kind == UNFILTERED
    assert _select(cands, embs, context="the cat sat", ngram_filter=False).kind == MATCHED
    hist = np.array([[0.6, 0.8]])
    assert _select(cands, embs, history=hist).kind == UNFILTERED
    assert _select(cands, embs, history=hist, semantic_filter=False).kind == MATCHED


def test_select_softmax_prefers_higher_scores() -> None:
    cands = ["aa bb", "cc dd"]
    embs = [[0.99, 0.141], [0.05, 0.9987]]  # both matched; the first saturates both channels
    picks = [_select(cands, embs, rng=np.random.default_rng(i)).index for i in range(300)]
    s0 = math.tanh(30 * 0.99) + math.tanh(30 * 0.141)
    s1 = math.tanh(30 * 0.05) + math.tanh(30 * 0.9987)
    p0 = 1 / (1 + math.exp(10 * (s1 - s0)))
    assert abs(picks.count(0) / 300 - p0) < 0.1


def test_select_needs_candidates() -> None:
    with pytest.raises(ValueError):
        _select([], np.zeros((0, 2)))


def test_saturated_matches_by_hand() -> None:
    import numpy as np

    from samark.schemes.samark.selection import saturated_matches

    flags = np.array([1.0, -1.0])
    cos = np.array([[0.05, -0.05], [0.05, -0.001], [0.02, -0.02]])
    matched = np.array([True, True, False])
    # tanh(30 * 0.05) = 0.905, tanh(30 * 0.001) = 0.03, row 2 is not a match
    assert saturated_matches(cos, flags, 30.0, 0.9, matched).tolist() == [True, False, False]
    assert saturated_matches(cos, flags, 30.0, 0.0, matched).tolist() == [True, True, False]
