"""SemStamp and k-SemStamp on the shared sentence loop, with the real generator and
embedder: the rejection sampler's guarantee, the exact p-value, and its false-positive
rate over keys."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from samark.errors import EmptyTextError
from samark.keys import WatermarkKey
from samark.schemes import create_scheme
from samark.schemes.semstamp import SemStamp, subset_sum_distribution

PROMPT = "The city council met on Monday to discuss the new budget for schools."


def test_subset_sum_distribution_matches_enumeration() -> None:
    weights = np.array([3, 0, 1, 2, 0, 4, 1, 0])
    for size in (1, 2, 3):
        sums = [sum(c) for c in itertools.combinations(weights, size)]
        want = np.bincount(sums, minlength=weights.sum() + 1) / math.comb(len(weights), size)
        assert np.allclose(subset_sum_distribution(weights, size), want)


@pytest.mark.parametrize(
    ("name", "params", "seed"),
    # k-semstamp's seed: 3 accepted no sentence after the first once punkt kept initials
    # together (its 300 fitting sentences split differently); 4-8 each accept 1-2
    [("semstamp", {}, 3), ("k-semstamp", {"clusters": 4, "fit_sentences": 300}, 4)],
)
@pytest.mark.slow
def test_every_accepted_sentence_lands_in_a_valid_region(
    name, params, seed, mpnet, mpnet_key
) -> None:
    scheme = create_scheme(
        name, key=mpnet_key, embedder=mpnet, max_trials=32, max_sentence_tokens=40, **params
    )
    assert isinstance(scheme, SemStamp)
    g = scheme.generate(PROMPT, max_new_sentences=3, seed=seed)  # two sentences to accept
    assert len(g.sentences) == 3 and g.tokens_sampled > g.output_tokens
    matched_after_first = sum(st["kind"] == "matched" for st in g.steps[1:])
    assert matched_after_first >= 1  # the check below is not vacuous
    d = scheme.detect(g.text)
    # by construction: a sentence accepted by the rejection sampler is in a region that
    # its predecessor's region makes valid, so the detector counts it
    assert d.unit == "sentence" and d.n_units == 2 and d.score >= matched_after_first
    assert 0 < d.p_value <= 1
    other = WatermarkKey(b"another-test-key-000000000000000", mpnet_key.embedder)
    assert create_scheme(name, key=other, embedder=mpnet, **params).detector_id() == (
        scheme.detector_id()
    )  # the same detector, another key: human negatives are shared per run key only
    with pytest.raises(EmptyTextError):
        scheme.detect("One sentence only.")


def test_semstamp_p_value_is_exact_over_keys(mpnet, mpnet_key, news_leads) -> None:
    """One key per human text: the share with p < 0.1 stays within the binomial bound.
    (The paper's z-test would not: a text whose sentences share one region is valid
    all-or-nothing, with probability gamma, not gamma**n.)"""
    from scipy.stats import binom

    from samark.segment import split_sentences

    texts, stored = news_leads
    texts = texts[:150]
    regions_of = {}
    p = []
    z_flags = 0
    with mpnet.remembering(stored):  # the rest embedded once, in one batched call
        mpnet.encode([s for t in texts for s in split_sentences(t)])
        for i, text in enumerate(texts):
            key = WatermarkKey(f"sem-key-{i:04d}".encode().ljust(32, b"0"), mpnet_key.embedder)
            scheme = create_scheme("semstamp", key=key, embedder=mpnet)
            d = scheme.detect(text)
            p.append(d.p_value)
            z_flags += d.z > 1.2816  # the paper's one-sided z at 10%
            regions_of[i] = d.n_units
    assert sum(x < 0.1 for x in p) <= binom.ppf(0.999, len(p), 0.1)
    assert sum(x < 0.1 for x in p) >= 1  # it does reject sometimes
    assert all(n == 5 for n in regions_of.values())
    assert z_flags >= sum(x < 0.1 for x in p)  # the z rule flags at least as often


@pytest.mark.slow
def test_pmark_halves_towards_the_key_bits_and_replays_them(mpnet, mpnet_key) -> None:
    """PMark online: each channel keeps the side of its median that the step's bit names,
    so a survivor agrees with every bit against its own pool; detection re-samples."""
    from samark.schemes.pmark import PMark

    # 8 candidates of at most 40 tokens (halved once per channel, a survivor is kept where a
    # side is empty): generation and the detector's re-sampling at half the budget and more
    scheme = create_scheme(
        "pmark", key=mpnet_key, embedder=mpnet, candidates=8, max_sentence_tokens=40
    )
    assert isinstance(scheme, PMark)
    assert np.array_equal(scheme.bits(3), scheme.bits(3))
    other = WatermarkKey(b"another-test-key-000000000000000", mpnet_key.embedder)
    assert not all(
        np.array_equal(scheme.bits(t), create_scheme("pmark", key=other, embedder=mpnet).bits(t))  # type: ignore[attr-defined]
        for t in range(4)
    )
    g = scheme.generate(PROMPT, max_new_sentences=3, seed=1)
    assert len(g.sentences) == 3 and all(st["survivors"] >= 1 for st in g.steps)
    pool = mpnet.encode(
        [f"Sentence number {i} is about {w}." for i, w in enumerate("abcdefghijklmnop")]
    )
    keep, _ = scheme.survivors(pool, 2)
    assert 1 <= len(keep) <= len(pool) // 2
    for i in keep:
        _, sides = scheme.survivors(pool, 2, pool[i])
        assert all(sides)
    d = scheme.detect(g.text)
    assert d.n_units == 2 and 0 < d.p_value <= 1 and d.details["tokens_resampled"] > 0
    with pytest.raises(EmptyTextError):
        scheme.detect("One sentence only.")
