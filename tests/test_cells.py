"""Keyed semantic cells (samark.schemes.samark.cells): geometry by hand, exact p-values over
keys, the power they add on repetitive text, and generation that detection agrees with."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from samark.keys.pivots import PivotLaw
from samark.schemes.samark.cells import cell_evidence, null_cells, text_signs
from samark.schemes.samark.config import SAMarkConfig
from samark.schemes.samark.statistics import (
    alignment,
    channel_responses,
    exchangeable_p_value,
    statistic_values,
)

LAW = PivotLaw.of("avoid", None)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _topic_text(rng: np.random.Generator, n: int, dim: int, share: float) -> np.ndarray:
    """``n`` unit sentences sharing one topic direction (pairwise cosine about ``share``)."""
    topic = _unit(rng.standard_normal(dim))
    own = _unit(rng.standard_normal((n, dim)))
    return _unit(math.sqrt(share) * topic + math.sqrt(1 - share) * own)


def test_signed_cosines_by_hand() -> None:
    rng = np.random.default_rng(0)
    frames = null_cells(LAW, 3, 16, 4, 2, seed=5)
    emb = _unit(rng.standard_normal((7, 16)))
    signed = frames.signed(emb)
    assert signed.shape == (3, 7, 2)
    for k in range(3):
        for i in range(7):
            m = int(np.argmax(frames.anchors[k] @ emb[i]))
            expected = (frames.pivots[k, m] @ emb[i]) * frames.flags[k, m]
            np.testing.assert_allclose(signed[k, i], expected, atol=1e-5)
    # each cell's pivots are orthonormal, and the law's draws differ from cell to cell
    gram = np.einsum("kmcd,kmed->kmce", frames.pivots, frames.pivots)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(2), gram.shape), atol=1e-5)
    assert not np.allclose(frames.pivots[0, 0], frames.pivots[0, 1])


def test_text_sign_is_the_majority_over_sentences_and_channels() -> None:
    signed = np.array([[[0.2, -0.1], [0.1, -0.1]], [[-0.3, 0.1], [0.0, 0.0]]])
    assert text_signs(signed).tolist() == [1.0, -1.0]
    ev = cell_evidence(signed, 30.0)
    np.testing.assert_allclose(ev[1], np.tanh(30.0 * -signed[1]))


@pytest.mark.parametrize("statistic", ["scan", "z"])
def test_p_value_uniform_over_keys(statistic: str) -> None:
    # Repetitive "texts" (pairwise cosine 0.7) that do not depend on the key: p is uniform.
    rng = np.random.default_rng(1)
    dim, cells = 24, 6
    nulls = null_cells(LAW, 99, dim, cells, 2, seed=0)
    ps = []
    for i in range(300):
        emb = _topic_text(rng, 6, dim, 0.7)
        key = null_cells(LAW, 1, dim, cells, 2, seed=1000 + i)
        signed = np.concatenate([key.signed(emb), nulls.signed(emb)])
        values = statistic_values(cell_evidence(signed, 30.0), statistic)  # type: ignore[arg-type]
        ps.append(exchangeable_p_value(float(values[0]), values[1:]))
    assert stats.kstest(ps, "uniform").pvalue > 1e-3
    assert np.mean(np.array(ps) <= 0.05) < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)


def test_cells_count_repetitive_sentences_where_static_pivots_cannot() -> None:
    # Selection as Alg. 1 makes it: six steps, each picking among 32 candidates that share
    # the text's topic (pairwise cosine 0.5) the one whose weakest flag-signed channel is
    # largest. With static pivots every candidate of a step leans as the topic does and the
    # text's mark is one shared offset; with cells the candidates meet different pivots, the
    # pick's margin is larger and the sentences' null projections are independent.
    rng = np.random.default_rng(2)
    dim, n, pool, share = 768, 6, 32, 0.5
    static_nulls = null_cells(LAW, 199, dim, 1, 2, seed=0)
    cell_nulls = null_cells(LAW, 199, dim, 16, 2, seed=0)
    hits = {"static": 0, "cells": 0}
    for i in range(60):
        topic = _unit(rng.standard_normal(dim))
        pools = [
            _unit(
                math.sqrt(share) * topic
                + math.sqrt(1 - share) * _unit(rng.standard_normal((pool, dim)))
            )
            for _ in range(n)
        ]
        for name, nulls in (("static", static_nulls), ("cells", cell_nulls)):
            key = null_cells(LAW, 1, dim, nulls.cells, 2, seed=10_000 + i)
            sign = rng.choice([-1.0, 1.0])
            text = np.stack([p[np.argmax((sign * key.signed(p)[0]).min(axis=1))] for p in pools])
            signed = np.concatenate([key.signed(text), nulls.signed(text)])
            values = statistic_values(cell_evidence(signed, 30.0), "scan")
            hits[name] += exchangeable_p_value(float(values[0]), values[1:]) <= 0.01
    assert hits["cells"] >= 45, hits
    assert hits["cells"] >= hits["static"] + 20, hits


def test_one_cell_is_static_pivots() -> None:
    # M = 1 is SAMark's static pivot set with its flag pattern: the same evidence as the
    # static detector's when the text's flags are the key's.
    rng = np.random.default_rng(3)
    frames = null_cells(LAW, 1, 16, 1, 2, seed=9)
    emb = _unit(rng.standard_normal((5, 16)))
    static = alignment(channel_responses(emb, frames.pivots[0, 0]), 30.0)[0]
    own = cell_evidence(frames.signed(emb), 30.0)[0]
    np.testing.assert_allclose(np.abs(own), np.abs(static), atol=1e-5)


def test_cell_margin_by_hand_and_the_cell_aware_pick_prefers_a_deep_sentence() -> None:
    from scipy.special import ndtr

    from samark.schemes.samark.selection import SelectionRule, select

    rng = np.random.default_rng(1)
    frames = null_cells(LAW, 2, 16, 4, 2, seed=3)
    emb = _unit(rng.standard_normal((9, 16)))
    margin = frames.cell_margin(emb)
    assert margin.shape == (2, 9) and (margin >= 0).all()
    for k in range(2):
        for i in range(9):
            top = np.sort(frames.anchors[k] @ emb[i])[::-1]
            assert margin[k, i] == pytest.approx(top[0] - top[1], abs=1e-5)
    # two candidates with the same flag-signed cosines: the one deep in its cell is picked
    # (a near-greedy softmax: exp(50 S)), while without ``stay`` the pick is a coin flip
    signed = np.array([[0.05, 0.05], [0.05, 0.05]])
    stay = ndtr(np.array([0.0005, 0.04]) / 0.016)
    picks = set()
    for seed in range(20):
        rule = SelectionRule(
            kappa=30.0,
            epsilon=50.0,
            lambda_div=0.0,
            lambda_nov=0.0,
            theta_sem=1.0,
            theta_ngram=1.0,
            ngram_n=3,
            ngram_filter=False,
            semantic_filter=False,
        )
        common = dict(
            context_ngrams=set(),
            vocabulary=set(),
            history=np.zeros((0, 2)),
            rule=rule,
            signed=signed,
            rng=np.random.default_rng(seed),
        )
        emb2 = _unit(rng.standard_normal((2, 2)))
        assert select(["a b c", "d e f"], emb2, None, None, stay=stay, **common).index == 1
        picks.add(select(["a b c", "d e f"], emb2, None, None, **common).index)
    assert picks == {0, 1}


def test_config_refuses_what_cells_cannot_do() -> None:
    with pytest.raises(ValueError, match="cell_margin_sd needs keyed cells"):
        SAMarkConfig.of(cells=0, cell_margin_sd=0.016).refuse_what_cells_cannot_do(0)
    with pytest.raises(ValueError, match="cell_margin_sd must be positive"):
        SAMarkConfig.of(cells=64, cell_margin_sd=0.0)
    with pytest.raises(ValueError, match="cells"):
        SAMarkConfig.of(cells=1)
    with pytest.raises(ValueError, match="payload_flags"):
        SAMarkConfig.of(cells=16, payload_flags=(1,))
    with pytest.raises(ValueError, match="steer"):
        SAMarkConfig.of(cells=16, steer=0.5)
    assert SAMarkConfig.of(cells=16).cells == 16


def test_detector_is_exact_on_human_text_over_keys(mpnet, news_leads) -> None:
    """The real detector with 16 cells, one key per human text: the lower tail of p stays
    within the binomial bound and is no heavier than uniform."""
    from samark.keys import WatermarkKey
    from samark.schemes.samark.config import SAMarkDetection
    from samark.schemes.samark.detector import SAMarkDetector
    from samark.segment import split_sentences

    texts, stored = news_leads
    texts = texts[:100]
    ps = []
    with mpnet.remembering(stored):
        mpnet.encode([s for t in texts for s in split_sentences(t)])
        for i, text in enumerate(texts):
            key = WatermarkKey(f"cells-fpr-{i:04d}".encode().ljust(32, b"0"), mpnet.identity)
            det = SAMarkDetector(
                key, mpnet, SAMarkDetection(statistic="scan", n_null=199), cells=16
            )
            ps.append(det.detect(text).p_value)
    bound = stats.binom.ppf(0.999, len(texts), 0.05)
    assert sum(p < 0.05 for p in ps) <= bound
    assert stats.kstest(ps, "uniform", alternative="greater").pvalue > 1e-3


def test_generation_picks_on_its_cells_and_detection_agrees(mpnet, mpnet_key, smollm2) -> None:
    from samark.schemes import create_scheme

    scheme = create_scheme(
        "samark", key=mpnet_key, embedder=mpnet, engine=smollm2, cells=16, candidates=8
    )
    gen = scheme.generate(
        "The city council voted on Tuesday to expand the bus network.",
        max_new_sentences=2,
        seed=4,
    )
    assert len(gen.sentences) == 2
    cells = scheme.detector.key_cells
    assert cells is not None
    signed = cells.signed(mpnet.encode(list(gen.sentences)))[0]
    matched = [s["kind"] == "matched" for s in gen.steps]
    # a matched sentence lies on its cell's flag side, all of them under one sign
    signs = {float(np.sign(row[0])) for row, m in zip(signed, matched, strict=True) if m}
    assert len(signs) <= 1
    for row, m in zip(signed, matched, strict=True):
        if m:
            assert np.all(np.sign(row) == np.sign(row[0]))
    d = scheme.detect(gen.text)
    assert d.details["flags"] and 0 < d.p_value <= 1
    # another key does not see it as its own
    assert scheme.detector_id().endswith("/cells16")


def test_cli_detect_with_cells(tmp_path) -> None:
    """``samark detect --cells 16`` scores on the key's cells (another statistic than static
    pivots give); a value no scheme can use, or --cells for a token scheme, exits 2."""
    from typer.testing import CliRunner

    from samark.cli import app

    runner = CliRunner()
    key = tmp_path / "k.key"
    assert runner.invoke(app, ["keygen", str(key)]).exit_code == 0
    text = (
        "The council met on Monday to discuss the budget. Several members asked for more "
        "money for schools. The mayor said the city could not afford new taxes this year."
    )
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"text": text}) + "\n")
    scores = {}
    for cells in ("0", "16"):
        result = runner.invoke(app, ["detect", str(source), "--key", str(key), "--cells", cells])
        assert result.exit_code in (0, 1), result.output
        record = json.loads(result.stdout.strip().splitlines()[-1])
        assert 0 < record["p_value"] <= 1 and record["n_units"] == 3
        scores[cells] = record["score"]
    assert scores["0"] != scores["16"]
    one = runner.invoke(app, ["detect", text, "--key", str(key), "--cells", "1"])
    assert one.exit_code == 2 and "--cells" in one.output
    kgw = runner.invoke(
        app, ["detect", text, "--key", str(key), "--cells", "16", "--scheme", "kgw", "--any-scheme"]
    )
    assert kgw.exit_code == 2 and "--cells is not an option of kgw" in kgw.output


def test_the_layered_mark_takes_its_keys_cells_and_samark_stays_static(mpnet) -> None:
    """samark-layered's default is the key's cells (64 for a new key, 16 for one made
    when 16 was the default, none for a key written before: its texts keep detecting as
    they were written); the paper's samark ignores them; an explicit value wins; what
    cells cannot do is refused naming the key's cells and the way out."""
    from samark.embed import new_key
    from samark.keys.samark_material import DEFAULT_CELLS
    from samark.schemes import create_scheme

    new, old = new_key(mpnet), new_key(mpnet, cells=0)
    layered = create_scheme("samark-layered", key=new, embedder=mpnet)
    assert layered.cells == DEFAULT_CELLS and layered.detector.key_cells is not None
    assert f"/cells{DEFAULT_CELLS}/" in layered.detector_id()
    earlier = create_scheme("samark-layered", key=new_key(mpnet, cells=16), embedder=mpnet)
    assert earlier.cells == 16 and "/cells16/" in earlier.detector_id()
    before = create_scheme("samark-layered", key=old, embedder=mpnet)
    assert before.cells == 0 and before.detector.key_cells is None
    assert "cells" not in before.detector_id()
    paper = create_scheme("samark", key=new, embedder=mpnet)
    assert paper.cells == 0 and paper.detector.key_cells is None
    assert create_scheme("samark-layered", key=new, embedder=mpnet, cells=0).cells == 0
    assert create_scheme("samark", key=old, embedder=mpnet, cells=64).cells == 64
    with pytest.raises(ValueError, match=rf"{DEFAULT_CELLS} keyed cells \(the key's\).*cells=0"):
        create_scheme("samark-layered", key=new, embedder=mpnet, payload_flags=(1,))
    flagged = create_scheme("samark-layered", key=old, embedder=mpnet, payload_flags=(1,))
    assert flagged.flag_channels == 2
    text = (
        "The council met on Monday to discuss the budget. Several members asked for more "
        "money for schools. The mayor said the city could not afford new taxes this year."
    )
    # the two layouts score the same text differently: a detector must use the text's own
    scores = [s.detect(text).details["semantic_score"] for s in (layered, before)]
    assert scores[0] != scores[1]
