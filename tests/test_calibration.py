"""False-positive rate on real human text, with the paper's embedder.

The p-value must hold on human text for every key, not only on average over keys. Validity
means P(p <= a) <= a: each of several fixed keys gets a binomial bound on its count of
p < 0.01 and a one-sided KS test against p-values stochastically *smaller* than uniform
(a key may be conservative on a domain: its p-values sit above uniform). Over keys, where
theory makes p exactly uniform, the pooled p-values get a two-sided KS test.
Human text: 200 CNN/DailyMail
articles (first 10 sentences; the news reference direction used sentences 11-25),
Wikipedia leads 0-4999 (the reference direction used leads from 5000 on), 200 chapters of
Jane Austen's novels (first 10 sentences; the fiction direction used sentences 11-25; from
a Debian package), and, as a domain that no reference direction saw, 300 sections of the
Debian Administrator's Handbook (first 10 sentences; technical prose; a Debian package).
"""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from samark.datasets import leading_sentences, load_dataset
from samark.embed import AVOIDED_DOMAINS, LEGACY_AVOIDED_DOMAINS
from samark.keys import WatermarkKey
from samark.keys.pivot_spaces import load_pivot_space
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.config import SAMarkDetection
from samark.schemes.samark.detector import SAMarkDetector

N_KEYS = 5


def _texts(name: str, limit: int, max_sentences: int) -> list[list[str]]:
    return leading_sentences((d.text for d in load_dataset(name)), limit=limit, stop=max_sentences)


# the corpora's stored embeddings (a checked cache: scripts/build_test_embeddings.py holds
# the corpus list, the file's writer and its one reader); embedding the corpora afresh takes
# about 11 CPU minutes
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from build_test_embeddings import CORPORA as CORPUS_SIZES  # noqa: E402
from build_test_embeddings import OUT as STORED  # noqa: E402
from build_test_embeddings import stored_embeddings  # noqa: E402


def _split(flat: np.ndarray, texts: list[list[str]]) -> list[np.ndarray]:
    bounds = np.cumsum([0, *map(len, texts)])
    return [flat[a:b] for a, b in itertools.pairwise(bounds)]


def _stored(mpnet, name: str, texts: list[list[str]]) -> np.ndarray | None:
    return stored_embeddings(mpnet.identity.fingerprint, name, texts)


@pytest.fixture(scope="module")
def human_embeddings(mpnet):
    corpora = dict(CORPUS_SIZES)
    if shutil.which("apt-get") is None:  # Debian's r-cran-janeaustenr, debian-handbook
        corpora = {k: v for k, v in corpora.items() if k in ("cnn_dailymail", "wikipedia_leads")}
    out = {}
    for name, n in corpora.items():
        texts = _texts(name, n, 10)
        flat = _stored(mpnet, name, texts)
        if flat is None:  # one batched call: the embedder sorts a batch by length
            flat = mpnet.encode([s for t in texts for s in t])
        out[name] = _split(flat, texts)
    return out


def test_stored_embeddings_are_the_embedders(mpnet) -> None:
    """The stored vectors are what the embedder gives today, for a sample of sentences
    of every corpus the file holds (float16: cosines within 1e-3)."""
    if not STORED.exists():
        pytest.skip("no stored embeddings (scripts/build_test_embeddings.py)")
    rng = np.random.default_rng(0)
    checked = 0
    for name, n in CORPUS_SIZES.items():
        if name in ("jane_austen", "debian_handbook") and shutil.which("apt-get") is None:
            continue
        texts = _texts(name, n, 10)
        stored = _stored(mpnet, name, texts)
        assert stored is not None, f"{name}: rebuild with scripts/build_test_embeddings.py"
        sentences = [s for t in texts for s in t]
        pick = rng.choice(len(sentences), 6, replace=False)
        fresh = mpnet.encode([sentences[i] for i in pick])
        assert np.all(np.sum(fresh * stored[pick], axis=1) > 1 - 1e-3), name
        checked += 1
    assert checked >= 2


# Keys avoid the news, encyclopedic and fiction domain means. Keys that avoided only the
# first two (every key before 2026-11-24, and the public keys of the committed runs) do not
# hold on Jane Austen: one of these five flags 13-15 of 200 chapters at p < 0.01 (7%, every
# statistic). A domain whose mean no avoided direction covers can bias a key
# (benchmarks/studies/unseen_domain.py, docs/statistics.md). Strict: the day such keys hold there
# too, this case must be turned back into a plain one.
LEGACY_ON_FICTION = pytest.mark.xfail(
    strict=True, reason="per-key FPR on a domain whose mean the keys do not avoid"
)
# The handbook is the domain that no avoided direction (and no pivot space) was fitted on.
# There, as on Austen before its direction shipped, a key can lean towards the domain's
# mean: with the scan (and, for keys in the pivot space, with z too) one of these five
# keys has p-values below uniform (one-sided KS p < 1e-4), its count of p < 0.01 still
# within the bound; with 30 keys, one in 30 exceeds the bound (docs/statistics.md).
UNSEEN_DOMAIN = pytest.mark.xfail(
    strict=True, reason="per-key p-values on a domain no avoided direction covers"
)
CORPORA = ["cnn_dailymail", "wikipedia_leads", "jane_austen", "debian_handbook"]


def _cases(
    statistics: list[str], unseen_fails: set[str], news_only: tuple[str, ...] = ()
) -> list[Any]:
    """(corpus, statistic) pairs; those of the handbook with a statistic in
    ``unseen_fails`` are strict expected failures. A statistic in ``news_only`` is checked on
    the news corpus alone: per-key leaning is a property of the corpus and the key's pivots,
    which every statistic shares, so one corpus shows that statistic's exactness and the
    others are crossed with the default statistics only (each case is 5 keys x 200-300
    texts, 10-15 s on the 2-core machine)."""
    return [
        pytest.param(c, s, marks=UNSEEN_DOMAIN)
        if c == "debian_handbook" and s in unseen_fails
        else (c, s)
        for c in CORPORA
        for s in statistics
        if s not in news_only or c == "cnn_dailymail"
    ]


def _corpus(human_embeddings, corpus: str) -> list[np.ndarray]:
    if corpus not in human_embeddings:
        pytest.skip(f"{corpus} comes from a Debian package")
    return human_embeddings[corpus]


def _keys(mpnet, domains: tuple[str, ...] | None = None):
    avoid = mpnet.reference_directions(domains)
    assert avoid is not None and avoid.shape == (len(domains or AVOIDED_DOMAINS), 768)
    return [
        WatermarkKey(bytes([i]) * 32, mpnet.identity, PivotDraw.avoiding(avoid))
        for i in range(N_KEYS)
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("corpus", "statistic"), _cases(["alignment", "z", "scan"], {"scan"}, news_only=("alignment",))
)
def test_fpr_holds_per_key(mpnet, human_embeddings, corpus: str, statistic: str) -> None:
    # with z, the same detections' sentence p-values are checked too (they do not depend
    # on the text's statistic): localisation on human text, per key
    embeddings = _corpus(human_embeddings, corpus)
    _check_per_key(_keys(mpnet), mpnet, embeddings, statistic, sentences=statistic == "z")


@pytest.mark.parametrize("statistic", ["z"])  # every statistic fails alike (above)
@LEGACY_ON_FICTION
def test_fpr_holds_per_key_on_fiction_for_keys_without_its_direction(
    mpnet, human_embeddings, statistic: str
) -> None:
    keys = _keys(mpnet, LEGACY_AVOIDED_DOMAINS)
    _check_per_key(keys, mpnet, _corpus(human_embeddings, "jane_austen"), statistic)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("corpus", "statistic"), _cases(["z", "scan"], {"z", "scan"}, news_only=("scan",))
)
def test_fpr_holds_per_key_in_a_pivot_space(
    mpnet, human_embeddings, corpus: str, statistic: str
) -> None:
    # Keys drawing their pivots in the shipped space (fitted on other text of news,
    # Wikipedia and Austen, where documents' means vary little): those three hold per key,
    # the handbook, unseen by the fit, does not.
    space = load_pivot_space("mpnet-quiet-128", fingerprint=mpnet.identity.fingerprint)
    keys = [
        WatermarkKey(bytes([i]) * 32, mpnet.identity, PivotDraw.in_space(space))
        for i in range(N_KEYS)
    ]
    _check_per_key(keys, mpnet, _corpus(human_embeddings, corpus), statistic)


def _check_per_key(
    keys: list[WatermarkKey],
    mpnet,
    embeddings: list[np.ndarray],
    statistic: str,
    *,
    sentences: bool = False,
) -> None:
    """Per key, the count of human texts at p < 0.01 within the one-sided 99.9% binomial
    bound and p-values not below uniform; pooled over keys, exact. With ``sentences``, the
    same per-key checks on one sentence p-value a text (a sentence gets p < 0.05 about 5%
    of the time; sentences of one text are correlated, so the bound counts texts)."""
    n = len(embeddings)
    bound = stats.binom.ppf(0.999, n, 0.01)  # one-sided 99.9% binomial bound on the count
    pooled = []
    rng = np.random.default_rng(0)
    for key in keys:
        det = SAMarkDetector(key, mpnet, SAMarkDetection(statistic=statistic))  # type: ignore[arg-type]
        detections = [det.score_embeddings(e) for e in embeddings]
        p = np.array([d.p_value for d in detections])
        assert np.sum(p < 0.01) <= bound, f"{key}: {np.sum(p < 0.01)} of {n} below 0.01"
        assert stats.kstest(p, "uniform", alternative="greater").pvalue > 1e-3
        pooled.extend(p)
        if sentences:
            one = np.array([rng.choice(d.sentence_p_values) for d in detections])
            assert np.sum(one < 0.05) <= stats.binom.ppf(0.999, n, 0.05), key
            assert stats.kstest(one, "uniform", alternative="greater").pvalue > 1e-3
    pooled_arr = np.array(pooled)
    assert stats.kstest(pooled_arr, "uniform").pvalue > 1e-3
    assert np.mean(pooled_arr < 0.01) <= 0.01 + 3 * np.sqrt(0.01 * 0.99 / pooled_arr.size)
    assert np.mean(pooled_arr < 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / pooled_arr.size)


def test_paper_z_is_not_calibrated(mpnet, human_embeddings) -> None:
    # Why the p-value exists: on human news the paper's z exceeds 2.33 far more than 1%.
    det = SAMarkDetector(_keys(mpnet)[0], mpnet)
    z = np.array([det.score_embeddings(e).z for e in human_embeddings["cnn_dailymail"]])
    assert np.mean(z > 2.33) > 0.2


@pytest.mark.slow
def test_ring_fpr_is_family_wise(mpnet, human_embeddings) -> None:
    """A ring of 8 keygen keys flags at most 1% of human texts at p < 0.01 (the max
    statistic over the ring, exact by exchangeability), where asking each key alone at
    0.01 flags several times more (about 1 - 0.99**8, 7.7%)."""
    from samark.detection.ring_detector import MAX_STATISTIC, RingDetector
    from samark.keys.keyring import RingEntry
    from samark.models import DEFAULT_GENERATOR
    from samark.schemes.base import SharedResources

    covered = [
        c for c in ("cnn_dailymail", "wikipedia_leads", "jane_austen") if c in human_embeddings
    ]
    embeddings = [e for c in covered for e in human_embeddings[c]]
    avoid = mpnet.reference_directions()
    keys = [
        WatermarkKey(bytes([100 + i]) * 32, mpnet.identity, PivotDraw.avoiding(avoid))
        for i in range(8)
    ]
    ring = RingDetector.from_keys(
        [(RingEntry(f"k{i}", k.key_id, "2026-01-01"), k) for i, k in enumerate(keys)],
        shared=SharedResources(DEFAULT_GENERATOR, mpnet),
        statistic="scan",
    )
    assert ring.method == MAX_STATISTIC
    results = [ring.score_embeddings(e) for e in embeddings]
    p = np.array([r.p_value for r in results])
    naive = np.array([min(r.key_p_values) for r in results])
    n = len(embeddings)
    assert np.sum(p < 0.01) <= stats.binom.ppf(0.999, n, 0.01), np.sum(p < 0.01)
    assert stats.kstest(p, "uniform", alternative="greater").pvalue > 1e-3
    assert np.sum(naive < 0.01) > 3 * max(1, np.sum(p < 0.01))
