"""A short text's detailed answer says why it is weak evidence (issue 65, item 2): the
number of sentences and the semantic p-value's floor under the detector's null draws;
a text the verdict does not call short (5 sentences or more) gets no such line. Real
SAMark detections (mpnet)."""

from __future__ import annotations

import pytest

from samark import SAMark, SAMarkConfig
from samark.detection.pipeline import prepare
from samark.detection.ring_detector import RingDetector
from samark.serving.answers import answers
from samark.serving.short_text import short_text_note
from samark.verdict import SHORT_TEXT_SENTENCES

SENTENCES = [
    "The council approved the budget on Tuesday after a long debate.",
    "Residents had asked for more money for parks and libraries.",
    "The mayor said the plan balances those needs.",
    "Opponents argued that taxes would rise next year.",
    "The vote was five to two.",
    "A second vote on the schools is expected in March.",
    "Both sides said they would keep talking.",
]


def test_a_short_text_says_why_it_is_weak_evidence_and_a_long_one_does_not(
    mpnet, mpnet_key
) -> None:
    scheme = SAMark(mpnet_key, config=SAMarkConfig.of(statistic="scan", n_null=199), embedder=mpnet)
    ring = RingDetector.of_scheme(scheme)
    short, one, long = (" ".join(SENTENCES[:k]) for k in (3, 1, SHORT_TEXT_SENTENCES))
    got = answers(ring, prepare(ring, [short, one, long]), details=True)
    assert got[0]["n_units"] == 3
    note = got[0]["short_text"]
    # its sentence count and the floor of 199 null draws: 1 / 200
    assert note.startswith("3 sentences carry little evidence")
    assert "cannot go below 0.005" in note and "199 null draws" in note
    assert got[1]["short_text"].startswith("1 sentence carries")
    assert "short_text" not in got[2]  # 5 sentences, not short: no line
    # the same line as the function gives for the detection itself
    assert short_text_note(scheme.detect(short)) == note
    # and none where details are not asked for
    assert "short_text" not in answers(ring, prepare(ring, [short]), details=False)[0]
    # a text not prepared is the caller's mistake, said at once (not an AttributeError)
    with pytest.raises(TypeError, match=r"pipeline\.prepare"):
        answers(ring, [short], details=False)  # type: ignore[list-item]
