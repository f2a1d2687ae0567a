"""Attacks on real text with the real models: seeded, of the asked strength, keeping what
they should."""

from __future__ import annotations

from collections import Counter

import pytest

from samark.evaluation.attacks import ATTACKS, create_attack, word_overlap
from samark.segment import split_sentences

TEXT = (
    "The city council approved the new budget on Tuesday after a long debate. "
    "Several members raised concerns about rising costs for public transport. "
    "The mayor said the plan would protect schools and hospitals. "
    "Critics argued that the spending was too high for a small town. "
    "The vote passed by a narrow margin of seven to five. "
    "Residents will see the changes from next spring."
)
HUMAN = "A reporter watched the meeting. Nobody left early. The room was very warm."


def _has_wordnet() -> bool:
    from samark.wordnet import wordnet_source

    return wordnet_source() is not None


def test_registry_lists_every_attack() -> None:
    assert {"shuffle", "word-delete", "word-substitute", "human-mix", "doc-p", "doc-t"} <= set(
        ATTACKS.names()
    )


def test_shuffle_keeps_sentences_changes_order() -> None:
    a = create_attack("shuffle")
    out = a.apply(TEXT, seed=1)
    assert out != TEXT
    assert Counter(split_sentences(out)) == Counter(split_sentences(TEXT))
    assert a.apply(TEXT, seed=1) == out  # seeded
    assert a.apply("Only one sentence here.", seed=1) == "Only one sentence here."


@pytest.mark.parametrize("ratio", [0.05, 0.15, 0.30])
def test_word_deletion_removes_the_asked_share(ratio) -> None:
    a = create_attack("word-delete", ratio=ratio)
    out = a.apply(TEXT, seed=3)
    n = len(TEXT.split())
    assert len(out.split()) == n - round(ratio * n)
    assert a.apply(TEXT, seed=3) == out
    assert a.apply(TEXT, seed=4) != out


@pytest.mark.skipif(not _has_wordnet(), reason="WordNet not installed (samark models install)")
@pytest.mark.parametrize("ratio", [0.05, 0.15, 0.30])
def test_synonym_substitution_uses_wordnet_synonyms(ratio) -> None:
    a = create_attack("word-substitute", ratio=ratio)
    out = a.apply(TEXT, seed=2)
    before, after = TEXT.split(), out.split()
    assert len(before) == len(after)
    changed = [(b, c) for b, c in zip(before, after, strict=True) if b != c]
    assert len(changed) == round(ratio * len(before))
    for b, c in changed:
        word = b.strip(".,").lower()
        assert c.strip(".,").lower() in [s.lower() for s in a.synonyms(word)]
    assert a.apply(TEXT, seed=2) == out


def test_human_mix_reaches_the_ratio_and_keeps_order() -> None:
    a = create_attack("human-mix", ratio=0.3)
    out = split_sentences(a.apply(TEXT, seed=0, human=HUMAN))
    mine = split_sentences(TEXT)
    human = [s for s in out if s not in mine]
    assert [s for s in out if s in mine] == mine  # watermarked order kept
    assert len(human) == round(len(mine) * 0.3 / 0.7)
    assert human == split_sentences(HUMAN)[: len(human)]


def test_back_translation_offline() -> None:
    a = create_attack("doc-t", via="pt")
    out = a.apply(TEXT, seed=0)
    assert out and out != TEXT
    assert 0.3 < word_overlap(TEXT, out) < 1.0


def test_paraphrase_with_the_local_instruct_model(smollm2) -> None:
    a = create_attack("doc-p", prompt="II", max_tokens=48)
    out = a.apply_batch([TEXT, HUMAN], seed=5)
    assert all(o.strip() for o in out)
    assert out[0] != TEXT
    assert a.apply_batch([TEXT, HUMAN], seed=5) == out  # seeded


def test_bad_parameters_are_clear_errors() -> None:
    from samark.errors import SamarkError

    with pytest.raises(SamarkError, match="ratio"):
        create_attack("word-delete", ratio=1.5)
    with pytest.raises(SamarkError, match="bad parameters"):
        create_attack("shuffle", strength=3)
    with pytest.raises(SamarkError, match="prompt"):
        create_attack("doc-p", prompt="III")
