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


def test_initials_and_titles_stay_in_their_sentence() -> None:
    """Issue 65: "Mr. E.H.C. Davis" was two fragments, so max_sentences 3 gave two real
    sentences; a title punkt never learned ("Rev.", "Capt.") split too."""
    text = (
        "Mr. E.H.C. Davis wrote to Dr. Smith of the U.S. Army. She met Rev. Green and "
        "Capt. Hook at noon. They left for the U.K. The weather was bad."
    )
    assert split_sentences(text) == [
        "Mr. E.H.C. Davis wrote to Dr. Smith of the U.S. Army.",
        "She met Rev. Green and Capt. Hook at noon.",
        # an initialism still ends a sentence before a word that starts sentences
        "They left for the U.K.",
        "The weather was bad.",
    ]
    assert len(whole_sentences(text, 3)) == 3


@pytest.mark.parametrize(
    ("corpus", "sentence"),
    [
        (
            "fortunes",
            "Naked children have never played in _our_ fountains, and I.M. Pei will never "
            "be happy on Route 66.",
        ),
        ("fortunes", "U.S. Navy Capt. Grace Murray Hopper has firsthand explanation."),
        ("cnn_dailymail", "Former Minnesota Gov. Tim Pawlenty, who famously called on the GOP"),
        ("jane_austen", "the Right Hon. Lord Ravenshaw, in Cornwall"),
    ],
)
def test_real_text_keeps_initials_and_titles_together(corpus: str, sentence: str) -> None:
    """Sentences of the corpora the calibration reads, split whole (each was two
    fragments before)."""
    from samark.datasets import load_dataset
    from samark.datasets.debian_corpora import fortunes

    try:
        docs = fortunes(min_sentences=1) if corpus == "fortunes" else load_dataset(corpus)
    except Exception as exc:  # a Debian corpus not installed here
        pytest.skip(f"{corpus} is not available: {exc}")
    flat = (" ".join(d.text.split()) for d in docs)
    text = next((t for t in flat if sentence.split(",")[0] in t), None)
    assert text is not None, f"{corpus} no longer holds the sentence"
    assert any(sentence in s for s in split_sentences(text)), split_sentences(text)
