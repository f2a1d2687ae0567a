"""The one verdict (samark.verdict): every pair of the mark's and the record's findings
has its own code, headline and conclusion, and the reasons say why a short text is weak
evidence and why a semantic p-value sits at its null draws' floor."""

from __future__ import annotations

import itertools

import pytest

from samark.verdict import (
    SHORT_TEXT_SENTENCES,
    ManifestState,
    MarkEvidence,
    MarkState,
    RecordEvidence,
    RecordState,
    verdict,
)

#: one mark's detection for each state: found, weak (a 3-sentence text), not found
MARKS = {
    MarkState.MARKED: MarkEvidence(p_value=0.0004, alpha=0.01, n_sentences=12),
    MarkState.WEAK: MarkEvidence(
        p_value=0.022, alpha=0.01, n_sentences=3, p_semantic=0.46, p_token=0.0072
    ),
    MarkState.NOT_MARKED: MarkEvidence(p_value=0.61, alpha=0.01, n_sentences=9),
}
RECORDS = {
    RecordState.SERVED: RecordEvidence(served=3, paraphrase=0, not_served=0),
    RecordState.PARAPHRASE: RecordEvidence(served=1, paraphrase=1, not_served=1),
    RecordState.NOT_SERVED: RecordEvidence(served=0, paraphrase=0, not_served=3),
    RecordState.NO_RECORD: None,
}


def test_every_pair_has_its_own_code_headline_and_conclusion() -> None:
    seen = {}
    for (mark_state, mark), (record_state, record) in itertools.product(
        MARKS.items(), RECORDS.items()
    ):
        v = verdict(mark, record)
        assert (v.mark, v.record) == (mark_state, record_state)
        assert v.code == f"{mark_state.value}.{record_state.value}"
        assert v.tone in {"good", "caution", "neutral"}
        seen[v.code] = (v.headline, v.conclusion)
    assert len(seen) == 12
    assert len({h for h, _ in seen.values()}) == 12, "two pairs share a headline"


def test_the_round_three_contradictions_read_as_one_story() -> None:
    # the server's own 3-sentence completion: served, the mark too weak alone
    v = verdict(MARKS[MarkState.WEAK], RECORDS[RecordState.SERVED])
    assert v.headline == "Served by this server"
    assert "too weak at 3 sentences to prove it without the record" in v.conclusion
    assert v.tone == "good"
    # marked with the same key elsewhere: said so, not "not served" in red
    v = verdict(MARKS[MarkState.MARKED], RECORDS[RecordState.NOT_SERVED])
    assert v.headline == "Marked with this key, not in this server's record"
    assert v.tone == "caution"
    # a lightly edited served text whose mark is weak
    v = verdict(MARKS[MarkState.WEAK], RECORDS[RecordState.PARAPHRASE])
    assert v.headline == "Likely edited from a text this server served"


def test_a_short_text_says_why_it_is_weak_evidence_and_a_long_one_does_not() -> None:
    short = verdict(MARKS[MarkState.WEAK])
    assert any(r.startswith("A short text is weak evidence: 3 sentences") for r in short.reasons)
    long = verdict(MARKS[MarkState.NOT_MARKED])
    assert not any("short text" in r for r in long.reasons)
    assert long.headline == "Not marked: the watermark was not found"
    edge = MarkEvidence(p_value=0.5, alpha=0.01, n_sentences=SHORT_TEXT_SENTENCES)
    assert edge.state is MarkState.NOT_MARKED
    assert MarkEvidence(p_value=0.5, alpha=0.01, n_sentences=SHORT_TEXT_SENTENCES - 1).state is (
        MarkState.WEAK
    )
    # near the level over a long text: weak too
    assert MarkEvidence(p_value=0.03, alpha=0.01, n_sentences=40).state is MarkState.WEAK


def test_a_semantic_p_at_its_floor_is_explained_from_the_draws_in_the_answer() -> None:
    answer = {
        "p_value": 0.0004,
        "alpha": 0.01,
        "n_units": 3,
        "details": {"p_semantic": 0.001, "p_token": 0.02, "n_null": 999},
    }
    mark = MarkEvidence.of_answer(answer)
    assert mark.semantic_floor == pytest.approx(0.001) and mark.at_floor
    floor = [r for r in verdict(mark).reasons if "smallest" in r]
    assert floor == [
        "The semantic p-value sits at 0.001, the smallest 999 null draws can give "
        "(1/(draws + 1)): the text scores above every draw, and the true p may be smaller."
    ]
    # sequential draws: the floor is that of the draws made
    answer["details"] = {"p_semantic": 1 / 50, "p_token": 0.5, "n_null": 999, "null_draws_made": 49}
    assert MarkEvidence.of_answer(answer).at_floor
    answer["details"] = {"p_semantic": 0.3, "p_token": 0.5, "n_null": 999}
    assert not MarkEvidence.of_answer(answer).at_floor


@pytest.mark.parametrize(
    ("manifest", "mark", "record", "starts"),
    [
        ("intact", MarkState.MARKED, RecordState.SERVED, "Manifest intact and mark found."),
        (
            "none",
            MarkState.MARKED,
            RecordState.SERVED,
            "Manifest stripped or never attached, but the mark and record agree.",
        ),
        (
            "altered",
            MarkState.MARKED,
            RecordState.PARAPHRASE,
            "Manifest present, but the text was edited after signing.",
        ),
        (
            "unverifiable",
            MarkState.MARKED,
            RecordState.NO_RECORD,
            "Manifest unverifiable: its signer is not trusted.",
        ),
    ],
)
def test_the_manifest_joins_the_story(manifest, mark, record, starts) -> None:
    v = verdict(MARKS[mark], RECORDS[record], manifest)
    assert v.manifest is ManifestState(manifest)
    assert v.conclusion.startswith(starts)
    assert v.to_dict()["manifest"] == manifest
    if manifest in ("altered", "unverifiable"):
        assert v.tone == "caution"
    assert verdict(MARKS[mark], RECORDS[record]).to_dict()["manifest"] is None


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="p_value"):
        MarkEvidence(p_value=1.5, alpha=0.01, n_sentences=3)
    with pytest.raises(ValueError, match="alpha"):
        MarkEvidence(p_value=0.5, alpha=0, n_sentences=3)
    with pytest.raises(ValueError, match="counts"):
        RecordEvidence(served=-1, paraphrase=0, not_served=0)
    with pytest.raises(ValueError):
        verdict(MARKS[MarkState.MARKED], None, "glowing")


def test_a_token_schemes_length_is_counted_in_tokens() -> None:
    mark = MarkEvidence.of_answer({"p_value": 0.4, "alpha": 0.01, "n_units": 31, "unit": "token"})
    v = verdict(mark)
    assert v.mark is MarkState.WEAK  # 31 tokens: short
    assert v.reasons[0] == "The mark: p = 0.4 over 31 tokens; the decision needs p below 0.01."
    assert "below 50 tokens even a marked text is often missed" in v.reasons[1]
    long = MarkEvidence.of_answer({"p_value": 0.4, "alpha": 0.01, "n_units": 300, "unit": "token"})
    assert long.state is MarkState.NOT_MARKED


def test_one_sentence_reads_in_the_singular() -> None:
    one = verdict(MarkEvidence(p_value=0.3, alpha=0.01, n_sentences=1))
    assert "1 sentence gives the detector few chances" in one.reasons[1]
    assert one.reasons[0] == "The mark: p = 0.3 over 1 sentence; the decision needs p below 0.01."
