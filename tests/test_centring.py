"""Topic centring (samark.schemes.samark.topic_centring): what it subtracts, that the
p-value stays exact with it, and that the detector and the ring pass apply it alike."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from samark.datasets import leading_sentences, load_dataset
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.config import SAMarkDetection
from samark.schemes.samark.detector import RingPass, SAMarkDetector
from samark.schemes.samark.topic_centring import NeighbourCentring

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from build_test_embeddings import stored_embeddings


def test_it_subtracts_the_mean_of_the_k_nearest_reference_texts() -> None:
    rng = np.random.default_rng(0)
    means = rng.normal(size=(50, 8))
    centring = NeighbourCentring("t", means, k=3)
    text = means[7] + 0.01 * rng.normal(size=(4, 8))  # a text next to reference text 7
    sims = (means / np.linalg.norm(means, axis=1, keepdims=True)) @ (
        text.mean(0) / np.linalg.norm(text.mean(0))
    )
    nearest = np.argsort(-sims)[:3]
    assert 7 in nearest
    np.testing.assert_allclose(centring(text), text - means[nearest].mean(0))
    # the text is centred, its within-text spread untouched
    np.testing.assert_allclose(np.diff(centring(text), axis=0), np.diff(text, axis=0))


def test_bad_references_are_refused() -> None:
    with pytest.raises(ValueError, match="k must be"):
        NeighbourCentring("t", np.ones((3, 4)), k=4)
    with pytest.raises(ValueError, match="texts, dim"):
        NeighbourCentring("t", np.ones(4))
    with pytest.raises(ValueError, match="expected"):
        NeighbourCentring("t", np.ones((3, 4)), k=1)(np.ones((2, 5)))


def test_the_hash_pins_the_reference_and_k() -> None:
    means = np.arange(12.0).reshape(3, 4)
    a = NeighbourCentring("t", means, k=2)
    assert a.sha256 == NeighbourCentring("other name", means.copy(), k=2).sha256
    assert a.sha256 != NeighbourCentring("t", means, k=1).sha256
    assert a.sha256 != NeighbourCentring("t", means + 1e-9, k=2).sha256


@pytest.fixture(scope="module")
def news_and_wiki(mpnet):
    out = {}
    for name, n in (("cnn_dailymail", 200), ("wikipedia_leads", 300)):
        texts = leading_sentences((d.text for d in load_dataset(name)), limit=n, stop=10)
        flat = stored_embeddings(mpnet.identity.fingerprint, name, texts)
        if flat is None:
            flat = mpnet.encode([s for t in texts for s in t])
        bounds = np.cumsum([0, *map(len, texts)])
        out[name] = [flat[bounds[i] : bounds[i + 1]] for i in range(len(texts))]
    return out


@pytest.mark.slow
def test_the_p_value_stays_exact_over_keys_with_centring(mpnet, news_and_wiki) -> None:
    # News scored with a reference of encyclopedic text: uniform over keys, as without
    reference = np.array([e.mean(0) for e in news_and_wiki["wikipedia_leads"]])
    centring = NeighbourCentring("wiki", reference, k=16)
    avoid = mpnet.reference_directions()
    p = []
    for i in range(10):
        key = WatermarkKey(bytes([100 + i]) * 32, mpnet.identity, PivotDraw.avoiding(avoid))
        det = SAMarkDetector(key, mpnet, SAMarkDetection(statistic="scan"), centring=centring)
        p += [det.score_embeddings(e).p_value for e in news_and_wiki["cnn_dailymail"]]
    pooled = np.array(p)
    assert stats.kstest(pooled, "uniform").pvalue > 1e-3
    assert np.mean(pooled < 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / pooled.size)


def test_a_shift_along_the_key_survives_centring(mpnet, news_and_wiki) -> None:
    # A mark is a text-level shift along the key's flag corner; the neighbours never saw
    # the key, so centring leaves the shift and removes the reference's shared part.
    reference = np.array([e.mean(0) for e in news_and_wiki["wikipedia_leads"]])
    centring = NeighbourCentring("wiki", reference, k=16)
    key = WatermarkKey(b"c" * 32, mpnet.identity, PivotDraw.avoiding(mpnet.reference_directions()))
    pivots = key.samark.pivots(mpnet.dim, 2)
    det = SAMarkDetector(key, mpnet, SAMarkDetection(statistic="scan"), centring=centring)
    plain = SAMarkDetector(key, mpnet, SAMarkDetection(statistic="scan"))
    marked = [e + 0.07 * (pivots[0] - pivots[1]) for e in news_and_wiki["cnn_dailymail"][:40]]
    with_centring = np.array([det.score_embeddings(e).p_value for e in marked])
    without = np.array([plain.score_embeddings(e).p_value for e in marked])
    assert np.mean(with_centring < 0.01) >= 0.85
    assert np.mean(without < 0.01) >= 0.85


def test_the_ring_pass_centres_as_each_detector_does(mpnet, news_and_wiki) -> None:
    reference = np.array([e.mean(0) for e in news_and_wiki["wikipedia_leads"]])
    centring = NeighbourCentring("wiki", reference, k=16)
    keys = [WatermarkKey(bytes([i]) * 32, mpnet.identity) for i in (1, 2, 3)]
    dets = [
        SAMarkDetector(k, mpnet, SAMarkDetection(statistic="scan"), centring=centring) for k in keys
    ]
    other = SAMarkDetector(keys[0], mpnet, SAMarkDetection(statistic="scan"))
    assert not dets[0].same_null(other)  # a ring never mixes centred and raw keys
    for e in news_and_wiki["cnn_dailymail"][:5]:
        ring = RingPass(dets, e)
        assert ring.p_values() == pytest.approx([d.score_embeddings(e).p_value for d in dets])
