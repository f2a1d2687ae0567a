"""Sentence segmentation shared by generation and detection."""

from __future__ import annotations

import pytest

from samark.segment import first_sentence, split_sentences, whole_sentences


def test_split_handles_abbreviations_and_quotes() -> None:
    text = 'The U.S. Army said Mr. Smith left at 3.30 p.m. on Monday. He then "went home." Done!'
    assert split_sentences(text) == [
        "The U.S. Army said Mr. Smith left at 3.30 p.m. on Monday.",
        'He then "went home."',
        "Done!",
    ]


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_split_empty(text: str) -> None:
    assert split_sentences(text) == []


def test_split_rejects_bytes() -> None:
    with pytest.raises(TypeError):
        split_sentences(b"bytes")  # type: ignore[arg-type]


def test_first_sentence_needs_the_next_one_to_begin() -> None:
    assert first_sentence(" The U.S.") is None
    assert first_sentence(" The U.S. Army left.") is None  # could still continue
    assert first_sentence(" The U.S. Army left. It") == " The U.S. Army left."
    assert first_sentence("\n\nIt rained. Then") == "\n\nIt rained."


def test_first_sentence_when_the_model_stopped() -> None:
    assert first_sentence(" It rained.", final=True) == " It rained."
    assert first_sentence(" It rained and", final=True) is None
    assert first_sentence("  ", final=True) is None
    assert first_sentence(" ... . It", final=False) is None  # no word in the first piece


def test_whole_sentences_drop_a_cut_off_tail() -> None:
    """What a token row keeps of a budget-cut generation: at most ``limit`` sentences, and
    no trailing sentence that lacks its terminal punctuation."""
    text = 'One is here. "Two is quoted." Three is cut off by the'
    assert whole_sentences(text, 5) == ["One is here.", '"Two is quoted."']
    assert whole_sentences(text, 1) == ["One is here."]
    assert whole_sentences("Done! And (so is this.)", 5) == ["Done!", "And (so is this.)"]
    assert whole_sentences("no end at all", 3) == []
