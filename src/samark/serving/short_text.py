"""Why a short text is weak evidence: the line a detailed answer and the page give a text the
verdict calls short (fewer than :data:`~samark.verdict.SHORT_TEXT_SENTENCES` sentences).

A layered mark's semantic layer decides on what the sentences say, so a text of a few
sentences gives it little to decide on. At 3 sentences it found 29% of marked texts after
a local paraphrase (Doc-P) and 39% after back-translation (Doc-T), 75% untouched, at p < 0.01
(the default run's 80 texts, ``docs/results/2026-12-05-short-texts``). Its p-value is
also a rank among the detector's null draws, so it cannot go below ``1 / (n_null + 1)``
(0.001 with 999 draws). A "not marked" answer on a short text is then no evidence that the
text was not marked.
"""

from __future__ import annotations

from samark.detection_result import Detection
from samark.verdict import SHORT_TEXT_SENTENCES


def short_text_note(detection: Detection) -> str | None:
    """The line for ``detection``'s text if it is short (module docstring), else None."""
    n = detection.n_units
    if detection.unit != "sentence" or n >= SHORT_TEXT_SENTENCES:
        return None
    said = "1 sentence carries" if n == 1 else f"{n} sentences carry"
    n_null = detection.details.get("n_null")
    floor = ""
    if isinstance(n_null, int) and n_null > 0:
        floor = (
            f"; the semantic p-value cannot go below {1 / (n_null + 1):.3g}, the key ranked "
            f"first among {n_null:,} null draws"
        )
    return (
        f"{said} little evidence of meaning{floor}. At 3 sentences the semantic layer "
        "finds about a third of marked texts after a paraphrase, so a text not found here "
        "may still be marked; each sentence more adds evidence (at 12 sentences, at least "
        "three in four are found after the same paraphrases)."
    )
