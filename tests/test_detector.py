"""Detection on the real embedder: order invariance, bad input, and leaks."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from samark.errors import EmbedderMismatchError, EmptyTextError
from samark.keys import WatermarkKey
from samark.schemes.samark.config import SAMarkDetection
from samark.schemes.samark.detector import SAMarkDetector

TEXT = (
    "The council met on Monday to discuss the budget. Several members asked for more money "
    "for schools. The mayor said the city could not afford new taxes this year. A vote is "
    "expected next month. Residents will be able to comment at a public hearing. The "
    "meeting ended shortly after nine o'clock."
)


@pytest.fixture(scope="module")
def detector(mpnet, mpnet_key):
    return SAMarkDetector(mpnet_key, mpnet)


def test_result_fields(detector) -> None:
    d = detector.detect(TEXT)
    assert d.n_units == 6 and len(d.sentences) == 6
    assert 0 < d.p_value <= 1 and d.details["n_null"] == 999
    assert d.is_watermarked == (d.p_value < 0.01)
    # SAMark's own structures live in details: flags, evidence per (sentence, channel)
    assert len(d.details["flags"]) == 2 and set(d.details["flags"]) <= {-1, 1}
    assert np.array(d.details["evidence"]).shape == (6, 2)
    assert len(d.details["sentence_evidence"]) == 6 and len(d.details["channel_evidence"]) == 2
    assert set(d.diagnostics) == {"flag_side_share", "mean_signed_cosine"}
    record = d.to_dict(details=True)
    json.dumps(record)
    assert set(record) >= {"z", "p_value", "is_watermarked", "n_units", "details"}
    assert np.array(record["details"]["evidence"]).shape == (6, 2)
    brief = d.to_dict()  # the answer and the diagnostics, no per-sentence arrays
    assert "sentence_p_values" not in brief and brief["details"] == d.diagnostics
    assert len(record["sentence_p_values"]) == 6
    assert all(1 / 1000 <= p <= 1 for p in d.sentence_p_values)
    expected = tuple(i for i, p in enumerate(d.sentence_p_values) if p < 0.5)
    assert d.marked_sentences(0.5) == expected
    with pytest.raises(ValueError):
        d.marked_sentences(1.0)


def test_reorder_invariance(detector) -> None:
    sentences = detector.detect(TEXT).sentences
    base = detector.detect(TEXT)
    rng = random.Random(0)
    for _ in range(3):
        shuffled = list(sentences)
        rng.shuffle(shuffled)
        d = detector.detect(" ".join(shuffled))
        assert d.p_value == base.p_value
        assert d.z == pytest.approx(base.z, rel=1e-9)
        assert d.score == pytest.approx(base.score, rel=1e-9)
        # localisation follows each sentence wherever it moves
        moved = dict(zip(d.sentences, d.sentence_p_values, strict=True))
        assert moved == dict(zip(base.sentences, base.sentence_p_values, strict=True))


@pytest.mark.parametrize("text", ["", "   \n  ", "\t"])
def test_empty_text_is_a_clear_error(detector, text: str) -> None:
    with pytest.raises(EmptyTextError, match="no sentence"):
        detector.detect(text)


def test_one_sentence_is_well_defined(detector) -> None:
    d = detector.detect("Only one sentence here.")
    assert d.n_units == 1 and 0 < d.p_value <= 1


def test_binary_input_rejected(detector) -> None:
    with pytest.raises(TypeError):
        detector.detect(b"\x00\xff\x10")  # type: ignore[arg-type]


def test_control_characters_are_text(detector) -> None:
    d = detector.detect("Odd \x00 bytes \x07 inside. Still text.")
    assert d.n_units >= 1


def test_key_for_another_embedder_is_rejected(minilm, mpnet) -> None:
    key = WatermarkKey.generate(minilm.identity)
    with pytest.raises(EmbedderMismatchError):
        SAMarkDetector(key, mpnet)


def test_wrong_key_gives_different_answer(detector, mpnet) -> None:
    other = SAMarkDetector(WatermarkKey(b"another-test-key-000000000000000", mpnet.identity), mpnet)
    assert other.detect(TEXT).score != detector.detect(TEXT).score


def test_nothing_key_derived_in_outputs(detector, mpnet_key) -> None:
    d = detector.detect(TEXT)
    shown = repr(d) + json.dumps(d.to_dict(details=True)) + repr(detector)
    secret = mpnet_key._secret
    assert secret.hex() not in shown and repr(secret) not in shown
    pivots = mpnet_key.samark.pivots(768, 2)
    assert f"{pivots[0, 0]:.6f}" not in shown


@pytest.mark.parametrize("kwargs", [dict(n_null=5), dict(alpha=0.0), dict(statistic="max")])
def test_invalid_detection_params(mpnet, mpnet_key, kwargs) -> None:
    with pytest.raises(ValueError):
        SAMarkDetector(mpnet_key, mpnet, SAMarkDetection(**kwargs))
