"""Attack fidelity on real text with a real embedder: each field moves the way it should."""

from __future__ import annotations

import pytest

from samark.evaluation.fidelity import (
    is_meaning_preserving,
    measure,
    ngram4_copy,
    word_overlap,
)

ORIGINAL = (
    "The city council approved the new budget on Tuesday after a long debate. "
    "Several members raised concerns about rising costs for public transport. "
    "The mayor said the plan would protect schools and hospitals. "
    "Critics argued that the spending was too high for a small town."
)


def test_an_unchanged_text_keeps_everything(minilm) -> None:
    (f,) = measure(minilm, [ORIGINAL], [ORIGINAL])
    assert f.sentences_before == f.sentences_after == 4 and f.sentence_ratio == 1.0
    assert f.aligned_similarity == pytest.approx(1.0, abs=1e-6)
    assert f.aligned_precision == pytest.approx(1.0, abs=1e-6)
    assert f.ngram4_copy == 1.0 and f.word_overlap == 1.0
    assert f.similarity == pytest.approx(1.0, abs=1e-6)


def test_dropped_and_invented_sentences_show(minilm) -> None:
    kept = ". ".join(ORIGINAL.split(". ")[:2]) + "."
    invented = ORIGINAL + " A dragon was seen flying over the harbour at dawn."
    dropped, added = measure(minilm, [ORIGINAL, ORIGINAL], [kept, invented])
    # half the sentences gone: recall falls, precision (what is left is grounded) does not
    assert dropped.sentence_ratio == 0.5
    assert dropped.aligned_similarity < 0.8 < dropped.aligned_precision
    assert dropped.word_overlap < 0.6
    # an invented sentence: every original sentence is still there, the output is not all
    # grounded in it
    assert added.sentence_ratio == 1.25
    assert added.aligned_similarity == pytest.approx(1.0, abs=1e-6)
    assert added.aligned_precision < 0.9


def test_rewording_lowers_copy_but_not_alignment(minilm) -> None:
    reworded = (
        "On Tuesday, after lengthy discussion, the town council passed its new budget. "
        "A number of members worried about the growing price of public transport. "
        "According to the mayor, the plan would shield hospitals and schools. "
        "Opponents said a small town should not spend so much."
    )
    (f,) = measure(minilm, [ORIGINAL], [reworded])
    assert f.sentence_ratio == 1.0
    assert f.aligned_similarity > 0.7
    assert f.ngram4_copy < 0.1


def test_edge_cases() -> None:
    assert ngram4_copy("", "") == 1.0
    assert ngram4_copy("one two three four", "") == 0.0
    assert word_overlap("", "anything") == 1.0
    assert word_overlap("a a b", "a b") == pytest.approx(2 / 3)
    assert is_meaning_preserving([0.9, 0.85, 0.5])
    assert not is_meaning_preserving([0.9, 0.7, 0.5])
    assert not is_meaning_preserving([])


def test_empty_attack_output_has_no_alignment(minilm) -> None:
    (f,) = measure(minilm, [ORIGINAL], [""])
    assert f.sentences_after == 0 and f.sentence_ratio == 0.0
    assert f.aligned_similarity == 0.0 and f.similarity == 0.0
